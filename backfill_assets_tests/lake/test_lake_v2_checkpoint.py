"""A table another writer moved to V2 checkpoints (``delta.checkpointPolicy = v2``: checkpoints
named by a UUID, or the first one by its version alone, their file actions in sidecars under
``_delta_log/_sidecars``), then past its
log retention: the lake's guard before deleting a staged file still sees every file the
table's versions name, on either engine, so a discard never deletes a published file."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import time
from pathlib import Path

import pytest

from backfill_assets.lake import CommitInfo, manifests
from backfill_assets.lake.log import newest_metadata

D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
SCHEMA = "d date, id bigint, tag string"
TABLE = "staging/things"
AGE_DAYS = 400  # older than Delta's default log retention (30 days)


def commit(run_id: str) -> CommitInfo:
    return CommitInfo(run_id=run_id, code_version="abc123")


def frame(lake, rows):
    return lake.spark.createDataFrame(rows, SCHEMA)


def to_v2_checkpoints(spark, table_dir: Path) -> None:
    """As a platform team would: V2 checkpoints, one every commit, one action a sidecar part."""
    spark.sql(
        f"ALTER TABLE delta.`{table_dir}` SET TBLPROPERTIES "
        "('delta.checkpointPolicy' = 'v2', 'delta.checkpointInterval' = '1')"
    )


def age_log(table_dir: Path) -> None:
    """Every file of the log older than its retention: the next checkpoint cleans them up."""
    stamp = time.time() - AGE_DAYS * 86400
    for path in (table_dir / "_delta_log").rglob("*"):
        if path.is_file():
            os.utime(path, (stamp, stamp))


def commit_files(table_dir: Path) -> set[int]:
    return {int(p.name.split(".")[0]) for p in (table_dir / "_delta_log").glob("*.json")}


def data_files(table_dir: Path) -> set[str]:
    return {str(p.relative_to(table_dir)) for p in table_dir.glob("d=*/*.parquet")}


@pytest.mark.parametrize("discarding", ["delta-rs", "delta-spark"])
def test_a_discard_keeps_the_files_a_v2_checkpoint_names_after_log_cleanup(two_engines, discarding):
    """A publish whose manifest still says "unpublished" (its update lost, no intent left): the
    commit that added the staged files is cleaned up, and only a V2 checkpoint's sidecars name
    them. The discard must keep them: the table still reads its published rows."""
    rs_lake, spark_lake = two_engines
    lake = rs_lake if discarding == "delta-rs" else spark_lake
    spark = spark_lake.spark
    spark_lake.replace_partitions(TABLE, frame(lake, [(D1, 0, "old")]), "d", [D1], commit("r0"))
    staged = spark_lake.staging.stage(TABLE, frame(lake, [(D1, 7, "new")]), "d", [D1], commit("s"))
    table_dir = spark_lake.path(TABLE)
    published = spark_lake.staging.publish(staged, commit=commit("p")).version
    stale = manifests.load(str(table_dir), staged.id)
    assert stale is not None
    manifests.save(str(table_dir), dataclasses.replace(stale, published={}, publishing=None))

    spark.conf.set("spark.databricks.delta.checkpoint.partSize", "1")
    try:
        to_v2_checkpoints(spark, table_dir)
        age_log(table_dir)
        # the next commit checkpoints, and Delta's log cleanup deletes what is older than it
        spark_lake.replace_partitions(
            TABLE, frame(lake, [(D2, 1, "later")]), "d", [D2], commit("r1")
        )
    finally:
        spark.conf.unset("spark.databricks.delta.checkpoint.partSize")
    log = table_dir / "_delta_log"
    assert published not in commit_files(table_dir)  # only the checkpoint names its files now
    assert list((log / "_sidecars").glob("*.parquet"))
    named = data_files(table_dir)
    assert lake.row_counts(TABLE, "d") == {D1: 1, D2: 1}
    assert [tuple(r) for r in lake.read_partitions(TABLE, "d", [D1])[0].collect()] == [
        (D1, 7, "new")
    ]

    lake.staging.discard(staged)

    assert data_files(table_dir) == named
    rows = sorted(tuple(r) for r in lake.read_table(TABLE)[0].collect())
    assert rows == [(D1, 7, "new"), (D2, 1, "later")]


def test_the_newest_metadata_is_read_from_a_v2_checkpoint_after_log_cleanup(two_engines):
    """The table's newest metaData (which resolves column mapping's physical names) is read
    from its newest checkpoint, a V2 one in JSON named by a UUID, once log cleanup deleted the
    commit that set it."""
    _, lake = two_engines
    spark = lake.spark
    lake.replace_partitions(TABLE, frame(lake, [(D1, 0, "old")]), "d", [D1], commit("r0"))
    table_dir = lake.path(TABLE)
    to_v2_checkpoints(spark, table_dir)
    spark.sql(f"ALTER TABLE delta.`{table_dir}` SET TBLPROPERTIES ('foreign.touched' = '1')")
    for n in range(2):  # each checkpoints, and cleans up the log before it
        age_log(table_dir)
        lake.replace_partitions(TABLE, frame(lake, [(D2, n, "later")]), "d", [D2], commit(f"r{n}"))
    log_dir = table_dir / "_delta_log"
    newest = max(log_dir.glob("*.checkpoint.*"), key=lambda p: p.name)
    assert newest.name.endswith(".json") and len(newest.name.split(".")) == 4  # v.checkpoint.uuid
    assert not any(
        '"metaData"' in p.read_text() for p in log_dir.glob("*.json") if "." not in p.stem
    )

    found = newest_metadata(str(table_dir))

    assert found is not None and found["configuration"]["foreign.touched"] == "1"
