"""The as-of join of segments onto staging orders, and the audit that checks it, on inline rows."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from pyspark.sql import functions as F

from backfill_assets.transforms.enrichment import enrich, enrichment_audit, segments_frame
from backfill_assets.transforms.schemas import STAGING_ORDERS

HISTORIES = {
    "A": [(date(2024, 1, 1), "gold"), (date(2024, 3, 1), "silver")],
    "C": [(date(2025, 1, 1), "bronze")],
}
ORDERS = [
    ("o1", "A", date(2024, 2, 15)),
    ("o2", "A", date(2024, 3, 1)),
    ("o3", "A", date(2023, 12, 31)),
    ("o4", "B", date(2024, 3, 1)),
    ("o5", "C", date(2024, 3, 1)),
]
# By hand: the latest entry valid from the event day or earlier; none before the first.
EXPECTED = {
    "o1": ("gold", date(2024, 1, 1)),
    "o2": ("silver", date(2024, 3, 1)),
    "o3": (None, None),
    "o4": (None, None),
    "o5": (None, None),
}


def staging(spark):
    rows = [
        (
            oid,
            cid,
            datetime(d.year, d.month, d.day, 10),
            d,
            datetime(d.year, d.month, d.day, 10),
            "paid",
            Decimal("1.00"),
            "USD",
            "US",
            Decimal("1.00000000"),
            Decimal("1.00"),
        )
        for oid, cid, d in ORDERS
    ]
    return spark.createDataFrame(rows, STAGING_ORDERS)


def test_each_order_gets_the_segment_valid_on_its_event_day(spark):
    segs = segments_frame(spark, HISTORIES)
    out = enrich(staging(spark), segs)
    got = {r["order_id"]: (r["customer_segment"], r["_segment_as_of"]) for r in out.collect()}
    assert got == EXPECTED
    assert out.columns == [*STAGING_ORDERS.fieldNames(), "customer_segment", "_segment_as_of"]


def test_the_audit_counts_missing_extra_and_wrong_rows_per_day(spark):
    segs = segments_frame(spark, HISTORIES)
    good = enrich(staging(spark), segs)
    assert all(
        v["rows"] == v["staging_rows"] and v["missing"] == v["extra"] == v["not_latest"] == 0
        for v in enrichment_audit(staging(spark), good, segs).values()
    )
    day = date(2024, 3, 1)
    # o2 loses its row, o4 takes A's later segment (today's, not the event day's), a stray row
    # appears.
    bad = (
        good.where(F.col("order_id") != "o2")
        .withColumn(
            "customer_segment",
            F.when(F.col("order_id") == "o4", "silver").otherwise(F.col("customer_segment")),
        )
        .unionByName(good.where(F.col("order_id") == "o1").withColumn("order_id", F.lit("zz")))
    )
    bad = bad.withColumn(
        "_segment_as_of",
        F.when(F.col("order_id") == "o5", date(2025, 1, 1)).otherwise(F.col("_segment_as_of")),
    )
    audit = enrichment_audit(staging(spark), bad, segs)
    assert audit[day] == {
        "staging_rows": 3,
        "rows": 2,
        "missing": 1,
        "extra": 0,
        "after_event_date": 1,
        "not_latest": 2,
    }
    assert audit[date(2024, 2, 15)] == {
        "staging_rows": 1,
        "rows": 2,
        "missing": 0,
        "extra": 1,
        "after_event_date": 0,
        "not_latest": 0,
    }
