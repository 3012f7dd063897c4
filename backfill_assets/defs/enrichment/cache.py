"""The cache of the segment service's answers: ``staging/customer_segments``, one row per
(customer_id, valid_from), partitioned by ``valid_from``.

A customer is cached once every entry of their history is: the service answers a customer's
whole history at once, and one commit writes all of it. Writes merge by key, never append: the
touched partitions are rewritten as their current rows with the fetched customers' entries put
in (replacing any they had), in one commit, so writing the same answers twice leaves the same
rows. Two runs merging at once: the lake layer retries the loser's commit from a fresh
snapshot with the rows it computed, which can drop the entries the winner added to a shared
partition. Those customers are then asked again by the next run that needs them (their answers
are the same); no row is ever duplicated or wrong, and the run itself enriches from the
answers it holds, not from what the cache kept.
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


def cached_segments(lake: Lake, customers: set[str]) -> tuple[DataFrame, set[str]]:
    """The cached entries of ``customers``, and which of them are cached."""
    spark = lake.spark
    if not customers or not lake.exists(TABLE.path):
        return spark.createDataFrame([], CUSTOMER_SEGMENTS), set()
    wanted = spark.createDataFrame([(c,) for c in sorted(customers)], "customer_id STRING")
    table, _ = lake.read_table(TABLE.path)
    rows = table.join(F.broadcast(wanted), on="customer_id", how="left_semi").select(*CUSTOMER_SEGMENTS.fieldNames())
    rows = spark.createDataFrame(rows.collect(), CUSTOMER_SEGMENTS)  # pinned: later writes do not move it
    return rows, {r["customer_id"] for r in rows.select("customer_id").distinct().collect()}


def store_segments(lake: Lake, histories: dict[str, list[tuple[date, str]]], commit: CommitInfo) -> int | None:
    """Merge ``histories`` into the cache by key; the version that holds them (None: nothing to
    write and no table yet)."""
    entries = {(cid, vf): seg for cid, history in histories.items() for vf, seg in history}
    if not entries:
        return lake.version(TABLE.path)
    months = sorted({vf for _, vf in entries})
    current = {}
    if lake.exists(TABLE.path):
        rows, _ = lake.read_partitions(TABLE.path, TABLE.partition_column, months)
        current = {(r["customer_id"], r["valid_from"]): r["segment"] for r in rows.collect()
                   if r["customer_id"] not in histories}
    by_customer: dict[str, list] = {}
    for (cid, vf), seg in {**current, **entries}.items():
        by_customer.setdefault(cid, []).append((vf, seg))
    write = lake.replace_partitions(TABLE.path, segments_frame(lake.spark, by_customer),
                                    TABLE.partition_column, months, commit)
    return write.version
