"""Exchange rates: valid rate lines, the contract's as-of rate per date, conversion to USD."""

from __future__ import annotations

from datetime import date

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from backfill_assets.transforms.schemas import MONEY, ORDER_FIELDS, RATE

RATE_TEXT = r"^\d{1,6}(\.\d{1,8})?\z"
CURRENCY = r"^[A-Z]{3}\z"
USD = "USD"


def valid_rates(raw_rates: DataFrame) -> DataFrame:
    """Rate lines whose currency and usd_per_unit obey the contract; usd_per_unit DECIMAL(18,8)."""
    rate = F.col("usd_per_unit").try_cast(RATE)
    return raw_rates.filter(
        F.col("currency").rlike(CURRENCY)
        & F.col("usd_per_unit").rlike(RATE_TEXT)
        & (rate > F.lit(0))
    ).select(
        "rate_date",
        "source_file",
        "line_number",
        "currency",
        rate.alias("usd_per_unit"),
    )


def rates_on(raw_rates: DataFrame, dates: list[date], max_age_days: int) -> DataFrame:
    """The rate of each currency on each of ``dates`` (rate_on, currency, usd_per_unit).

    The greatest rate_date R <= D with D - R <= ``max_age_days`` (the contract's 7, from
    ``Settings``) that lists the currency; within
    R the file whose name sorts last wins, within a file the later line. USD is
    always 1, whatever the files say.
    """
    spark = raw_rates.sparkSession
    wanted = spark.createDataFrame([(d,) for d in sorted(set(dates))], "rate_on date")
    # Each rate can serve only the days rate_date .. rate_date + max age: expanding to them
    # turns the as-of lookup into an equi-join.
    candidates = (
        valid_rates(raw_rates)
        .filter(F.col("currency") != F.lit(USD))
        .withColumn(
            "rate_on",
            F.explode(
                F.sequence(F.col("rate_date"), F.date_add(F.col("rate_date"), F.lit(max_age_days)))
            ),
        )
        .join(wanted, on="rate_on", how="inner")
    )
    newest_first = Window.partitionBy("rate_on", "currency").orderBy(
        F.col("rate_date").desc(), F.col("source_file").desc(), F.col("line_number").desc()
    )
    from_files = (
        candidates.withColumn("_rank", F.row_number().over(newest_first))
        .filter(F.col("_rank") == F.lit(1))
        .select("rate_on", "currency", "usd_per_unit")
    )
    usd = wanted.select(
        "rate_on", F.lit(USD).alias("currency"), F.lit(1).cast(RATE).alias("usd_per_unit")
    )
    return from_files.unionByName(usd).select(
        F.col("rate_on"), F.col("currency"), F.col("usd_per_unit").cast(RATE)
    )


def convert_to_usd(orders: DataFrame, rates: DataFrame) -> DataFrame:
    """staging/orders rows: each order priced with its currency's rate on its event date.

    usd_per_unit and amount_usd are NULL when there is no rate (the partition's
    check then refuses to publish). amount_usd is amount * usd_per_unit rounded
    half-up to cents in decimal arithmetic; a product too large for
    DECIMAL(18,2) becomes NULL instead of failing the job.
    """
    # The rates are one row per (day, currency): broadcast them, so the orders are not
    # shuffled and keep the partitioning of their dedupe (event_date, order_id).
    priced = orders.join(
        F.broadcast(
            rates.select(
                F.col("rate_on").alias("event_date"), F.col("currency"), F.col("usd_per_unit")
            )
        ),
        on=["event_date", "currency"],
        how="left",
    )
    product = F.try_multiply(F.col("amount"), F.col("usd_per_unit"))
    # round() on a decimal is HALF_UP (bround would be HALF_EVEN).
    amount_usd = F.round(product, 2).try_cast(MONEY)
    return priced.select(
        *(f.name for f in ORDER_FIELDS),
        F.col("usd_per_unit").cast(RATE).alias("usd_per_unit"),
        amount_usd.alias("amount_usd"),
    )
