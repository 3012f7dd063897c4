"""A throwaway landing zone, lake and Dagster instance for pipeline tests, and readers of the
lake that go straight to delta-rs (independent of the lake layer under test)."""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from deltalake import DeltaTable

from backfill_assets.settings import Settings


@dataclass
class PipelineEnv:
    settings: Settings
    instance: dg.DagsterInstance
    home: Path

    def rows(self, table: str) -> list[dict]:
        path = self.settings.lake_dir / table
        if not (path / "_delta_log").exists():
            return []
        return DeltaTable(str(path)).to_pyarrow_table().to_pylist()

    def multiset(self, table: str) -> Counter:
        return Counter(tuple(sorted(r.items())) for r in self.rows(table))


@contextlib.contextmanager
def pipeline_env(root: Path, start_date: str = "2023-12-20", lateness: int = 7):
    """Point the pipeline's environment at ``root`` and open a Dagster instance there."""
    env = {
        "BACKFILL_LANDING_DIR": str(root / "landing"),
        "BACKFILL_LAKE_DIR": str(root / "lake"),
        "BACKFILL_START_DATE": start_date,
        "BACKFILL_MAX_LATENESS_DAYS": str(lateness),
        "DAGSTER_HOME": str(root / "dagster_home"),
    }
    (root / "dagster_home").mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        mp = stack.enter_context(_patched_env(env))
        del mp
        instance = stack.enter_context(dg.instance_for_test(temp_dir=str(root / "dagster_home")))
        yield PipelineEnv(Settings.from_env(), instance, root / "dagster_home")


@contextlib.contextmanager
def _patched_env(env: dict[str, str]):
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        yield mp
