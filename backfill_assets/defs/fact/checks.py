"""Fact checks: each day's revenue equals the staging orders it was built from, to the cent."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from backfill_assets.defs.publishing import CheckOutcome

FCT_DAILY_REVENUE = dg.AssetKey("fct_daily_revenue")
TOTALS_MATCH_STAGING = "totals_match_staging"

FACT_CHECKS = [
    dg.AssetCheckSpec(
        TOTALS_MATCH_STAGING,
        asset=FCT_DAILY_REVENUE,
        blocking=True,
        description="fact[D] totals equal staging[D]: orders, each status count, and paid "
        "revenue to the cent.",
    )
]

TOTAL_FIELDS = ("orders", "placed_orders", "paid_orders", "cancelled_orders", "revenue_usd")
ZERO = {"orders": 0, "placed_orders": 0, "paid_orders": 0, "cancelled_orders": 0, "revenue_usd": Decimal("0.00")}


def _status(name: str):
    return F.sum(F.when(F.col("status") == name, 1).otherwise(0))


def staging_totals(staging: DataFrame) -> dict[date, dict]:
    rows = (
        staging.groupBy("event_date")
        .agg(
            F.count(F.lit(1)).alias("orders"),
            _status("placed").alias("placed_orders"),
            _status("paid").alias("paid_orders"),
            _status("cancelled").alias("cancelled_orders"),
            F.sum(F.when(F.col("status") == "paid", F.col("amount_usd"))).alias("revenue_usd"),
        )
        .collect()
    )
    return {r["event_date"]: _normalise(r.asDict()) for r in rows}


def fact_totals(fact: DataFrame) -> dict[date, dict]:
    rows = fact.groupBy("event_date").agg(*[F.sum(c).alias(c) for c in TOTAL_FIELDS]).collect()
    return {r["event_date"]: _normalise(r.asDict()) for r in rows}


def _normalise(row: dict) -> dict:
    out = {k: int(row[k] or 0) for k in TOTAL_FIELDS[:-1]}
    out["revenue_usd"] = Decimal(row["revenue_usd"] or 0).quantize(Decimal("0.01"))
    return out


def fact_outcomes(days: list[date], expected: dict[date, dict], actual: dict[date, dict]) -> list[CheckOutcome]:
    outcomes = []
    for day in days:
        exp, act = expected.get(day, ZERO), actual.get(day, ZERO)
        metadata = {
            **{f"expected_{k}": (str(v) if k == "revenue_usd" else v) for k, v in exp.items()},
            **{f"actual_{k}": (str(v) if k == "revenue_usd" else v) for k, v in act.items()},
        }
        outcomes.append(CheckOutcome(FCT_DAILY_REVENUE, TOTALS_MATCH_STAGING, day, exp == act, metadata))
    return outcomes
