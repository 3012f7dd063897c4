"""Transient failures are retried with exponential backoff; the retried write leaves exactly the
landed rows (the failed attempts' files are never committed)."""

from __future__ import annotations

from collections import Counter
from datetime import date

import dagster as dg
import pytest
from dagster._core.events import DagsterEventType

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import RAW_FX_RATES
from backfill_assets.cli.runner import execute
from backfill_assets.demo.generate import generate_feed
from backfill_assets_testkit.pipeline_env import RETRY_DELAY_S, pipeline_env

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

FIRST, LAST = date(2024, 1, 1), date(2024, 1, 3)


def landed_rate_lines(landing) -> Counter:
    """(rate_date, file) -> non-blank lines after the header, read straight from the files."""
    counts: Counter = Counter()
    for path in (landing / "fx_rates").glob("rate_date=*/*.csv"):
        day = date.fromisoformat(path.parent.name.split("=")[1])
        if FIRST <= day <= LAST:
            lines = [line for line in path.read_text().splitlines() if line.strip()]
            counts[(day, f"fx_rates/{path.parent.name}/{path.name}")] = len(lines) - 1
    return counts


def test_transient_io_failure_is_retried_with_backoff_and_leaves_the_landed_rows(
    tmp_path, spark, monkeypatch
):
    with pipeline_env(tmp_path, start_date="2023-12-20") as env:
        generate_feed(env.settings.landing_dir, FIRST, LAST, orders_per_day=5, seed=4)
        faults = tmp_path / "faults"
        faults.mkdir()
        monkeypatch.setenv("BACKFILL_LAKE_PAUSE_DIR", str(faults))
        monkeypatch.setenv("BACKFILL_LAKE_FAIL_AT", "after_files")  # files written, no commit
        monkeypatch.setenv("BACKFILL_LAKE_FAIL_TIMES", "2")

        outcome = execute(RunPlan((RAW_FX_RATES,), FIRST, LAST), env.instance)

        assert sorted(p.name for p in faults.iterdir()) == [
            "after_files.failed.1",
            "after_files.failed.2",
        ]
        assert outcome.success, outcome.error
        retries = env.instance.all_logs(outcome.run_id, of_type=DagsterEventType.STEP_UP_FOR_RETRY)
        waits = [e.dagster_event.event_specific_data.seconds_to_wait for e in retries]
        delay = float(RETRY_DELAY_S)  # pipeline_env's BACKFILL_RETRY_DELAY_SECONDS
        assert waits == [delay, 3 * delay]  # exponential backoff: (2^n - 1) * delay
        assert sorted(outcome.published[RAW_FX_RATES]) == [FIRST, date(2024, 1, 2), LAST]
        stored = Counter((r["rate_date"], r["source_file"]) for r in env.rows("raw/fx_rates"))
        assert stored == landed_rate_lines(env.settings.landing_dir) and stored


def test_a_step_that_keeps_failing_stops_after_two_retries(tmp_path, spark, monkeypatch):
    with pipeline_env(tmp_path, start_date="2023-12-20") as env:
        generate_feed(env.settings.landing_dir, FIRST, FIRST, orders_per_day=5, seed=4)
        faults = tmp_path / "faults"
        faults.mkdir()
        monkeypatch.setenv("BACKFILL_LAKE_PAUSE_DIR", str(faults))
        monkeypatch.setenv("BACKFILL_LAKE_FAIL_AT", "after_files")
        monkeypatch.setenv("BACKFILL_LAKE_FAIL_TIMES", "5")

        outcome = execute(RunPlan((RAW_FX_RATES,), FIRST, FIRST), env.instance)

        assert not outcome.success
        assert len(list(faults.iterdir())) == 3  # the first attempt and two retries
        run = env.instance.get_run_by_id(outcome.run_id)
        assert run.status == dg.DagsterRunStatus.FAILURE
        assert env.rows("raw/fx_rates") == []  # nothing half-written was committed
