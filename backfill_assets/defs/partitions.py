"""The one daily partitioning (UTC) and the partition mappings between layers."""

from __future__ import annotations

import dagster as dg

from backfill_assets.settings import Settings


def daily_partitions(settings: Settings) -> dg.DailyPartitionsDefinition:
    return dg.DailyPartitionsDefinition(
        start_date=settings.start_date.isoformat(), timezone="UTC", fmt="%Y-%m-%d"
    )


def arrivals_of_event_day(settings: Settings) -> dg.TimeWindowPartitionMapping:
    """Event day D reads the raw arrivals D .. D + max lateness."""
    return dg.TimeWindowPartitionMapping(
        start_offset=0,
        end_offset=settings.max_lateness_days,
        allow_nonexistent_upstream_partitions=True,
    )


def rates_of_event_day(settings: Settings) -> dg.TimeWindowPartitionMapping:
    """Event day D reads the rate dates D - 7 .. D (a rate from after D is never used)."""
    return dg.TimeWindowPartitionMapping(
        start_offset=-settings.rate_max_age_days,
        end_offset=0,
        allow_nonexistent_upstream_partitions=True,
    )
