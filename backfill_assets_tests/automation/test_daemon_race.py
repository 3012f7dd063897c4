"""End to end with the real dagster-daemon and the late-data sensor on: a range backfill raced by
new arrival folders and a rebuild of its last days; once the dust settles, every table equals
the reference."""

from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

import dagster as dg
import pytest

from backfill_assets.automation.stale_days import find_stale_days
from backfill_assets.automation.state import load_cursor
from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import (
    EVENT_DAYS_STEP,
    RAW_FX_RATES,
    RAW_ORDERS,
    REQUEST_TAG,
    STEP_ASSETS,
)
from backfill_assets.cli.backfill import run_backfill
from backfill_assets.cli.instance import prepare_instance_yaml
from backfill_assets.cli.runner import execute
from backfill_assets.late_data import LandingCursor
from backfill_assets.settings import Settings
from backfill_assets_tests.automation.race import (
    FIRST,
    LAST,
    LAST_ARRIVAL,
    REBUILD,
    differing_days,
    generate_and_hold_back,
    land_late_arrivals,
    mismatches,
)
from backfill_assets_tests.automation.test_daemon_e2e import (
    PROJECT,
    daemon_env,
    print_timeline,
    start_daemon,
    stop,
    wait_for,
)

LANE_STEPS = ("raw_orders:", "raw_fx_rates:", "event_days:")
QUIET_SECONDS = 20.0  # four sensor intervals with nothing to do
SETTLE_SECONDS = 1200
SHARED = (
    "DAGSTER_HOME",
    "BACKFILL_LANDING_DIR",
    "BACKFILL_LAKE_DIR",
    "BACKFILL_START_DATE",
    "BACKFILL_MAX_LATENESS_DAYS",
)


class Settled:
    """True once no run is unended, no event day is pending in the sensor's cursor and none is
    stale, and that has held for ``QUIET_SECONDS``."""

    def __init__(self, instance: dg.DagsterInstance, settings: Settings):
        self.instance, self.settings = instance, settings
        self.since: float | None = None

    def quiet(self) -> bool:
        if any(not r.is_finished for r in self.instance.get_runs()):
            return False
        cursor = LandingCursor.loads(load_cursor(self.instance))
        if cursor is None or cursor.pending:
            return False
        return not find_stale_days(self.instance, self.settings)

    def __call__(self) -> bool:
        if not self.quiet():
            self.since = None
            return False
        since = self.since = self.since or time.monotonic()
        return time.monotonic() - since >= QUIET_SECONDS


@pytest.mark.e2e
def test_the_daemon_settles_a_raced_range_backfill_and_its_rebuild(tmp_path, spark, monkeypatch):
    home, landing = tmp_path / "home", tmp_path / "landing"
    home.mkdir()
    prepare_instance_yaml(home, PROJECT / "dagster.yaml")  # as `make setup` prepares one
    env = daemon_env(tmp_path)
    for name in SHARED:  # the CLI's runs, in this process, share the daemon's instance and lake
        monkeypatch.setenv(name, env[name])
    generate_and_hold_back(landing, tmp_path / "outbox")
    settings, log, began = Settings.from_env(), tmp_path / "daemon.log", time.time()
    with dg.DagsterInstance.from_config(str(home)) as instance, open(log, "wb") as out:
        # the range backfill's raw steps, before the late folders land
        execute(RunPlan((RAW_ORDERS,), FIRST, LAST_ARRIVAL), instance)
        execute(RunPlan((RAW_FX_RATES,), FIRST, LAST), instance)
        daemon = start_daemon(env, out)
        try:
            wait_for("the sensor's first tick", lambda: load_cursor(instance), daemon, log)
            land_late_arrivals(landing, tmp_path / "outbox")
            # the range's staging, while the sensor takes the new folders
            staging = execute(RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], FIRST, LAST), instance)
            rebuild = io.StringIO()
            with contextlib.redirect_stdout(rebuild):
                rebuild_code = run_backfill(settings, *REBUILD)
            wait_for("the dust to settle", Settled(instance, settings), daemon, log, SETTLE_SECONDS)
        finally:
            stop(daemon)
        print(f"range staging held {sorted(staging.held)}; the rebuild said:\n{rebuild.getvalue()}")
        print_timeline(instance, began)
        # the lane's raw and event-day runs; customer LTV may be held for a while, and is
        # redone once the staging days it needs are published
        failed = [
            r.tags[REQUEST_TAG]
            for r in instance.get_runs()
            if r.status != dg.DagsterRunStatus.SUCCESS
            and r.tags.get(REQUEST_TAG, "").startswith(LANE_STEPS)
        ]

    found = mismatches(landing, Path(settings.lake_dir))
    assert found == {}, f"days {sorted(differing_days(found))} differ"
    assert rebuild_code == 0, rebuild.getvalue()
    assert failed == []  # only the range's own staging may hold days: its window was incomplete
