"""fact/customer_ltv and fact/monthly_revenue as Spark transforms (no lake, no Dagster).

Customer lifetime value is cumulative: LTV[D] of a customer sums every staging order of theirs
with event date in [first partition, D]. Built naively, LTV[D] needs LTV[D - 1], and a backfill
of a year is 365 runs in a row. It need not be: over a range [S, E],

    LTV[D] = seed + the running sum, up to D, of the customer's daily contributions in [S, D]

where the seed is the customer's cumulative state at S - 1. So a range is one window
aggregation over its staging, plus one read of the seed.

The seed is not just the rows of LTV[S - 1]: a partition holds only the customers with an order
on its day, so a customer last active on S - 10 has no row in LTV[S - 1], yet their counts carry
on. The seed is each customer's latest row with ``as_of_date`` < S (``latest_rows``): one read
of the table's earlier partitions and one aggregation, not a walk back day by day. For the same
reason a customer's "previous row" in the checks is their latest earlier row, wherever it is.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from backfill_assets.transforms.schemas import CUSTOMER_LTV, MONEY, MONTHLY_REVENUE

CUMULATIVE = ("orders", "paid_orders", "lifetime_revenue_usd")


def _paid() -> Column:
    return F.col("status") == F.lit("paid")


def _money_sum(column: Column) -> Column:
    """An exact decimal sum, 0.00 when empty, back to DECIMAL(18,2) (NULL on overflow: the checks
    then fail, never a wrapped value)."""
    return F.coalesce(F.sum(column), F.lit(0).cast(MONEY)).try_cast(MONEY)


def daily_contributions(staging: DataFrame) -> DataFrame:
    """One row per (customer, event date) with orders: what that day adds to their LTV."""
    return staging.groupBy("customer_id", F.col("event_date").alias("as_of_date")).agg(
        F.count(F.lit(1)).cast("bigint").alias("orders"),
        F.count_if(_paid()).cast("bigint").alias("paid_orders"),
        _money_sum(F.when(_paid(), F.col("amount_usd"))).alias("lifetime_revenue_usd"),
    )


def latest_rows(ltv: DataFrame) -> DataFrame:
    """Each customer's latest row of ``ltv`` (their cumulative state as of its date)."""
    latest = F.max_by(
        F.struct(*[c for c in CUSTOMER_LTV.fieldNames() if c != "customer_id"]), F.col("as_of_date")
    )
    return ltv.groupBy("customer_id").agg(latest.alias("s")).select("customer_id", "s.*")


def customer_ltv(seed: DataFrame, staging: DataFrame) -> DataFrame:
    """LTV of every (customer, event date) of ``staging`` (a contiguous range [S, E] of days),
    continuing from ``seed``: each customer's cumulative state before S (``latest_rows``)."""
    upto = (
        Window.partitionBy("customer_id")
        .orderBy("as_of_date")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    before = seed.select(
        "customer_id", *[F.col(c).alias(f"seed_{c}") for c in (*CUMULATIVE, "first_order_date")]
    )
    joined = daily_contributions(staging).join(before, "customer_id", "left")
    running = {
        c: F.coalesce(F.col(f"seed_{c}"), F.lit(0).cast("bigint")) + F.sum(c).over(upto)
        for c in CUMULATIVE[:2]
    }
    revenue = (
        F.coalesce(F.col("seed_lifetime_revenue_usd"), F.lit(0).cast(MONEY))
        + F.sum("lifetime_revenue_usd").over(upto)
    ).try_cast(MONEY)
    return joined.select(
        "as_of_date",
        "customer_id",
        running["orders"].cast("bigint").alias("orders"),
        running["paid_orders"].cast("bigint").alias("paid_orders"),
        revenue.alias("lifetime_revenue_usd"),
        F.coalesce(F.col("seed_first_order_date"), F.min("as_of_date").over(upto)).alias(
            "first_order_date"
        ),
        F.col("as_of_date").alias("last_order_date"),
    )


def monthly_revenue(fact: DataFrame) -> DataFrame:
    """One row per (month, country) of the daily fact's rows: orders, paid orders and paid
    revenue summed over the month's days."""
    return (
        fact.groupBy(F.trunc("event_date", "month").alias("month"), "country")
        .agg(
            F.sum("orders").cast("bigint").alias("orders"),
            F.sum("paid_orders").cast("bigint").alias("paid_orders"),
            _money_sum(F.col("revenue_usd")).alias("revenue_usd"),
        )
        .select(*MONTHLY_REVENUE.fieldNames())
    )
