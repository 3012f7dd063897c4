"""A throwaway landing zone, lake and Dagster instance for pipeline tests, and readers of the
lake that go straight to delta-rs (independent of the lake layer under test)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections import Counter
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import dagster as dg
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from backfill_assets.event_log import EngineReusingSqliteEventLogStorage
from backfill_assets.settings import RETRY_DELAY_ENV, Settings
from backfill_assets_testkit.reference import Reference

RETRY_DELAY_S = "0.5"  # the retry delay of every pipeline the tests run


@dataclass
class PipelineEnv:
    settings: Settings
    instance: dg.DagsterInstance
    home: Path

    def rows(self, table: str) -> list[dict]:
        where = f"{str(self.settings.lake_dir).rstrip('/')}/{table}"
        if where.startswith("s3://"):
            try:
                found = DeltaTable(where, storage_options=s3_options())
            except TableNotFoundError:
                return []
            return found.to_pyarrow_table().to_pylist()
        if not (Path(where) / "_delta_log").exists():
            return []
        return DeltaTable(where).to_pyarrow_table().to_pylist()

    def multiset(self, table: str) -> Counter:
        return Counter(tuple(sorted(r.items())) for r in self.rows(table))


def s3_options() -> dict[str, str]:
    """delta-rs's storage options from the standard AWS variables of this process."""
    names = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")
    return {n: os.environ[n] for n in names if n in os.environ} | {"AWS_ALLOW_HTTP": "true"}


def assert_matches_reference(env: PipelineEnv, landing: Path, days: list[date]) -> None:
    """raw, quarantine, staging and the fact of ``days`` as the pipeline built them in ``env``'s
    lake equal the reference implementation's on the local copy of the landing zone."""
    reference = Reference(landing, env.settings.max_lateness_days)
    arrivals = [
        d
        for d in reference.arrival_dates
        if days[0] <= d <= days[-1] + timedelta(days=env.settings.max_lateness_days)
    ]
    expected = reference.expected(arrivals)
    assert Counter(
        (r["arrival_date"], r["source_file"], r["line_number"], r["payload"])
        for r in env.rows("raw/orders")
    ) == Counter(
        (r.arrival_date, r.source_file, r.line_number, r.payload) for r in expected.raw_orders
    )
    assert Counter(
        (r["arrival_date"], r["source_file"], r["line_number"], r["reason"])
        for r in env.rows("quarantine/orders")
    ) == Counter(
        (q.arrival_date, q.source_file, q.line_number, q.reason) for q in expected.quarantine
    )

    staging, held = reference.staging(days)
    assert held == set()
    assert sorted(
        (
            r["event_date"],
            r["order_id"],
            r["status"],
            r["amount"],
            r["currency"],
            r["country"],
            r["usd_per_unit"],
            r["amount_usd"],
            r["updated_at"].replace(tzinfo=None),
        )
        for r in env.rows("staging/orders")
    ) == sorted(
        (
            s.event_date,
            s.order_id,
            s.status,
            s.amount,
            s.currency,
            s.country,
            s.usd_per_unit,
            s.amount_usd,
            s.updated_at.replace(tzinfo=None),
        )
        for s in staging
    )
    assert (
        sorted(tuple(r.values()) for r in env.rows("fact/daily_revenue"))
        == sorted(
            (
                f.event_date,
                f.country,
                f.orders,
                f.placed_orders,
                f.paid_orders,
                f.cancelled_orders,
                f.revenue_usd,
            )
            for f in reference.fact(days)
        )
        and staging
    )


@contextlib.contextmanager
def pipeline_env(
    root: Path,
    start_date: str = "2023-12-20",
    lateness: int = 7,
    landing: str | None = None,
    lake: str | None = None,
):
    """Point the pipeline's environment at ``root`` (or the landing zone and lake at the
    locations given, such as ``s3://`` ones) and open a Dagster instance there."""
    env = {
        "BACKFILL_LANDING_DIR": landing or str(root / "landing"),
        "BACKFILL_LAKE_DIR": lake or str(root / "lake"),
        "BACKFILL_START_DATE": start_date,
        "BACKFILL_MAX_LATENESS_DAYS": str(lateness),
        "DAGSTER_HOME": str(root / "dagster_home"),
        RETRY_DELAY_ENV: RETRY_DELAY_S,  # a retried step waits 0.5 s, then 1.5 s, not 5 and 15
    }
    (root / "dagster_home").mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        mp = stack.enter_context(_patched_env(env))
        del mp
        instance = stack.enter_context(dagster_test_instance(root / "dagster_home"))
        yield PipelineEnv(Settings.from_env(), instance, root / "dagster_home")


@contextlib.contextmanager
def copied_env(source: PipelineEnv, root: Path):
    """A pipeline environment at ``root`` that starts as a copy of ``source``'s as it is now:
    everything under its root (landing zone, lake, Dagster's runs and events, files beside
    them), with the same first partition and lateness. What is done in the copy leaves
    ``source`` as it was: one state built once serves every test that changes it. Nothing may
    run in ``source`` while it is copied."""
    source_root = source.home.parent
    for folder in (source.settings.landing_dir, source.settings.lake_dir):
        assert Path(folder).is_relative_to(source_root), f"{folder} is not under {source_root}"
    # Not the instance's configuration, which names its folders (the copy's instance writes its
    # own); not SQLite's shared-memory index of a write-ahead log, which the first connection to
    # the copy rebuilds from the log itself.
    shutil.copytree(
        source_root,
        root,
        ignore=shutil.ignore_patterns("dagster.yaml", "*-shm"),
        dirs_exist_ok=True,
    )
    with pipeline_env(
        root,
        start_date=source.settings.start_date.isoformat(),
        lateness=source.settings.max_lateness_days,
    ) as env:
        yield env


def dagster_test_instance(home: Path) -> contextlib.AbstractContextManager[dg.DagsterInstance]:
    """Dagster's test instance at ``home``, its event log stored as the CLI's instance on SQLite
    stores it (``cli/instance.py``: each file's engine kept, ``event_log.py``)."""
    event_log = {
        "module": EngineReusingSqliteEventLogStorage.__module__,
        "class": EngineReusingSqliteEventLogStorage.__name__,
        "config": {"base_dir": str(home / "history" / "runs")},
    }
    return dg.instance_for_test(temp_dir=str(home), overrides={"event_log_storage": event_log})


@contextlib.contextmanager
def _patched_env(env: dict[str, str]):
    import pytest

    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        yield mp
