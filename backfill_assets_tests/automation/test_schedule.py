"""The daily 02:00 UTC schedule's ranged run, and how the automation is registered and switched on."""

from __future__ import annotations

from datetime import date, datetime, timezone

import dagster as dg

from backfill_assets.defs.automation.schedules import build_daily_schedule
from backfill_assets.defs.automation.settings import AutomationSettings
from backfill_assets.definitions import build_definitions
from backfill_assets.settings import Settings

SETTINGS = Settings(landing_dir=None, lake_dir=None, start_date=date(2024, 1, 1), max_lateness_days=7)


def evaluate(scheduled: datetime, rerun_days: int = 3):
    schedule = build_daily_schedule(SETTINGS, AutomationSettings(rerun_days=rerun_days))
    return schedule.evaluate_tick(dg.build_schedule_context(scheduled_execution_time=scheduled))


def test_schedule_runs_yesterday_and_every_event_day_its_arrivals_reach_in_one_ranged_run():
    data = evaluate(datetime(2024, 3, 15, 2, 0, tzinfo=timezone.utc))
    [request] = data.run_requests
    # arrivals Mar 12..14 (N = 3) reach event days back to Mar 12 - 7 = Mar 5
    assert request.tags["dagster/asset_partition_range_start"] == "2024-03-05"
    assert request.tags["dagster/asset_partition_range_end"] == "2024-03-14"
    assert {k.to_user_string() for k in request.asset_selection} == {
        "raw_orders", "raw_fx_rates", "stg_orders", "fct_daily_revenue"}
    assert request.run_key == "daily:2024-03-14"


def test_rerun_window_is_configurable_and_clipped_to_the_first_partition():
    [one] = evaluate(datetime(2024, 3, 15, 2, 0, tzinfo=timezone.utc), rerun_days=1).run_requests
    assert one.tags["dagster/asset_partition_range_start"] == "2024-03-07"
    [early] = evaluate(datetime(2024, 1, 4, 2, 0, tzinfo=timezone.utc)).run_requests
    assert (early.tags["dagster/asset_partition_range_start"],
            early.tags["dagster/asset_partition_range_end"]) == ("2024-01-01", "2024-01-03")
    assert evaluate(datetime(2024, 1, 1, 2, 0, tzinfo=timezone.utc)).run_requests == []


def test_sensor_and_schedule_are_registered_stopped_unless_automation_is_on(monkeypatch, tmp_path):
    settings = Settings(tmp_path, tmp_path, date(2024, 1, 1), 7)
    monkeypatch.delenv("BACKFILL_AUTOMATION", raising=False)
    defs = build_definitions(settings)
    sensor = defs.resolve_sensor_def("late_data_sensor")
    schedule = defs.resolve_schedule_def("daily_refresh")
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert schedule.cron_schedule == "0 2 * * *" and schedule.execution_timezone == "UTC"
    assert sensor.job_name == schedule.job_name == "backfill_job"
    monkeypatch.setenv("BACKFILL_AUTOMATION", "on")
    monkeypatch.setenv("BACKFILL_SENSOR_INTERVAL_SECONDS", "5")
    on = build_definitions(settings).resolve_sensor_def("late_data_sensor")
    assert on.default_status == dg.DefaultSensorStatus.RUNNING and on.minimum_interval_seconds == 5
