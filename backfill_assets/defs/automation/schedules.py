"""The daily schedule: yesterday's arrivals and the event days they reach, whatever was seen."""

from __future__ import annotations

import inspect
from datetime import UTC, date, datetime, timedelta

import dagster as dg

from backfill_assets.catalog import (
    BACKFILL_JOB,
    DAILY_SCHEDULE,
    EVENT_DAYS_STEP,
    EVENT_DAYS_TAG,
    FOLLOW_UP_TAG,
    RANGE_END,
    RANGE_START,
    RAW_FX_RATES_STEP,
    RAW_ORDERS_STEP,
    REQUEST_TAG,
    STEP_ASSETS,
    WHY_TAG,
)
from backfill_assets.defs.automation.wiring import schedule_status
from backfill_assets.settings import AutomationSettings, Settings

RAW_ASSETS = [*STEP_ASSETS[RAW_ORDERS_STEP], *STEP_ASSETS[RAW_FX_RATES_STEP]]


def daily_ranges(
    scheduled: datetime, first: date, lateness: int, rerun_days: int
) -> tuple[tuple[date, date], tuple[date, date]] | None:
    """(raw arrival/rate dates, event days) for the tick: the last ``rerun_days`` days up to
    yesterday, and every event day their arrivals reach, from the first partition on."""
    yesterday = scheduled.astimezone(UTC).date() - timedelta(days=1)
    if yesterday < first:
        return None
    raw_start = max(yesterday - timedelta(days=rerun_days - 1), first)
    return (raw_start, yesterday), (max(raw_start - timedelta(days=lateness), first), yesterday)


def build_daily_schedule(settings: Settings, auto: AutomationSettings) -> dg.ScheduleDefinition:
    def daily_refresh(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        """At 02:00 UTC (BACKFILL_DAILY_CRON): raw orders and rates of yesterday and the N - 1 days
        before it (BACKFILL_RERUN_DAYS, default 3: a rolling safety net), then staging and fact of
        every event day those arrivals reach. An empty day is still published, with zero rows.

        Two phases, because a tick cannot order two runs (and in one run the staging step
        would be skipped as soon as a raw step publishes by partition): this schedule requests
        the raw run, tagged with its event days; daily_refresh_follow_up, a sensor that is on
        by default, requests staging and fact once that run has ended."""
        spans = daily_ranges(
            context.scheduled_execution_time,
            settings.start_date,
            settings.max_lateness_days,
            auto.rerun_days,
        )
        if spans is None:
            return dg.SkipReason(f"yesterday is before the first partition {settings.start_date}")
        (raw_start, end), (days_start, _) = spans
        key = f"daily:{end.isoformat()}"
        return dg.RunRequest(
            run_key=key,
            asset_selection=RAW_ASSETS,
            tags={
                RANGE_START: raw_start.isoformat(),
                RANGE_END: end.isoformat(),
                FOLLOW_UP_TAG: EVENT_DAYS_STEP,
                EVENT_DAYS_TAG: f"{days_start}..{end}",
                REQUEST_TAG: key,
                WHY_TAG: f"daily refresh: arrivals {raw_start}..{end}, "
                f"event days {days_start}..{end}",
            },
        )

    return dg.schedule(
        name=DAILY_SCHEDULE,
        cron_schedule=auto.daily_cron,
        execution_timezone="UTC",
        job_name=BACKFILL_JOB,
        default_status=schedule_status(auto),
        description=inspect.cleandoc(daily_refresh.__doc__ or ""),  # what the UI shows
    )(daily_refresh)
