"""fact/daily_revenue: staging orders counted by final status, paid revenue summed per country."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from backfill_assets.transforms.schemas import MONEY


def _count_status(status: str) -> Column:
    return F.count_if(F.col("status") == F.lit(status)).cast("bigint")


def daily_revenue(staging: DataFrame) -> DataFrame:
    """One row per (event_date, country) with at least one staging order.

    revenue_usd is the exact decimal sum of amount_usd over paid orders, 0.00
    when a country had none.
    """
    paid_usd = F.when(F.col("status") == F.lit("paid"), F.col("amount_usd"))
    return (
        staging.groupBy("event_date", "country")
        .agg(
            F.count(F.lit(1)).cast("bigint").alias("orders"),
            _count_status("placed").alias("placed_orders"),
            _count_status("paid").alias("paid_orders"),
            _count_status("cancelled").alias("cancelled_orders"),
            F.coalesce(F.sum(paid_usd), F.lit(0).cast(MONEY)).alias("_revenue"),
        )
        .select(
            "event_date",
            "country",
            "orders",
            "placed_orders",
            "paid_orders",
            "cancelled_orders",
            F.col("_revenue").try_cast(MONEY).alias("revenue_usd"),
        )
    )
