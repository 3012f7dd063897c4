"""Pipeline settings from the environment, per docs/contract.md's Settings table.

Read once, when Dagster loads the definitions or the CLI starts; never at import.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import date
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    landing_dir: Path
    lake_dir: Path
    start_date: date
    max_lateness_days: int
    rate_max_age_days: int = 7  # the contract's fixed as-of window for FX rates
    segments: SegmentSettings | None = None  # the segment service; None: not configured

    @classmethod
    def from_env(cls, env: os._Environ | dict | None = None) -> Settings:
        env = os.environ if env is None else env
        try:
            start = date.fromisoformat(env.get("BACKFILL_START_DATE", "2024-01-01"))
            lateness = int(env.get("BACKFILL_MAX_LATENESS_DAYS", "7"))
        except ValueError as exc:
            raise ValueError(f"bad BACKFILL_START_DATE or BACKFILL_MAX_LATENESS_DAYS: {exc}") from exc
        if lateness < 0:
            raise ValueError("BACKFILL_MAX_LATENESS_DAYS must be >= 0")
        return cls(
            landing_dir=Path(env.get("BACKFILL_LANDING_DIR", "data/landing")).resolve(),
            lake_dir=Path(env.get("BACKFILL_LAKE_DIR", "data/lake")).resolve(),
            start_date=start,
            max_lateness_days=lateness,
            segments=SegmentSettings.from_env(env),
        )


@dataclass(frozen=True)
class SegmentSettings:
    """How ``stg_orders_enriched`` reaches the customer-segment service (``enrichment.client``)."""

    url: str
    rps: int = 20  # the service's limit, which the shared bucket keeps to
    live_share: float = 0.4  # of the bucket, reserved for the live lane
    batch_size: int = 50  # customers per request
    bucket_path: Path = Path(".dagster_home/segments_bucket.json")

    @classmethod
    def from_env(cls, env) -> SegmentSettings | None:
        """None when ``BACKFILL_SEGMENTS_URL`` is unset: the enrichment's days are then held."""
        url = env.get("BACKFILL_SEGMENTS_URL", "").strip()
        if not url:
            return None
        try:
            rps = int(env.get("BACKFILL_SEGMENTS_RPS", "20"))
            share = float(env.get("BACKFILL_SEGMENTS_LIVE_SHARE", "0.4"))
            batch = int(env.get("BACKFILL_SEGMENTS_BATCH", "50"))
        except ValueError as exc:
            raise ValueError(f"bad BACKFILL_SEGMENTS_RPS, _LIVE_SHARE or _BATCH: {exc}") from exc
        if rps < 2 or not 0 <= share < 1 or batch < 1:
            raise ValueError("need BACKFILL_SEGMENTS_RPS >= 2, 0 <= BACKFILL_SEGMENTS_LIVE_SHARE < 1, "
                             "BACKFILL_SEGMENTS_BATCH >= 1")
        home = Path(env.get("DAGSTER_HOME", ".dagster_home"))
        bucket = Path(env.get("BACKFILL_SEGMENTS_BUCKET", str(home / "segments_bucket.json"))).resolve()
        return cls(url=url, rps=rps, live_share=share, batch_size=batch, bucket_path=bucket)
