"""The segment cache on a real Delta table: what it reports as cached. A commit that lost a
race can leave a customer with part of their history (the entries in one partition dropped);
such a customer is not cached, so the next run asks the service again instead of enriching
from a history with a hole."""

from __future__ import annotations

from datetime import date

from backfill_assets.catalog import CUSTOMER_SEGMENTS_TABLE
from backfill_assets.enrichment.cache import cached_segments, store_segments
from backfill_assets.lake import CommitInfo, Lake
from backfill_assets.transforms.enrichment import segments_frame

A = [(date(2024, 1, 1), "gold"), (date(2024, 3, 1), "silver"), (date(2024, 6, 1), "bronze")]
B = [(date(2024, 3, 1), "gold")]
COMMIT = CommitInfo(run_id="segment-cache-test", code_version="test")


def test_a_customer_missing_part_of_their_history_is_not_cached(spark, tmp_path):
    lake = Lake(tmp_path, spark, engine="delta-rs")
    store_segments(lake, {"A": A, "B": B}, COMMIT)
    rows, known = cached_segments(lake, {"A", "B"})
    assert known == {"A", "B"} and rows.count() == 4
    # What a lost race leaves: March rewritten from a snapshot that lacked A's March entry.
    table = CUSTOMER_SEGMENTS_TABLE
    lake.replace_partitions(
        table.path,
        segments_frame(spark, {"B": B}),
        table.partition_column,
        [date(2024, 3, 1)],
        COMMIT,
    )
    _, known = cached_segments(lake, {"A", "B"})
    assert known == {"B"}
