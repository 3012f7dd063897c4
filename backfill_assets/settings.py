"""Pipeline settings from the environment, per docs/contract.md's Settings table.

Read once, when Dagster loads the definitions or the CLI starts; never at import.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TypeVar

# The warning checks' names (defs/event_days/quality.py) that BACKFILL_BLOCKING_QUALITY_CHECKS
# may name; spelled here so a typo in the variable is an error, not a silently warning check.
QUALITY_CHECK_NAMES = (
    "row_count_band",
    "status_share_band",
    "currency_share_band",
    "revenue_per_order_band",
)
SKEW_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class QualitySettings:
    """The warning checks' bands (docs/contract.md, "Warning checks")."""

    band_k: float = 4.0  # half-width in robust standard deviations (1.4826 * MAD)
    trailing_days: int = 28
    min_history: int = 7  # fewer trailing days with figures: the check passes, "not enough history"
    blocking: frozenset[str] = frozenset()  # checks that hold the day instead of warning


@dataclass(frozen=True)
class SkewSettings:
    """Partition-key skew: when a key is hot, and whether staging salts its write."""

    hot_key_share: float = 0.2
    mitigation: str = "auto"  # auto: when a key is hot; on: always; off: never
    salt_buckets: int = 8


@dataclass(frozen=True)
class Settings:
    landing_dir: Path
    lake_dir: Path
    start_date: date
    max_lateness_days: int
    rate_max_age_days: int = 7  # the contract's fixed as-of window for FX rates
    segments: SegmentSettings | None = None  # the segment service; None: not configured
    quality: QualitySettings = field(default_factory=QualitySettings)
    skew: SkewSettings = field(default_factory=SkewSettings)

    @classmethod
    def from_env(cls, env: os._Environ | dict | None = None) -> Settings:
        env = os.environ if env is None else env
        try:
            start = date.fromisoformat(env.get("BACKFILL_START_DATE", "2024-01-01"))
            lateness = int(env.get("BACKFILL_MAX_LATENESS_DAYS", "7"))
        except ValueError as exc:
            raise ValueError(
                f"bad BACKFILL_START_DATE or BACKFILL_MAX_LATENESS_DAYS: {exc}"
            ) from exc
        if lateness < 0:
            raise ValueError("BACKFILL_MAX_LATENESS_DAYS must be >= 0")
        return cls(
            landing_dir=Path(env.get("BACKFILL_LANDING_DIR", "data/landing")).resolve(),
            lake_dir=Path(env.get("BACKFILL_LAKE_DIR", "data/lake")).resolve(),
            start_date=start,
            max_lateness_days=lateness,
            segments=SegmentSettings.from_env(env),
            quality=quality_from_env(env),
            skew=skew_from_env(env),
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
    def from_env(cls, env: Mapping[str, str]) -> SegmentSettings | None:
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
            raise ValueError(
                "need BACKFILL_SEGMENTS_RPS >= 2, 0 <= BACKFILL_SEGMENTS_LIVE_SHARE < 1, "
                "BACKFILL_SEGMENTS_BATCH >= 1"
            )
        home = Path(env.get("DAGSTER_HOME", ".dagster_home"))
        bucket = Path(
            env.get("BACKFILL_SEGMENTS_BUCKET", str(home / "segments_bucket.json"))
        ).resolve()
        return cls(url=url, rps=rps, live_share=share, batch_size=batch, bucket_path=bucket)


_N = TypeVar("_N", int, float)


def _number(
    env: Mapping[str, str],
    name: str,
    default: str,
    kind: Callable[[str], _N],
    low: float = 0.0,
) -> _N:
    try:
        value = kind(env.get(name, default))
    except ValueError as exc:
        raise ValueError(f"bad {name}: {exc}") from exc
    if value < low:
        raise ValueError(f"{name} must be >= {low}")
    return value


def quality_from_env(env: Mapping[str, str]) -> QualitySettings:
    names = frozenset(
        n.strip() for n in env.get("BACKFILL_BLOCKING_QUALITY_CHECKS", "").split(",") if n.strip()
    )
    unknown = sorted(names - set(QUALITY_CHECK_NAMES))
    if unknown:
        raise ValueError(
            f"BACKFILL_BLOCKING_QUALITY_CHECKS names unknown checks {unknown}; "
            f"known: {', '.join(QUALITY_CHECK_NAMES)}"
        )
    return QualitySettings(
        band_k=_number(env, "BACKFILL_BAND_K", "4", float, 0.0),
        trailing_days=_number(env, "BACKFILL_BAND_TRAILING_DAYS", "28", int, 1),
        min_history=_number(env, "BACKFILL_BAND_MIN_HISTORY", "7", int, 1),
        blocking=names,
    )


def skew_from_env(env: Mapping[str, str]) -> SkewSettings:
    mode = env.get("BACKFILL_SKEW_MITIGATION", "auto")
    if mode not in SKEW_MODES:
        raise ValueError(
            f"BACKFILL_SKEW_MITIGATION must be one of {', '.join(SKEW_MODES)}, not {mode!r}"
        )
    share = _number(env, "BACKFILL_HOT_KEY_SHARE", "0.2", float, 0.0)
    if share >= 1:
        raise ValueError("BACKFILL_HOT_KEY_SHARE must be below 1")
    return SkewSettings(
        hot_key_share=share,
        mitigation=mode,
        salt_buckets=_number(env, "BACKFILL_SALT_BUCKETS", "8", int, 1),
    )
