"""``Lake.merge`` on every engine: Delta's MERGE by key in one commit (matched rows replaced,
new ones added, a replaced key's unmatched rows deleted, every other row kept), and two merges
at once, the first stopped just before its commit, both keep their rows."""

from __future__ import annotations

import datetime as dt
import threading

from backfill_assets.lake import CommitInfo
from backfill_assets.testing.faults import forget_visits
from backfill_assets_tests.lake.lake_support import wait_for

TABLE = "cache/things"
SCHEMA = "d date, owner string, k long, v string"
D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 2, 1)
ON_S3 = True  # conftest.py: each case runs on a lake in S3 too (delta-rs)


def commit(run: str) -> CommitInfo:
    return CommitInfo(run_id=run, code_version="test")


def rows_of(lake) -> list[tuple]:
    frame, _ = lake.read_table(TABLE)
    return sorted(tuple(r) for r in frame.collect())


def merge(lake, rows, run, replace_for="owner"):
    frame = lake.spark.createDataFrame(rows, SCHEMA)
    return lake.merge(TABLE, frame, ["owner", "k"], commit(run), replace_for=replace_for)


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
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_DIR", str(pauses))
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_AT", "before_commit")
    forget_visits()
    (pauses / "before_commit.2.resume").touch()  # the second merge does not stop
    errors: list[BaseException] = []

    def run(rows, name):
        try:
            merge(lake, rows, name)
        except BaseException as exc:
            errors.append(exc)

    first = threading.Thread(target=run, args=([(D1, "b", 1, "b1")], "first"))
    first.start()
    wait_for(pauses / "before_commit.1.reached", [], 300)
    second = threading.Thread(target=run, args=([(D1, "c", 1, "c1")], "second"))
    second.start()
    second.join(timeout=5)  # it finishes, or waits for the first merge's commit
    (pauses / "before_commit.1.resume").touch()
    first.join(timeout=300)
    second.join(timeout=300)
    monkeypatch.delenv("BACKFILL_LAKE_PAUSE_DIR")
    assert not errors, errors
    assert rows_of(lake) == [(D1, "a", 1, "a1"), (D1, "b", 1, "b1"), (D1, "c", 1, "c1")]
    assert lake.version(TABLE) == 2
