"""The late-data sensor's stale event days, on a real instance: which runs' events make a day
stale, which runs keep it in hand, and that nothing is requested twice."""

from __future__ import annotations

import logging
from datetime import date

import dagster as dg
import pytest
from dagster._core.events import (
    AssetMaterializationPlannedData,
    DagsterEvent,
    DagsterEventType,
    StepMaterializationData,
)
from dagster._core.utils import make_new_run_id

from backfill_assets.automation.stale_days import follow_up_key
from backfill_assets.catalog import (
    EVENT_DAYS_STEP,
    EVENT_DAYS_TAG,
    FOLLOW_UP_TAG,
    FOLLOWED_BY_PLAN,
    PLAN_TAG,
    RANGE_END,
    RANGE_START,
    RAW_ORDERS,
    REQUEST_TAG,
    STG_ORDERS,
)
from backfill_assets.defs.automation.sensors import build_late_data_sensor
from backfill_assets.settings import AutomationSettings, Settings
from backfill_assets_tests.automation.test_sensor import ORIGIN, ranged

D = date.fromisoformat
EVENT_DAYS = ("fct_daily_revenue", "stg_orders")


class Instance:
    """Runs and their events as the run workers store them."""

    def __init__(self, instance: dg.DagsterInstance):
        self.instance = instance

    def run(self, tags: dict[str, str], status=dg.DagsterRunStatus.SUCCESS, assets=()) -> str:
        run_id = make_new_run_id()
        self.instance.add_run(
            dg.DagsterRun(
                job_name="backfill_job",
                run_id=run_id,
                status=status,
                tags=tags,
                asset_selection=frozenset(assets),
                remote_job_origin=ORIGIN,
            )
        )
        return run_id

    def _event(self, run_id: str, event: DagsterEvent) -> None:
        self.instance.report_dagster_event(event, run_id, logging.DEBUG)

    def staging(self, *days: str, publish: bool, status=dg.DagsterRunStatus.SUCCESS) -> str:
        """A staging run over ``days``: planned events when created, materializations if it
        published them."""
        run_id = self.run({RANGE_START: days[0], RANGE_END: days[-1]}, status, [STG_ORDERS])
        for day in days:
            planned = AssetMaterializationPlannedData(STG_ORDERS, partition=day)
            self._event(
                run_id,
                DagsterEvent.build_asset_materialization_planned_event(
                    "backfill_job", "staging_and_fact", planned
                ),
            )
        if publish:
            self.materialize(run_id, STG_ORDERS, *days)
        return run_id

    def materialize(self, run_id: str, key: dg.AssetKey, *days: str) -> None:
        for day in days:
            data = StepMaterializationData(dg.AssetMaterialization(key, partition=day))
            self._event(
                run_id,
                DagsterEvent(
                    event_type_value=DagsterEventType.ASSET_MATERIALIZATION.value,
                    job_name="backfill_job",
                    event_specific_data=data,
                ),
            )

    def raw(self, tags: dict[str, str], *days: str) -> str:
        """A raw_orders run that built ``days`` (tags: who asked for it)."""
        run_id = self.run({RANGE_START: days[0], RANGE_END: days[-1], **tags}, assets=[RAW_ORDERS])
        self.materialize(run_id, RAW_ORDERS, *days)
        return run_id


LANE = {REQUEST_TAG: "raw_orders:2024-01-10..2024-01-10:abc"}  # a late-data sensor's raw run
BACKFILL = {"backfill_assets/cli": "backfill"}


@pytest.fixture
def env(tmp_path):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        settings = Settings(tmp_path / "landing", tmp_path / "lake", D("2024-01-01"), 7)
        sensor = build_late_data_sensor(settings, AutomationSettings(settle_seconds=0))

        def tick() -> list[dg.RunRequest]:
            result = sensor(dg.build_sensor_context(instance=instance, cursor=None))
            return list(result.run_requests or [])

        yield Instance(instance), tick


