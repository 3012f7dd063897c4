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
        )
