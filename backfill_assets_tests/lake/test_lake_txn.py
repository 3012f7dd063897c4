"""A write records Delta's transaction id (the ``txn`` action, its app id the write id), so
whether a write landed is read from the table's snapshot, which keeps it whatever log cleanup
deleted: a journal or a staged version's intent settled after the cleanup still finds a commit
that landed, and still finds none for a write that never did."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import time

from backfill_assets.lake import CommitInfo, manifests
from backfill_assets_testkit.log_cleanup import clean_up_log

D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
SCHEMA = "d date, id bigint, tag string"
TABLE = "staging/things"
LATER_WRITES = 3


def commit(run_id: str, write_id: str | None = None) -> CommitInfo:
    return CommitInfo(run_id=run_id, code_version="abc123", write_id=write_id)


def frame(lake, rows):
    return lake.spark.createDataFrame(rows, SCHEMA)


def later_writes(lake) -> None:
    for n in range(LATER_WRITES):
        lake.replace_partitions(TABLE, frame(lake, [(D2, n, "later")]), "d", [D2], commit(f"r{n}"))


def test_a_landed_write_is_found_by_its_id_after_log_cleanup_deleted_its_commit(lake):
    lake.replace_partitions(TABLE, frame(lake, [(D1, 0, "first")]), "d", [D1], commit("r0"))
    landed = lake.replace_partitions(
        TABLE, frame(lake, [(D1, 1, "mine")]), "d", [D1], commit("r1", write_id="w-landed")
    ).version
    later_writes(lake)
    assert lake.commit_of_write(TABLE, "w-landed") == landed  # its commit file is still there

    left = clean_up_log(lake.path(TABLE))
    assert landed not in left and left  # the cleanup deleted the write's commit file

    assert lake.commit_of_write(TABLE, "w-landed") == landed
    assert lake.commit_of_write(TABLE, "w-landed", after=landed - 1) == landed
    assert lake.commit_of_write(TABLE, "w-never") is None


def test_a_publish_intent_settles_as_published_after_log_cleanup(lake):
    """A publish stopped after its commit landed and before its manifest recorded it (here the
    manifest is put back as such a stop leaves it) settles as published, though log cleanup
    deleted the commit: its partition's files are production's, and no discard deletes them."""
    lake.replace_partitions(TABLE, frame(lake, [(D1, 0, "first")]), "d", [D1], commit("r0"))
    staged = lake.staging.stage(TABLE, frame(lake, [(D1, 7, "staged")]), "d", [D1], commit("s"))
    table_dir = str(lake.path(TABLE))
    before = lake.version(TABLE)
    lake.staging.publish(staged, commit=commit("p", write_id="w-publish"))
    stopped = manifests.load(table_dir, staged.id)
    intent = {"write_id": "w-publish", "dates": [D1.isoformat()], "after": before}
    manifests.save(table_dir, dataclasses.replace(stopped, published={}, publishing=intent))
    later_writes(lake)
    clean_up_log(lake.path(TABLE))

    settled = lake.staging.version(TABLE, staged.id)
    assert settled is not None and settled.publishing is None
    assert set(settled.published) == {D1}
    lake.staging.discard(settled)
    rows = sorted(
        tuple(r) for r in lake.read_table(TABLE)[0].where("d = DATE'2024-01-01'").collect()
    )
    assert rows == [(D1, 7, "staged")]


def txn_of(table_dir, version: int) -> list[dict]:
    """The transaction ids the commit file of ``version`` records, read as plain JSON."""
    path = table_dir / "_delta_log" / f"{version:020d}.json"
    return [json.loads(line)["txn"] for line in path.read_text().splitlines() if '"txn"' in line]


def test_every_write_records_its_write_id_as_deltas_transaction_id(lake):
    """A replace (the table's first, then another), a publish, a restore and a merge: each
    commit holds one ``txn`` action, its app id the write id, its version the commit's (no
    other writer here), and when it was written."""
    started_ms = time.time() * 1000
    versions = {
        "w-create": lake.replace_partitions(
            TABLE, frame(lake, [(D1, 0, "a")]), "d", [D1], commit("r0", "w-create")
        ).version,
        "w-replace": lake.replace_partitions(
            TABLE, frame(lake, [(D2, 1, "b")]), "d", [D2], commit("r1", "w-replace")
        ).version,
    }
    staged = lake.staging.stage(TABLE, frame(lake, [(D1, 2, "c")]), "d", [D1], commit("s"))
    versions["w-publish"] = lake.staging.publish(staged, commit=commit("p", "w-publish")).version
    versions["w-restore"] = lake.restore_partitions(
        TABLE, "d", [D1], versions["w-create"], commit("u", "w-restore")
    ).version
    versions["w-merge"] = lake.merge(
        TABLE, frame(lake, [(D2, 1, "merged")]), ["d", "id"], commit("m", "w-merge")
    )
    table_dir = lake.path(TABLE)
    for write_id, version in versions.items():
        [txn] = txn_of(table_dir, version)
        assert (txn["appId"], txn["version"]) == (write_id, version)
        assert started_ms - 1000 <= txn["lastUpdated"] <= time.time() * 1000
        assert lake.commit_of_write(TABLE, write_id) == version
