"""A correction started from the UI's form alone (``correction_start_job``): the
``correction_requests`` sensor runs raw over the range, then the correction's build, as
``backfill-assets correct`` does. A provider restates its rates; the correction's staged rows
equal the reference on the restated landing (raw was rebuilt first), production's equal the
reference on the original one, and a bad form builds nothing."""

from __future__ import annotations

import shutil
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import dagster as dg
import pytest

from backfill_assets.catalog import (
    BACKFILL_JOB,
    CORRECTION_JOB,
    CORRECTION_REQUEST_SENSOR,
    CORRECTION_START_JOB,
    CORRECTION_TAG,
    RANGE_END,
    RANGE_START,
    RAW_FX_RATES,
    RAW_ORDERS,
    STAGING_TABLE,
)
from backfill_assets.cli.main import run_backfill
from backfill_assets.corrections import registry, requests
from backfill_assets.definitions import backfill_job, build_definitions, correction_job
from backfill_assets.demo.generate import generate_feed, restate_rates
from backfill_assets.lake import Lake
from backfill_assets_testkit.pipeline_env import pipeline_env
from backfill_assets_testkit.reference import Reference

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

FEED_START, FEED_END = date(2024, 1, 1), date(2024, 1, 12)
START, END = date(2024, 1, 2), date(2024, 1, 8)  # production
FIX_START, FIX_END = date(2024, 1, 3), date(2024, 1, 6)  # the correction
RESTATED = (date(2024, 1, 4), date(2024, 1, 5))  # the rate dates the provider restates
CID = "eur-from-the-form"


def days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def as_set(rows) -> set:
    return {tuple(sorted(vars(r).items())) for r in rows}