def test_a_held_day_is_requested_once_raw_of_its_window_is_built_by_any_run(env):
    log, tick = env
    log.staging("2024-01-03", "2024-01-04", publish=False)  # held: window incomplete
    assert tick() == []
    log.raw(LANE, "2024-01-10")  # an arrival both days read (Jan 3 .. Jan 10 read it)
    requests = tick()
    assert [ranged(r) for r in requests] == [(EVENT_DAYS, "2024-01-03", "2024-01-04")]
    assert [r.run_key for r in tick()] == [r.run_key for r in requests]  # re-evaluated: same key
    log.staging("2024-01-03", "2024-01-04", publish=True)  # the requested run, created and done
    assert tick() == []


def test_a_published_day_ignores_the_lanes_raw_but_not_a_backfills(env):
    log, tick = env
    log.staging("2024-01-03", publish=True)
    log.raw(LANE, "2024-01-10")
    assert tick() == []  # its group rebuilds the days its files change
    log.raw(BACKFILL, "2024-01-09")
    assert [ranged(r) for r in tick()] == [(EVENT_DAYS, "2024-01-03", "2024-01-03")]


def test_days_in_hand_of_a_run_not_ended_are_left_to_it(env):
    log, tick = env
    running = log.staging("2024-01-03", publish=False, status=dg.DagsterRunStatus.STARTED)
    log.raw(BACKFILL, "2024-01-05")  # after the running staging run's planned events
    assert tick() == []  # that run may yet read it
    log.instance.handle_run_event(
        running, DagsterEvent(event_type_value="PIPELINE_FAILURE", job_name="backfill_job")
    )
    queued = log.run(
        {RANGE_START: "2024-01-08", RANGE_END: "2024-01-08"}, dg.DagsterRunStatus.QUEUED
    )  # a run over Jan 8 of every asset: the event days Jan 1 .. 8 are its to settle
    assert tick() == []
    log.instance.delete_run(queued)
    assert [ranged(r) for r in tick()] == [(EVENT_DAYS, "2024-01-03", "2024-01-03")]


def test_daily_refresh_days_wait_for_its_follow_up_not_for_this_sensor(env):
    log, tick = env
    log.staging("2024-01-03", publish=True)
    daily = log.raw(
        {FOLLOW_UP_TAG: EVENT_DAYS_STEP, EVENT_DAYS_TAG: "2024-01-01..2024-01-10"}, "2024-01-08"
    )
    assert tick() == []  # ended, its follow-up not requested yet: the follow-up's days
    key = follow_up_key(daily, D("2024-01-01"), D("2024-01-10"))
    log.run({REQUEST_TAG: key})  # the follow-up's run, as if it had rebuilt nothing
    assert [ranged(r) for r in tick()] == [(EVENT_DAYS, "2024-01-03", "2024-01-03")]


def test_a_backfills_days_wait_for_its_own_staging_run_between_its_runs(env):
    log, tick = env
    log.staging("2024-01-03", publish=True)
    plan = {PLAN_TAG: "p1"}
    log.raw(
        {**plan, FOLLOW_UP_TAG: FOLLOWED_BY_PLAN, EVENT_DAYS_TAG: "2024-01-01..2024-01-10"},
        "2024-01-09",
    )
    assert tick() == []  # between its raw runs and its staging run: the backfill's to settle
    log.staging("2024-01-09", "2024-01-10", publish=True)  # another plan's staging run
    assert tick() == []
    staging = log.staging(
        "2024-01-09", "2024-01-10", publish=False, status=dg.DagsterRunStatus.QUEUED
    )
    log.instance.add_run_tags(staging, plan)
    # its staging run is on record: Jan 3, outside its range, is the late-data lane's now
    assert [ranged(r) for r in tick()] == [(EVENT_DAYS, "2024-01-03", "2024-01-03")]
