"""The daily schedule: yesterday's arrivals and every event day they reach, whatever the sensor saw."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import dagster as dg

from backfill_assets.defs.automation.sensors import BACKFILL_JOB
from backfill_assets.defs.automation.settings import AutomationSettings
from backfill_assets.defs.automation.state import LAYER_ASSETS, WHY_TAG
from backfill_assets.runner import RANGE_END, RANGE_START
from backfill_assets.settings import Settings

DAILY_SCHEDULE = "daily_refresh"
ALL_LAYERS = [key for keys in LAYER_ASSETS.values() for key in keys]


def daily_range(scheduled: datetime, first: date, lateness: int, rerun_days: int) -> tuple[date, date] | None:
    """Arrivals of the last ``rerun_days`` days up to yesterday, and the event days they reach:
    ``yesterday - (rerun_days - 1) - lateness .. yesterday``, from the first partition on."""
    yesterday = scheduled.astimezone(timezone.utc).date() - timedelta(days=1)
    if yesterday < first:
        return None
    return max(yesterday - timedelta(days=rerun_days - 1 + lateness), first), yesterday


def build_daily_schedule(settings: Settings, auto: AutomationSettings) -> dg.ScheduleDefinition:
    @dg.schedule(
        name=DAILY_SCHEDULE,
        cron_schedule="0 2 * * *",
        execution_timezone="UTC",
        job_name=BACKFILL_JOB,
        default_status=auto.default_schedule_status,
    )
    def daily_refresh(context: dg.ScheduleEvaluationContext):
        """At 02:00 UTC: raw, staging and fact over yesterday's arrival date and every event day
        whose window it touches, widened to the last N arrival days (BACKFILL_RERUN_DAYS,
        default 3) as a safety net. An empty day is still published, with zero rows.

        One ranged run of all four layers: a schedule tick cannot order two runs, but inside
        one run Dagster runs the raw steps before the staging step. It rebuilds a few raw days
        more than strictly needed (idempotent, cheap); a raw day held by its checks fails the
        run, naming it, and re-execution from failure then finishes the event days."""
        span = daily_range(context.scheduled_execution_time, settings.start_date,
                           settings.max_lateness_days, auto.rerun_days)
        if span is None:
            return dg.SkipReason(f"yesterday is before the first partition {settings.start_date}")
        start, end = span
        return dg.RunRequest(
            run_key=f"daily:{end.isoformat()}",
            asset_selection=ALL_LAYERS,
            tags={RANGE_START: start.isoformat(), RANGE_END: end.isoformat(),
                  WHY_TAG: f"daily refresh of arrival {end} (+{auto.rerun_days - 1} day(s) back) "
                           f"and event days {start}..{end}"},
        )

    return daily_refresh