@pytest.fixture(scope="module")
def env(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("requests")
    with pipeline_env(root) as penv:
        generate_feed(penv.settings.landing_dir, FEED_START, FEED_END, orders_per_day=20, seed=11)
        shutil.copytree(penv.settings.landing_dir, root / "original_landing")
        assert run_backfill(penv.settings, START, END) == 0
        yield penv


def start(env, **form) -> tuple[bool, str, dg.DagsterRun]:
    """A run of the form's job: (success, the failure's message or "", the run)."""
    job = build_definitions(env.settings).resolve_job_def(CORRECTION_START_JOB)
    result = job.execute_in_process(
        run_config={"ops": {"request_correction": {"config": form}}},
        instance=env.instance,
        raise_on_error=False,
    )
    failures = [e for e in result.all_events if e.is_step_failure]
    message = str(failures[0].step_failure_data.user_failure_data or "") if failures else ""
    run = env.instance.get_run_by_id(result.run_id)
    assert run is not None
    return result.success, message, run


def tick(env) -> dg.SensorExecutionData:
    sensor = (
        build_definitions(env.settings)
        .get_repository_def()
        .get_sensor_def(CORRECTION_REQUEST_SENSOR)
    )
    return sensor.evaluate_tick(dg.build_sensor_context(instance=env.instance))


def launch(env, request: dg.RunRequest) -> bool:
    """Execute a request of the sensor as the daemon would launch it."""
    assert request.job_name is not None, request  # the sensor names the job of each request
    job = {BACKFILL_JOB: backfill_job, CORRECTION_JOB: correction_job}[request.job_name]
    with dg.execute_job(
        dg.reconstructable(job),
        instance=env.instance,
        asset_selection=list(request.asset_selection or ()),
        tags=dict(request.tags),
        run_config=dict(request.run_config or {}),
        raise_on_error=False,
    ) as result:
        return result.success


@pytest.fixture(scope="module")
def flow(env):
    """Restate the rates, fill in the form, then run what each tick of the sensor asks for."""
    landing = env.settings.landing_dir
    assert restate_rates(landing, "EUR", *RESTATED, Decimal("1.03")) == 2
    ok, why, run = start(
        env, start=str(FIX_START), end=str(FIX_END), reason="EUR restated", correction_id=CID
    )
    assert ok, why
    ticks = [tick(env)]
    ticks.append(tick(env))  # nothing launched yet: the same requests, the same run keys
    for request in ticks[0].run_requests or []:
        assert launch(env, request)
    ticks.append(tick(env))
    for request in ticks[-1].run_requests or []:
        launch(env, request)
    ticks.append(tick(env))
    return run, ticks


def test_the_first_tick_asks_for_raw_over_the_range_and_nothing_else(env, flow):
    _, ticks = flow
    requests = ticks[0].run_requests or []
    assert {r.job_name for r in requests} == {BACKFILL_JOB}
    ranges = {
        tuple(r.asset_selection or ()): (
            date.fromisoformat(r.tags[RANGE_START]),
            date.fromisoformat(r.tags[RANGE_END]),
        )
        for r in requests
    }
    assert set(ranges) == {(RAW_ORDERS,), (RAW_FX_RATES,)}
    # the rates of every event day corrected, the restated ones among them
    rates_first, rates_last = ranges[(RAW_FX_RATES,)]
    assert rates_first <= FIX_START - timedelta(days=env.settings.rate_max_age_days)
    assert rates_last == FIX_END
    # the orders that arrived on the range's days and in the lateness window after it: the
    # landed arrival folders there, as the landing zone lists them
    last_arrival = FIX_END + timedelta(days=env.settings.max_lateness_days)
    landed = sorted(
        d
        for d in (
            date.fromisoformat(f.name.split("=")[1])
            for f in (env.settings.landing_dir / "orders").iterdir()
        )
        if FIX_START <= d <= last_arrival
    )
    assert landed == days(landed[0], landed[-1])  # one contiguous run of folders
    assert ranges[(RAW_ORDERS,)] == (landed[0], landed[-1]) == (FIX_START, last_arrival)
    assert [r.run_key for r in ticks[1].run_requests or []] == [r.run_key for r in requests]


def test_once_raw_succeeded_the_sensor_builds_the_correction_with_the_form(env, flow):
    run, ticks = flow
    [build] = ticks[2].run_requests or []
    assert build.job_name == CORRECTION_JOB
    assert (build.tags[RANGE_START], build.tags[RANGE_END]) == (str(FIX_START), str(FIX_END))
    assert run.tags[CORRECTION_TAG] == CID
    assert not ticks[3].run_requests and "build" in (ticks[3].skip_message or "")


def test_the_correction_holds_the_restated_rows_and_production_the_original(env, flow, spark):
    c = registry.get(env.settings.lake_dir, CID)
    assert c.state == registry.State.STAGED and c.reason == "EUR restated"
    fixed = days(FIX_START, FIX_END)
    restated = Reference(env.settings.landing_dir, env.settings.max_lateness_days)
    original = Reference(
        env.settings.landing_dir.parent / "original_landing", env.settings.max_lateness_days
    )
    expected, held = restated.staging(fixed)
    assert not held
    before, _ = original.staging(fixed)
    assert as_set(expected) != as_set(before), "the restatement changes no row of the range"
    lake = Lake(env.settings.lake_dir, spark)
    staged = lake.staging.read(lake.staging.version(STAGING_TABLE.path, CID), fixed).collect()

    def utc(value):  # Spark gives the session's (UTC) wall time, the reference an aware one
        return value.replace(tzinfo=UTC) if isinstance(value, datetime) else value

    assert {
        tuple(sorted((k, utc(v)) for k, v in r.asDict().items() if not k.startswith("_")))
        for r in staged
    } == as_set(expected)
    production = {
        tuple(sorted((k, v) for k, v in r.items() if not k.startswith("_")))
        for r in env.rows(STAGING_TABLE.path)
        if START <= r["event_date"] <= END
    }
    assert production == as_set(original.staging(days(START, END))[0])


@pytest.mark.parametrize(
    "form, message",
    [
        ({"reason": " "}, "needs a reason"),
        ({"reason": "why", "start": "2024-01-33"}, "start is a day"),
        ({"reason": "why", "correction_id": CID}, f"correction {CID} exists"),
        ({"reason": "why", "correction_id": "nope", "rebuild": True}, "no correction 'nope'"),
        ({"reason": "why", "start": "2024-01-10", "end": "2024-01-11"}, "no published"),
        ({"reason": "why", "start": "2023-01-01", "end": "2023-01-02"}, "within the partitions"),
    ],
    ids=["empty-reason", "bad-day", "taken-id", "rebuild-unknown", "never-published", "outside"],
)
def test_a_bad_form_is_refused_with_its_reason_and_nothing_is_requested(env, flow, form, message):
    runs_before = len(env.instance.get_runs())
    ok, why, run = start(env, **{"start": str(FIX_START), "end": str(FIX_END), **form})
    assert not ok and message in why, why
    assert CORRECTION_TAG not in run.tags
    assert not tick(env).run_requests
    assert len(env.instance.get_runs()) == runs_before + 1  # the refused run alone


def test_a_tick_cut_short_gets_the_rest_of_raw_before_the_build(env, flow):
    """Of the first tick's raw runs only one was launched (a daemon stopped mid-tick): the next
    tick asks for the other, not for the build."""
    request = requests.Request("cut-short", "cut-short", "why", FIX_START, FIX_END, False)
    first = requests.next_step(env.instance, env.settings, request).runs
    assert len(first) == 2 and {r.job_name for r in first} == {BACKFILL_JOB}
    assert launch(env, first[1])
    again = requests.next_step(env.instance, env.settings, request).runs
    assert [r.run_key for r in again] == [first[0].run_key]


def test_a_request_whose_range_left_the_partitions_says_so_and_asks_for_nothing(env):
    request = requests.Request("gone", "gone", "why", date(2000, 1, 1), date(2000, 1, 2), False)
    step = requests.next_step(env.instance, env.settings, request)
    assert not step.runs and "within the partitions" in step.note, step.note
