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
from backfill_assets_tests.lake.lake_support import race_past_a_pause

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


def test_two_runs_storing_at_once_keep_each_others_entries(spark, tmp_path, monkeypatch):
    """The first run stops just before its commit; the second stores a customer whose entries
    share a month with it meanwhile. Both runs' customers must be cached whole afterwards, and
    a customer stored again keeps only its new history."""
    lake = Lake(tmp_path / "lake", spark, engine="delta-rs")
    store_segments(lake, {"A": A, "B": B}, COMMIT)
    C = [(date(2024, 3, 1), "silver")]
    D = [(date(2024, 3, 1), "bronze"), (date(2024, 6, 1), "gold")]
    B_AGAIN = [(date(2024, 6, 1), "silver")]  # B's March entry is gone from its history
    errors = race_past_a_pause(
        tmp_path / "pauses",
        monkeypatch,
        lambda: store_segments(lake, {"C": C, "B": B_AGAIN}, COMMIT),
        lambda: store_segments(lake, {"D": D}, COMMIT),
    )
    assert not errors, errors
    table, _ = lake.read_table(CUSTOMER_SEGMENTS_TABLE.path)
    got = sorted((r["customer_id"], r["valid_from"], r["segment"]) for r in table.collect())
    histories = {"A": A, "B": B_AGAIN, "C": C, "D": D}
    assert got == sorted((c, d, s) for c, h in histories.items() for d, s in h)
    _, known = cached_segments(lake, set(histories))
    assert known == set(histories)


def test_two_runs_creating_the_cache_at_once_keep_each_others_entries(spark, tmp_path, monkeypatch):
    """No cache table yet: the first run stops just before the commit that would create it; the
    second creates it meanwhile with a customer whose entries share a month with the first's.
    Both runs' customers must be cached whole afterwards."""
    lake = Lake(tmp_path / "lake", spark, engine="delta-rs")
    C = [(date(2024, 3, 1), "silver")]
    D = [(date(2024, 3, 1), "bronze"), (date(2024, 6, 1), "gold")]
    errors = race_past_a_pause(
        tmp_path / "pauses",
        monkeypatch,
        lambda: store_segments(lake, {"A": A, "C": C}, COMMIT),
        lambda: store_segments(lake, {"D": D}, COMMIT),
    )
    assert not errors, errors
    table, _ = lake.read_table(CUSTOMER_SEGMENTS_TABLE.path)
    got = sorted((r["customer_id"], r["valid_from"], r["segment"]) for r in table.collect())
    histories = {"A": A, "C": C, "D": D}
    assert got == sorted((c, d, s) for c, h in histories.items() for d, s in h)
    _, known = cached_segments(lake, set(histories))
    assert known == set(histories)
