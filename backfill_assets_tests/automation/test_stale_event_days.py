"""A range backfill raced by new arrival folders and a rebuild of its last days, then `catch-up`:
every table equals the reference, whenever the folders landed."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from datetime import date

import pytest

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import EVENT_DAYS_STEP, RAW_FX_RATES, RAW_ORDERS, STEP_ASSETS
from backfill_assets.cli.backfill import run_backfill
from backfill_assets.cli.catch_up import run_catch_up
from backfill_assets.cli.runner import RunOutcome, execute
from backfill_assets.settings import AutomationSettings, Settings
from backfill_assets_testkit.pipeline_env import PipelineEnv, pipeline_env
from backfill_assets_tests.automation.race import (
    FIRST,
    LAST,
    LAST_ARRIVAL,
    REBUILD,
    days,
    differing_days,
    generate_and_hold_back,
    land_late_arrivals,
    mismatches,
    rebuilt_days,
)

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

# When the held-back folders land, relative to the range backfill's steps and the rebuild. Not
# before raw: the range then reads every folder, and the rebuild leaves catch-up the same seven
# stale days as after staging (the suite's time is counted).
LANDINGS = ["between_raw_and_staging", "after_staging", "after_rebuild"]


@dataclass
class Race:
    env: PipelineEnv
    landed: str
    range_staging: RunOutcome
    rebuild: tuple[int, str]
    catch_up: tuple[int, str]
    again: tuple[int, str]
    runs_again: int


def quietly(call) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = call()
    return code, out.getvalue()


def catch_up() -> tuple[int, str]:
    return quietly(lambda: run_catch_up(Settings.from_env(), AutomationSettings(settle_seconds=0)))


@pytest.fixture(scope="module", params=LANDINGS)
def race(request, tmp_path_factory, spark):
    landed = request.param
    root = tmp_path_factory.mktemp(landed)
    with pipeline_env(root, start_date=FIRST.isoformat()) as env:
        landing, outbox = env.settings.landing_dir, root / "outbox"
        generate_and_hold_back(landing, outbox)

        def land_if(moment: str) -> None:
            if landed == moment:
                land_late_arrivals(landing, outbox)

        # the range backfill of FIRST .. LAST, step by step as `backfill` runs it
        execute(RunPlan((RAW_ORDERS,), FIRST, LAST_ARRIVAL), env.instance)
        execute(RunPlan((RAW_FX_RATES,), FIRST, LAST), env.instance)
        land_if("between_raw_and_staging")
        range_staging = execute(RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], FIRST, LAST), env.instance)
        land_if("after_staging")
        # the rebuild of its last days beside it, as the schedule or an engineer starts one
        rebuild = quietly(lambda: run_backfill(Settings.from_env(), *REBUILD))
        land_if("after_rebuild")
        first = catch_up()
        runs = len(env.instance.get_runs())
        again = catch_up()
        yield Race(
            env,
            landed,
            range_staging,
            rebuild,
            first,
            again,
            len(env.instance.get_runs()) - runs,
        )


def test_every_table_equals_the_reference_after_catch_up(race):
    found = mismatches(race.env.settings.landing_dir, race.env.settings.lake_dir)
    assert found == {}, (
        f"days {sorted(differing_days(found))} differ; catch-up said:\n{race.catch_up[1]}"
    )
    assert race.rebuild[0] == 0, race.rebuild[1]
    assert race.catch_up[0] == 0, race.catch_up[1]


def test_the_range_staging_held_the_days_whose_window_was_incomplete(race):
    held = race.range_staging.held
    if race.landed == "between_raw_and_staging":
        assert race.range_staging.success is False
        assert held, "the race did not happen: no day was held"
    else:
        assert race.range_staging.success, held


def test_a_second_catch_up_finds_nothing_and_runs_nothing(race):
    code, output = race.again
    assert code == 0 and "nothing to rebuild" in output, output
    assert race.runs_again == 0


def test_the_rebuild_names_the_days_it_leaves_to_the_late_data_lane(race):
    # its raw [Jan 9, Jan 17] and rates [Jan 2, Jan 10] reach the event days Jan 2 .. Jan 8
    assert "left for the late-data lane: 2024-01-02..2024-01-08" in race.rebuild[1], race.rebuild[1]
    if race.landed != "after_rebuild":  # then catch-up's own detection rebuilds some of them
        assert "catch-up: 7 stale event day(s)" in race.catch_up[1], race.catch_up[1]
        assert set(rebuilt_days(race.catch_up[1])) == set(days(date(2024, 1, 2), date(2024, 1, 8)))
