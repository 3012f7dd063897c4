"""Orders enriched with the customer's segment as of the event day, and the figures its checks
compare. Pure DataFrame functions: the service's answers come in as a ``segments`` DataFrame
(``schemas.CUSTOMER_SEGMENTS``: customer_id, valid_from, segment).

The segment of an order is the one of its customer's latest history entry with
``valid_from <= event_date``: a backfill of 2024 sees the segments of 2024, never today's. A
customer with no entry yet on that day gets a NULL segment and a NULL ``_segment_as_of``.
"""

from __future__ import annotations

from datetime import date

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from backfill_assets.transforms.schemas import CUSTOMER_SEGMENTS, ENRICHED_ORDERS

KEY = ["event_date", "order_id"]


def segments_frame(spark: SparkSession, histories: dict[str, list[tuple[date, str]]]) -> DataFrame:
    """The service's answers as rows of the cache table: each customer's whole history, each
    row carrying how many entries it has."""
    rows = [
        (cid, valid_from, segment, len(history))
        for cid, history in sorted(histories.items())
        for valid_from, segment in history
    ]
    return spark.createDataFrame(rows, CUSTOMER_SEGMENTS)


def enrich(staging: DataFrame, segments: DataFrame) -> DataFrame:
    """Every staging row, with ``customer_segment`` and ``_segment_as_of`` as of its event day."""
    entries = segments.select("customer_id", "valid_from", "segment")
    candidates = (
        staging.select(*KEY, "customer_id")
        .join(entries, on="customer_id", how="inner")
        .where(F.col("valid_from") <= F.col("event_date"))
    )
    latest = candidates.groupBy(*KEY).agg(
        F.max(F.struct(F.col("valid_from"), F.col("segment"))).alias("entry")
    )
    return (
        staging.join(latest, on=KEY, how="left")
        .withColumn("customer_segment", F.col("entry.segment"))
        .withColumn("_segment_as_of", F.col("entry.valid_from"))
        .select(*ENRICHED_ORDERS.fieldNames())
    )


EMPTY_DAY = {
    "staging_rows": 0,
    "rows": 0,
    "missing": 0,
    "extra": 0,
    "after_event_date": 0,
    "not_latest": 0,
}


def enrichment_audit(
    staging: DataFrame, enriched: DataFrame, segments: DataFrame
) -> dict[date, dict]:
    """Per event day: staging rows, enriched rows, staging orders without an enriched row (or
    with another customer), enriched rows without a staging order, rows whose segment is dated
    after the event day, and rows whose (segment, as-of) is not the customer's latest entry up
    to the event day in ``segments``. One aggregation over one join."""
    s = staging.select(
        *KEY, F.col("customer_id").alias("s_customer"), F.lit(True).alias("in_staging")
    )
    e = enriched.select(
        *KEY,
        F.col("customer_id").alias("e_customer"),
        "customer_segment",
        "_segment_as_of",
        F.lit(True).alias("in_enriched"),
    )
    entries = segments.select(F.col("customer_id").alias("e_customer"), "valid_from", "segment")
    ranked = (
        e.join(entries, on="e_customer", how="inner")
        .where(F.col("valid_from") <= F.col("event_date"))
        .withColumn(
            "rank",
            F.row_number().over(
                Window.partitionBy(*KEY)
                .orderBy(F.col("valid_from").desc())
                .rowsBetween(Window.unboundedPreceding, Window.currentRow)
            ),
        )
        .where(F.col("rank") == 1)
        .select(
            *KEY, F.col("valid_from").alias("want_as_of"), F.col("segment").alias("want_segment")
        )
    )
    both = s.join(e, on=KEY, how="full").join(ranked, on=KEY, how="left")
    present = F.col("in_enriched").isNotNull()
    wrong = present & ~(
        F.col("_segment_as_of").eqNullSafe(F.col("want_as_of"))
        & F.col("customer_segment").eqNullSafe(F.col("want_segment"))
    )
    counts = both.groupBy("event_date").agg(
        F.count(F.col("in_staging")).alias("staging_rows"),
        F.count(F.col("in_enriched")).alias("rows"),
        F.sum(
            (
                F.col("in_staging").isNotNull()
                & ~F.coalesce(F.col("s_customer") == F.col("e_customer"), F.lit(False))
            ).cast("long")
        ).alias("missing"),
        F.sum((present & F.col("in_staging").isNull()).cast("long")).alias("extra"),
        F.sum((present & (F.col("_segment_as_of") > F.col("event_date"))).cast("long")).alias(
            "after_event_date"
        ),
        F.sum(wrong.cast("long")).alias("not_latest"),
    )
    return {r["event_date"]: {k: int(r[k] or 0) for k in EMPTY_DAY} for r in counts.collect()}
