"""The daily 02:00 UTC schedule, the follow-up sensor that completes it, how they are registered."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.tags import WILL_RETRY_TAG
from dagster._core.utils import make_new_run_id

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import FCT_DAILY_REVENUE, RANGE_END, RANGE_START, STG_ORDERS
from backfill_assets.cli.runner import execute
from backfill_assets.definitions import build_definitions
from backfill_assets.defs.automation.follow_up import build_follow_up_sensor
from backfill_assets.defs.automation.schedules import build_daily_schedule
from backfill_assets.demo.generate import generate_feed
from backfill_assets.settings import AutomationSettings, Settings
from backfill_assets_testkit.pipeline_env import pipeline_env
from backfill_assets_testkit.reference import Reference

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

# The schedule reads dates only: its settings name folders that do not exist.
SETTINGS = Settings(
    landing_dir=Path("/nonexistent/landing"),
    lake_dir=Path("/nonexistent/lake"),
    start_date=date(2024, 1, 1),
    max_lateness_days=7,
)


def evaluate(scheduled: datetime, rerun_days: int = 3, settings: Settings = SETTINGS):
    schedule = build_daily_schedule(settings, AutomationSettings(rerun_days=rerun_days))
    return schedule.evaluate_tick(dg.build_schedule_context(scheduled_execution_time=scheduled))


def spans(request: dg.RunRequest) -> tuple[str, str, str]:
    return (
        request.tags["dagster/asset_partition_range_start"],
        request.tags["dagster/asset_partition_range_end"],
        request.tags["backfill_assets/event_days"],
    )


def test_schedule_requests_the_last_n_arrival_days_tagged_with_the_event_days_they_reach():
    [request] = evaluate(datetime(2024, 3, 15, 2, 0, tzinfo=UTC)).run_requests
    # arrivals Mar 12..14 (N = 3) reach event days back to Mar 12 - 7 = Mar 5
    assert spans(request) == ("2024-03-12", "2024-03-14", "2024-03-05..2024-03-14")
    assert {k.to_user_string() for k in request.asset_selection} == {"raw_orders", "raw_fx_rates"}
    assert request.run_key == "daily:2024-03-14"


def test_rerun_window_is_configurable_and_clipped_to_the_first_partition():
    [one] = evaluate(datetime(2024, 3, 15, 2, 0, tzinfo=UTC), rerun_days=1).run_requests
    assert spans(one) == ("2024-03-14", "2024-03-14", "2024-03-07..2024-03-14")
    [early] = evaluate(datetime(2024, 1, 4, 2, 0, tzinfo=UTC)).run_requests
    assert spans(early) == ("2024-01-01", "2024-01-03", "2024-01-01..2024-01-03")
    assert evaluate(datetime(2024, 1, 1, 2, 0, tzinfo=UTC)).run_requests == []


def test_follow_up_requests_the_event_days_of_the_daily_raw_run_once_it_ended(tmp_path):
    [raw] = evaluate(datetime(2024, 3, 15, 2, 0, tzinfo=UTC)).run_requests
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        sensor = build_follow_up_sensor(AutomationSettings())
        first = sensor(dg.build_sensor_context(instance=instance))
        assert first.run_requests == []
        run = dg.DagsterRun(
            job_name="backfill_job",
            run_id=make_new_run_id(),
            status=dg.DagsterRunStatus.STARTED,
            tags=dict(raw.tags),
        )
        instance.add_run(run)
        assert (
            sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor)).run_requests
            == []
        )
        instance.handle_run_event(
            run.run_id,
            dg.DagsterEvent(
                event_type_value="PIPELINE_SUCCESS", job_name="backfill_job", message="done"
            ),
        )
        followed = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor))
        assert [
            (
                r.tags["dagster/asset_partition_range_start"],
                r.tags["dagster/asset_partition_range_end"],
                sorted(k.to_user_string() for k in r.asset_selection),
            )
            for r in followed.run_requests
        ] == [("2024-03-05", "2024-03-14", ["fct_daily_revenue", "stg_orders"])]
        again = sensor(dg.build_sensor_context(instance=instance, cursor=followed.cursor))
        assert again.run_requests == []


def test_follow_up_waits_for_the_retry_of_a_failed_raw_run(tmp_path):
    """A raw run that failed and will be retried (run retries keep its tags) is followed up
    when its retry ends, not before: staging would only hold the days the retry brings."""
    [raw] = evaluate(datetime(2024, 3, 15, 2, 0, tzinfo=UTC)).run_requests
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        sensor = build_follow_up_sensor(AutomationSettings())
        first = sensor(dg.build_sensor_context(instance=instance))
        ended = {}
        for name, extra in (("retried", {WILL_RETRY_TAG: "true"}), ("final", {})):
            run = dg.DagsterRun(
                job_name="backfill_job",
                run_id=make_new_run_id(),
                status=dg.DagsterRunStatus.STARTED,
                tags={**raw.tags, **extra},
            )
            instance.add_run(run)
            instance.handle_run_event(
                run.run_id,
                dg.DagsterEvent(
                    event_type_value="PIPELINE_FAILURE", job_name="backfill_job", message="crashed"
                ),
            )
            ended[name] = run.run_id
        followed = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor))
        assert [r.run_key.rsplit(":", 1)[1] for r in followed.run_requests] == [ended["final"][:12]]


def test_schedule_and_its_follow_up_rebuild_every_layer_with_the_late_data_sensor_off(
    tmp_path, spark
):
    """The daemon's part played by hand: launch the schedule's request, tick the follow-up
    sensor, launch its request. Nothing else runs; every event day the arrivals reach is
    published, the empty ones with zero rows, and the fact matches the landed records."""
    with pipeline_env(tmp_path, start_date="2024-01-01", lateness=2) as env:
        landing = env.settings.landing_dir
        generate_feed(
            landing,
            date(2024, 1, 1),
            date(2024, 1, 2),
            orders_per_day=15,
            seed=3,
            max_lateness_days=2,
        )  # arrivals up to Jan 7
        [raw] = evaluate(datetime(2024, 1, 8, 2, 0, tzinfo=UTC), 7, env.settings).run_requests
        first, last = (
            date.fromisoformat(raw.tags[RANGE_START]),
            date.fromisoformat(raw.tags[RANGE_END]),
        )
        assert (first, last) == (date(2024, 1, 1), date(2024, 1, 7))
        assert execute(
            RunPlan(tuple(raw.asset_selection), first, last), env.instance, raw.tags
        ).success

        sensor = build_follow_up_sensor(AutomationSettings())
        tick = sensor(dg.build_sensor_context(instance=env.instance))
        [request] = tick.run_requests
        plan = RunPlan(
            tuple(request.asset_selection),
            date.fromisoformat(request.tags[RANGE_START]),
            date.fromisoformat(request.tags[RANGE_END]),
        )
        assert set(plan.assets) == {STG_ORDERS, FCT_DAILY_REVENUE}
        assert execute(plan, env.instance, request.tags).success
        assert (
            sensor(dg.build_sensor_context(instance=env.instance, cursor=tick.cursor)).run_requests
            == []
        )

        days = [date(2024, 1, d) for d in range(1, 8)]
        for key in (STG_ORDERS, FCT_DAILY_REVENUE):
            assert sorted(env.instance.get_materialized_partitions(key)) == [
                d.isoformat() for d in days
            ]
        expected = Reference(landing, 2).fact(days)
        assert {f.event_date for f in expected} == {date(2024, 1, 1), date(2024, 1, 2)}
        assert {
            (r["event_date"], r["country"], r["orders"], r["revenue_usd"])
            for r in env.rows("fact/daily_revenue")
        } == {(f.event_date, f.country, f.orders, f.revenue_usd) for f in expected}
        for key in (STG_ORDERS, FCT_DAILY_REVENUE):  # an empty day is a published day
            [record] = env.instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, asset_partitions=["2024-01-05"]), limit=1
            ).records
            assert record.asset_materialization.metadata["dagster/row_count"].value == 0


def test_sensor_and_schedule_are_registered_stopped_unless_automation_is_on(monkeypatch, tmp_path):
    settings = Settings(tmp_path, tmp_path, date(2024, 1, 1), 7)
    monkeypatch.delenv("BACKFILL_AUTOMATION", raising=False)
    defs = build_definitions(settings)
    sensor = defs.resolve_sensor_def("late_data_sensor")
    schedule = defs.resolve_schedule_def("daily_refresh")
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    maintenance = defs.resolve_schedule_def("weekly_lake_maintenance")
    assert maintenance.default_status == dg.DefaultScheduleStatus.STOPPED  # it deletes files
    # the schedule's second half is always on: it acts only on the schedule's own runs
    follow_up = defs.resolve_sensor_def("daily_refresh_follow_up")
    assert follow_up.default_status == dg.DefaultSensorStatus.RUNNING
    assert follow_up.job_name == "backfill_job"
    assert schedule.cron_schedule == "0 2 * * *" and schedule.execution_timezone == "UTC"
    assert sensor.job_name == schedule.job_name == "backfill_job"
    monkeypatch.setenv("BACKFILL_AUTOMATION", "on")
    monkeypatch.setenv("BACKFILL_SENSOR_INTERVAL_SECONDS", "5")
    on = build_definitions(settings).resolve_sensor_def("late_data_sensor")
    assert on.default_status == dg.DefaultSensorStatus.RUNNING and on.minimum_interval_seconds == 5
    weekly = build_definitions(settings).resolve_schedule_def("weekly_lake_maintenance")
    assert weekly.default_status == dg.DefaultScheduleStatus.RUNNING


def test_the_daily_schedule_time_is_a_setting_and_a_bad_one_is_refused(monkeypatch, tmp_path):
    settings = Settings(tmp_path, tmp_path, date(2024, 1, 1), 7)
    monkeypatch.setenv("BACKFILL_DAILY_CRON", "30 4 * * *")
    schedule = build_definitions(settings).resolve_schedule_def("daily_refresh")
    assert schedule.cron_schedule == "30 4 * * *"
    monkeypatch.setenv("BACKFILL_DAILY_CRON", "every day at four")
    with pytest.raises(ValueError, match="BACKFILL_DAILY_CRON"):
        build_definitions(settings)
