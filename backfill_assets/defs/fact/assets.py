"""Fact layer: daily revenue per (event date, country), built from published staging days."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import dagster as dg
from pyspark.sql import DataFrame

from backfill_assets.defs.fact.checks import (
    FCT_DAILY_REVENUE,
    fact_outcomes,
    fact_totals,
    staging_totals,
)
from backfill_assets.defs.publishing import CheckOutcome
from backfill_assets.defs.staging.checks import STG_ORDERS
from backfill_assets.transforms.revenue import daily_revenue


def fact_spec() -> dg.AssetSpec:
    return dg.AssetSpec(
        FCT_DAILY_REVENUE,
        skippable=True,
        group_name="fact",
        kinds={"spark", "delta"},
        description="Daily revenue (Delta table fact/daily_revenue): per event date and "
        "country, orders by final status and the USD revenue of paid orders. Published only "
        "for days whose staging passed its checks.",
        deps=[STG_ORDERS],
        metadata={"table": "fact/daily_revenue"},
    )


@dataclass
class FactBuild:
    fact: DataFrame
    outcomes: list[CheckOutcome]
    expected: dict[date, dict]


def build_fact(staging: DataFrame, days: list[date]) -> FactBuild:
    """``staging`` is the published staging of ``days``, read back pinned from the lake."""
    fact = daily_revenue(staging)
    expected = staging_totals(staging)
    return FactBuild(fact, fact_outcomes(days, expected, fact_totals(fact)), expected)
