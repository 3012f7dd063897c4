"""A day's totals of the fact and of staging, as Spark aggregations collected small: orders by
status and revenue per event day (``fact_totals``, ``staging_totals``), or per any date column
(``totals_by``). The checks, the corrections' diff and the downstream reports compare them.
No pandera and no Dagster: the commands that only compare figures import this alone.
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

TOTAL_FIELDS = ("orders", "placed_orders", "paid_orders", "cancelled_orders", "revenue_usd")
ZERO = {
    "orders": 0,
    "placed_orders": 0,
    "paid_orders": 0,
    "cancelled_orders": 0,
    "revenue_usd": Decimal("0.00"),
}


def _status(name: str) -> Column:
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
    return {r["event_date"]: normalised(r.asDict()) for r in rows}


def fact_totals(fact: DataFrame, history: DataFrame | None = None) -> dict[date, dict]:
    """Per event day, the fact's totals; ``history`` (published fact rows of other days, the
    warning checks' trailing days) joins the same aggregation."""
    if history is not None:
        fact = fact.unionByName(history.select(*fact.columns))
    return totals_by(fact, "event_date")


MONTHLY_FIELDS = ("orders", "paid_orders", "revenue_usd")


def totals_by(df: DataFrame, key: str, fields: tuple[str, ...] = TOTAL_FIELDS) -> dict[date, dict]:
    """Per value of the date column ``key``: the sums of ``fields`` (counts, then revenue_usd)."""
    rows = df.groupBy(key).agg(*[F.sum(c).alias(c) for c in fields]).collect()
    return {r[key]: normalised(r.asDict(), fields) for r in rows}


def normalised(row: dict, fields: tuple[str, ...] = TOTAL_FIELDS) -> dict:
    out: dict[str, int | Decimal] = {k: int(row[k] or 0) for k in fields[:-1]}
    out["revenue_usd"] = Decimal(row["revenue_usd"] or 0).quantize(Decimal("0.01"))
    return out
