"""The daily partitioning (UTC), the monthly one of the report, and the partition mappings
between layers."""

from __future__ import annotations

import warnings

import dagster as dg

from backfill_assets.days import month_of
from backfill_assets.settings import Settings


def daily_partitions(settings: Settings) -> dg.DailyPartitionsDefinition:
    return dg.DailyPartitionsDefinition(
        start_date=settings.start_date.isoformat(), timezone="UTC", fmt="%Y-%m-%d"
    )


def monthly_partitions(settings: Settings) -> dg.MonthlyPartitionsDefinition:
    """Months, keyed by their first day; the first is the month of the first daily partition,
    the last the latest complete month."""
    return dg.MonthlyPartitionsDefinition(
        start_date=month_of(settings.start_date).isoformat(), timezone="UTC", fmt="%Y-%m-%d"
    )


def arrivals_of_event_day(settings: Settings) -> dg.TimeWindowPartitionMapping:
    """Event day D reads the raw arrivals D .. D + max lateness."""
    return _window(0, settings.max_lateness_days)


def rates_of_event_day(settings: Settings) -> dg.TimeWindowPartitionMapping:
    """Event day D reads the rate dates D - 7 .. D (a rate from after D is never used)."""
    return _window(-settings.rate_max_age_days, 0)


def previous_day() -> dg.TimeWindowPartitionMapping:
    """Day D depends on day D - 1 of the same asset (a cumulative table's self-dependency)."""
    return _window(-1, -1)


def _window(start_offset: int, end_offset: int) -> dg.TimeWindowPartitionMapping:
    # Windows reach past the newest partition (D + 7 of yesterday); that is expected, and
    # the parameter that allows it is marked beta, which is not worth a warning per load.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.TimeWindowPartitionMapping(
            start_offset=start_offset,
            end_offset=end_offset,
            allow_nonexistent_upstream_partitions=True,
        )
