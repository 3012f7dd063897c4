"""Fact: daily revenue per (event date, country), built from published staging days."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from pyspark.sql import DataFrame

from backfill_assets.catalog import FACT_TABLE, FCT_DAILY_REVENUE, STAGING_TABLE
from backfill_assets.event_days.outcomes import fact_outcomes
from backfill_assets.event_days.quality import quality_outcomes
from backfill_assets.lake import Lake
from backfill_assets.publishing.publication import CheckOutcome, held_days
from backfill_assets.settings import QualitySettings
from backfill_assets.transforms.drift import fact_figures
from backfill_assets.transforms.revenue import daily_revenue
from backfill_assets.transforms.totals import fact_totals, staging_totals


@dataclass
class FactBuild:
    """The fact of a range of days computed, and the staging totals it must match."""

    fact: DataFrame
    expected: dict[date, dict]
    history: DataFrame | None = None  # published fact of the warning checks' trailing days
    quality: QualitySettings = field(default_factory=QualitySettings)

    def audit(self, days: list[date], staged: DataFrame) -> list[CheckOutcome]:
        """The fact checks, on ``staged``: the fact rows as staged, not as computed; then the
        warning checks, from the same aggregation (which reads the trailing days too)."""
        totals = fact_totals(staged, self.history)
        contract = fact_outcomes(days, self.expected, totals)
        return contract + quality_outcomes(
            FCT_DAILY_REVENUE, days, fact_figures(totals), set(held_days(contract)), self.quality
        )


def build_fact(
    staging: DataFrame, history: DataFrame | None = None, quality: QualitySettings | None = None
) -> FactBuild:
    """``staging`` is the published staging of the days, read back pinned from the lake;
    ``history`` the published fact of the trailing days (``staging.trailing_published``)."""
    return FactBuild(
        daily_revenue(staging), staging_totals(staging), history, quality or QualitySettings()
    )


def stale_fact_days(lake: Lake, days: list[date]) -> set[date]:
    """Days of ``days`` whose fact was built from an older staging than the one published now
    (a fact held, killed or not selected after its staging published), or never built."""
    if not days or not lake.exists(STAGING_TABLE.path):
        return set()
    wanted = set(days)
    staging = {
        p.partition: p.last_written_version
        for p in lake.partitions(STAGING_TABLE.path, STAGING_TABLE.partition_column)
        if p.partition in wanted
    }
    if not lake.exists(FACT_TABLE.path):
        return set(staging)
    fact = {
        p.partition: p.last_written_version
        for p in lake.partitions(FACT_TABLE.path, FACT_TABLE.partition_column)
        if p.partition in wanted
    }
    built_from = {
        v: lake.commit_metadata(FACT_TABLE.path, v)
        .get("input_versions", {})
        .get(STAGING_TABLE.path, -1)
        for v in set(fact.values())
    }
    return {d for d, written in staging.items() if d not in fact or built_from[fact[d]] < written}


def previous_fact_totals(lake: Lake, days: list[date]) -> tuple[dict[date, dict], int | None]:
    """The per-day totals of the fact version about to be replaced (empty on first build)."""
    if not lake.exists(FACT_TABLE.path):
        return {}, None
    previous, version = lake.read_partitions(FACT_TABLE.path, FACT_TABLE.partition_column, days)
    return fact_totals(previous), version
