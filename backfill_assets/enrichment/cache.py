"""The cache of the segment service's answers: ``staging/customer_segments``, one row per
(customer_id, valid_from), partitioned by ``valid_from``.

A customer is cached when every entry of their history is: the service answers a customer's whole
history at once, one commit writes all of it, and each row carries the history's length
(``_history_entries``). Writes are a MERGE by (customer_id, valid_from), never an append: the
fetched customers' entries go in, replacing any they had, and their entries the new history no
longer holds are deleted, in one commit; writing the same answers twice leaves the same rows. The
MERGE reads the table and commits with the table's commit lock held (``Lake.merge``), so two runs
storing at once both keep their customers; where there is no table yet, the first merge creates it
under that lock, and the second merges into it. A customer left with fewer rows than their history's
length (a writer outside the lake's lock) is not cached: the next run that needs them asks again. So
no run enriches from a history with a hole, and the run itself enriches from the answers it holds,
not from what the cache kept.
"""

from __future__ import annotations

from datetime import date

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from backfill_assets.catalog import CUSTOMER_SEGMENTS_TABLE
from backfill_assets.lake import CommitInfo, Lake
from backfill_assets.transforms.enrichment import segments_frame
from backfill_assets.transforms.schemas import CUSTOMER_SEGMENTS

TABLE = CUSTOMER_SEGMENTS_TABLE
KEY = ["customer_id", "valid_from"]


def cached_segments(lake: Lake, customers: set[str]) -> tuple[DataFrame, set[str]]:
    """The cached entries of ``customers``, and which of them are cached."""
    spark = lake.spark
    if not customers or not lake.exists(TABLE.path):
        return spark.createDataFrame([], CUSTOMER_SEGMENTS), set()
    wanted = spark.createDataFrame([(c,) for c in sorted(customers)], "customer_id STRING")
    table, _ = lake.read_table(TABLE.path)
    mine = table.join(F.broadcast(wanted), on="customer_id", how="left_semi").select(
        *CUSTOMER_SEGMENTS.fieldNames()
    )
    collected = mine.collect()  # pinned: later writes do not move it
    rows_of: dict[str, int] = {}
    for r in collected:
        rows_of[r["customer_id"]] = rows_of.get(r["customer_id"], 0) + 1
    whole = {
        r["customer_id"] for r in collected if rows_of[r["customer_id"]] == r["_history_entries"]
    }
    rows = spark.createDataFrame(
        [r for r in collected if r["customer_id"] in whole], CUSTOMER_SEGMENTS
    )
    return rows, whole


def store_segments(
    lake: Lake, histories: dict[str, list[tuple[date, str]]], commit: CommitInfo
) -> int | None:
    """Merge ``histories`` into the cache by key; the version that holds them (None: nothing to
    write and no table yet)."""
    fetched = segments_frame(lake.spark, histories)
    if not any(histories.values()):
        return lake.version(TABLE.path)
    return lake.merge(
        TABLE.path,
        fetched,
        KEY,
        commit,
        replace_for="customer_id",
        partition_column=TABLE.partition_column,
    )
