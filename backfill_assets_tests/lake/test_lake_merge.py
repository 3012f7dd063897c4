"""``Lake.merge`` on every engine: Delta's MERGE by key in one commit (matched rows replaced,
new ones added, a replaced key's unmatched rows deleted, every other row kept), and two merges
at once, the first stopped just before its commit, both keep their rows: into a table, and
where there is none yet, when the first merge creates it."""

from __future__ import annotations

import datetime as dt

from backfill_assets.lake import CommitInfo
from backfill_assets_tests.lake.lake_support import race_past_a_pause

TABLE = "cache/things"
SCHEMA = "d date, owner string, k long, v string"
D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 2, 1)
ON_S3 = True  # conftest.py: each case runs on a lake in S3 too (delta-rs)


def commit(run: str) -> CommitInfo:
    return CommitInfo(run_id=run, code_version="test")


def rows_of(lake) -> list[tuple]:
    frame, _ = lake.read_table(TABLE)
    return sorted(tuple(r) for r in frame.collect())


def merge(lake, rows, run, replace_for="owner", partition_column=None):
    frame = lake.spark.createDataFrame(rows, SCHEMA)
    return lake.merge(
        TABLE,
        frame,
        ["owner", "k"],
        commit(run),
        replace_for=replace_for,
        partition_column=partition_column,
    )


def test_two_first_merges_at_once_create_the_table_once_and_keep_both_writers_rows(
    lake, tmp_path, monkeypatch
):
    errors = race_past_a_pause(
        tmp_path / "pauses",
        monkeypatch,
        lambda: merge(lake, [(D1, "b", 1, "b1"), (D2, "b", 2, "b2")], "first", None, "d"),
        lambda: merge(lake, [(D1, "c", 1, "c1")], "second", None, "d"),
    )
    assert not errors, errors
    assert rows_of(lake) == [(D1, "b", 1, "b1"), (D1, "c", 1, "c1"), (D2, "b", 2, "b2")]
    assert lake.version(TABLE) == 1  # one creation, one merge
    assert lake.partitions(TABLE, "d") and {p.partition for p in lake.partitions(TABLE, "d")} == {
        D1,
        D2,
    }


def test_a_merge_replaces_adds_and_deletes_by_key_in_one_commit(lake):
    before = [(D1, "a", 1, "a1"), (D1, "a", 2, "a2"), (D2, "a", 3, "a3"), (D1, "b", 1, "b1")]
    lake.replace_partitions(
        TABLE, lake.spark.createDataFrame(before, SCHEMA), "d", [D1, D2], commit("setup")
    )
    # a's history is now keys 1 (changed) and 4 (new): its keys 2 and 3 go; b is not touched
    version = merge(lake, [(D1, "a", 1, "a1*"), (D2, "a", 4, "a4")], "merge-1")
    assert version == lake.version(TABLE) == 1
    assert rows_of(lake) == sorted([(D1, "a", 1, "a1*"), (D2, "a", 4, "a4"), (D1, "b", 1, "b1")])
    assert lake.commit_metadata(TABLE, version)["run_id"] == "merge-1"
    # without replace_for nothing is deleted; the same rows twice change nothing
    merge(lake, [(D1, "b", 2, "b2")], "merge-2", replace_for=None)
    merge(lake, [(D1, "b", 2, "b2")], "merge-3", replace_for=None)
    assert rows_of(lake) == sorted(
        [(D1, "a", 1, "a1*"), (D2, "a", 4, "a4"), (D1, "b", 1, "b1"), (D1, "b", 2, "b2")]
    )


def test_two_merges_at_once_keep_both_writers_rows(lake, tmp_path, monkeypatch):
    lake.replace_partitions(
        TABLE,
        lake.spark.createDataFrame([(D1, "a", 1, "a1")], SCHEMA),
        "d",
        [D1],
        commit("setup"),
    )
    errors = race_past_a_pause(
        tmp_path / "pauses",
        monkeypatch,
        lambda: merge(lake, [(D1, "b", 1, "b1")], "first"),
        lambda: merge(lake, [(D1, "c", 1, "c1")], "second"),
    )
    assert not errors, errors
    assert rows_of(lake) == [(D1, "a", 1, "a1"), (D1, "b", 1, "b1"), (D1, "c", 1, "c1")]
    assert lake.version(TABLE) == 2


def test_a_lost_race_is_still_retried_once_deltas_python_package_is_loaded(lake):
    """``Lake.merge`` imports delta-spark's Python package, which converts Delta's conflict
    exceptions to Python classes of its own: a publish that loses to a compaction is still
    recognised as a lost race and retried, not failed."""
    import delta.tables  # noqa: F401 - the conversion is installed by the import

    rows = [(D1, "a", k, f"a{k}") for k in range(3)]
    for n, row in enumerate(rows):  # three small files for the compaction
        frame = lake.spark.createDataFrame([row], SCHEMA)
        if n == 0:
            lake.replace_partitions(TABLE, frame, "d", [D1], commit("setup"))
        else:
            merge(lake, [row], f"setup-{n}", replace_for=None)
    staged = lake.staging.stage(
        TABLE, lake.spark.createDataFrame([(D1, "z", 9, "new")], SCHEMA), "d", [D1], commit("new")
    )
    assert lake.compact(TABLE, "d", commit("compact")).version == staged.base_version + 1
    assert lake.staging.publish(staged).version == staged.base_version + 2
    assert rows_of(lake) == [(D1, "z", 9, "new")]
