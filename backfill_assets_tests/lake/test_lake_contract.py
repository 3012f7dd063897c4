"""The lake contract, run against every engine, and on a lake in S3: replace, empty partitions,
rejects, pins, restore, metadata."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DateType,
    DecimalType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from backfill_assets.lake import CommitInfo, LakeError, LakeTableMissing, PartitionInfo

D1, D2, D3 = dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)
SCHEMA = StructType(
    [
        StructField("d", DateType()),
        StructField("id", LongType()),
        StructField("tag", StringType()),
    ]
)
TABLE = "staging/things"
LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
ON_S3 = True  # conftest.py: each case runs on a lake in S3 too
ON_S3_SPARK = True  # and on delta-spark there: the same cases on both engines


def frame(lake, rows):
    return lake.spark.createDataFrame(rows, SCHEMA)


def write(lake, rows, partitions, run_id="run", table=TABLE):
    return lake.replace_partitions(
        table, frame(lake, rows), "d", partitions, CommitInfo(run_id=run_id, code_version="abc123")
    )


def content(lake, table=TABLE, version=None):
    df, _ = lake.read_table(table, version)
    return sorted(tuple(row) for row in df.collect())


def test_lake_rewrite_replaces_partition_not_appends(lake):
    first = write(lake, [(D1, 1, "a1"), (D1, 2, "a2")], [D1])
    second = write(lake, [(D2, 3, "b1")], ["2024-01-02"])
    third = write(lake, [(D1, 4, "a3")], [D1])
    assert (first.version, second.version, third.version) == (0, 1, 2)
    assert third.rows_by_partition == {D1: 1}
    assert content(lake) == [(D1, 4, "a3"), (D2, 3, "b1")]
    assert lake.version(TABLE) == 2


def test_lake_row_counts_are_pinned_to_a_version(lake):
    write(lake, [(D1, 1, "a"), (D1, 2, "b"), (D2, 3, "c")], [D1, D2])
    write(lake, [(D1, 4, "d")], [D1])
    assert lake.row_counts(TABLE, "d", version=0) == {D1: 2, D2: 1}
    assert lake.row_counts(TABLE, "d") == {D1: 1, D2: 1}
    with pytest.raises(LakeTableMissing):
        lake.row_counts("staging/never_written", "d")


def test_lake_empty_partition_in_set_removes_old_rows(lake):
    write(lake, [(D1, 1, "old"), (D2, 2, "old"), (D3, 3, "keep")], [D1, D2, D3])
    result = write(lake, [(D2, 5, "new")], [D1, D2])
    assert result.rows_by_partition == {D1: 0, D2: 1}
    assert content(lake) == [(D2, 5, "new"), (D3, 3, "keep")]
    assert [p.partition for p in lake.partitions(TABLE, "d")] == [D2, D3]


def test_lake_rows_outside_set_rejected_before_commit(lake):
    write(lake, [(D1, 1, "old")], [D1])
    with pytest.raises(LakeError, match="2024-01-02"):
        write(lake, [(D1, 2, "new"), (D2, 3, "stray")], [D1])
    with pytest.raises(LakeError, match="outside"):
        write(lake, [(D1, 2, "new"), (None, 3, "null day")], [D1])
    assert lake.version(TABLE) == 0
    assert content(lake) == [(D1, 1, "old")]
    with pytest.raises(LakeError):
        write(lake, [(D3, 1, "x")], [D1], table="staging/never")
    assert not lake.exists("staging/never")


def test_lake_read_pinned_to_version(lake):
    write(lake, [(D1, 1, "v0"), (D2, 2, "v0")], [D1, D2])
    write(lake, [(D1, 3, "v1")], [D1])
    old, old_version = lake.read_partitions(TABLE, "d", ["2024-01-01"], version=0)
    new, new_version = lake.read_partitions(TABLE, "d", [D1])
    assert (old_version, new_version) == (0, 1)
    assert sorted(tuple(r) for r in old.collect()) == [(D1, 1, "v0")]
    assert sorted(tuple(r) for r in new.collect()) == [(D1, 3, "v1")]
    both, _ = lake.read_partitions(TABLE, "d", [D1, D2, D3], version=0)
    assert sorted(tuple(r) for r in both.collect()) == [(D1, 1, "v0"), (D2, 2, "v0")]
    assert [(f.name, f.dataType) for f in new.schema.fields] == [
        ("d", DateType()),
        ("id", LongType()),
        ("tag", StringType()),
    ]


def test_lake_restore_partition_set(lake):
    write(lake, [(D1, 1, "v0"), (D2, 2, "v0"), (D3, 3, "v0")], [D1, D2, D3])
    write(lake, [(D1, 4, "v1"), (D2, 5, "v1")], [D1, D2])
    write(lake, [(D3, 6, "v2")], [D3])
    result = lake.restore_partitions(TABLE, "d", [D1], 0, CommitInfo("rollback-1", "abc123"))
    assert result.version == 3
    assert result.rows_by_partition == {D1: 1}
    assert content(lake) == [(D1, 1, "v0"), (D2, 5, "v1"), (D3, 6, "v2")]
    assert lake.history(TABLE)[0]["metadata"]["restored_from_version"] == 0
    assert lake.history(TABLE)[0]["metadata"]["run_id"] == "rollback-1"
    assert content(lake, version=2) == [(D1, 4, "v1"), (D2, 5, "v1"), (D3, 6, "v2")]


def test_lake_commit_metadata_read_back(lake):
    commit = CommitInfo(
        run_id="run-42",
        code_version="git:1f2e3d",
        input_versions={"raw/orders": 7, "raw/fx_rates": 2},
        extra={"asset": "stg_orders"},
    )
    lake.replace_partitions(TABLE, frame(lake, [(D1, 1, "x"), (D1, 2, "y")]), "d", [D2, D1], commit)
    write(lake, [(D2, 3, "z")], [D2], run_id="run-43")
    history = lake.history(TABLE)
    assert [h["version"] for h in history] == [1, 0]
    assert isinstance(history[0]["timestamp"], dt.datetime)
    meta = history[1]["metadata"]
    assert {
        k: meta[k]
        for k in (
            "run_id",
            "code_version",
            "partitions",
            "rows_by_partition",
            "input_versions",
            "extra",
            "engine",
        )
    } == {
        "run_id": "run-42",
        "code_version": "git:1f2e3d",
        "partitions": ["2024-01-01", "2024-01-02"],
        "rows_by_partition": {"2024-01-01": 2, "2024-01-02": 0},
        "input_versions": {"raw/fx_rates": 2, "raw/orders": 7},
        "extra": {"asset": "stg_orders"},
        "engine": lake.engine.name,
    }
    assert history[0]["metadata"]["run_id"] == "run-43"


def test_lake_partitions_list_rows_and_last_version(lake):
    write(lake, [(D1, 1, "a"), (D1, 2, "b"), (D2, 3, "c")], [D1, D2])
    write(lake, [(D2, 4, "d"), (D2, 5, "e"), (D2, 6, "f")], [D2])
    write(lake, [(D3, 7, "g")], [D3])
    assert lake.partitions(TABLE, "d") == [
        PartitionInfo(D1, 2, 0),
        PartitionInfo(D2, 3, 1),
        PartitionInfo(D3, 1, 2),
    ]


def test_lake_column_types_survive_exactly(lake):
    schema = StructType(
        [
            StructField("event_date", DateType()),
            StructField("event_time", TimestampType()),
            StructField("amount", DecimalType(18, 2)),
            StructField("usd_per_unit", DecimalType(18, 8)),
            StructField("orders", LongType()),
            StructField("country", StringType()),
        ]
    )
    instant = dt.datetime(2024, 1, 1, 23, 59, 58, 123456, tzinfo=dt.UTC)
    rows = [(D1, instant, Decimal("1234567890123456.78"), Decimal("0.00000001"), 9, "DE")]
    lake.replace_partitions(
        "fact/typed",
        lake.spark.createDataFrame(rows, schema),
        "event_date",
        [D1],
        CommitInfo("r", "c"),
    )
    df, _ = lake.read_table("fact/typed")
    assert [(f.name, f.dataType) for f in df.schema.fields] == [
        (f.name, f.dataType) for f in schema.fields
    ]
    row = df.select("*", F.unix_micros("event_time").alias("micros")).collect()[0]
    assert row["micros"] == 1704153598123456
    assert (row["amount"], row["usd_per_unit"], row["orders"], row["country"]) == (
        Decimal("1234567890123456.78"),
        Decimal("0.00000001"),
        9,
        "DE",
    )


def test_lake_empty_dataframe_creates_table(lake):
    result = write(lake, [], [D1], table="quarantine/empty")
    assert (result.version, result.rows_by_partition, result.files_added) == (0, {D1: 0}, 0)
    assert lake.exists("quarantine/empty")
    df, version = lake.read_partitions("quarantine/empty", "d", [D1])
    assert version == 0 and df.count() == 0
    assert [f.name for f in df.schema.fields] == ["d", "id", "tag"]


def test_lake_missing_table_is_reported(lake):
    assert lake.version("raw/nothing") is None
    assert not lake.exists("raw/nothing")
    with pytest.raises(LakeTableMissing):
        lake.read_partitions("raw/nothing", "d", [D1])


def test_lake_read_by_a_column_it_is_not_partitioned_by_is_refused(lake):
    write(lake, [(D1, 1, "a")], [D1])
    write(lake, [(D2, 2, "b")], [D2])
    for version in (0, None):
        with pytest.raises(LakeError, match=r"partitioned by \['d'\], not \['tag'\]"):
            lake.read_partitions(TABLE, "tag", [D1], version=version)
    found, _ = lake.read_partitions(TABLE, "d", [D1], version=0)
    assert [tuple(r) for r in found.collect()] == [(D1, 1, "a")]


def test_lake_schema_mismatch_refused(lake):
    write(lake, [(D1, 1, "a")], [D1])
    other = lake.spark.createDataFrame([(D1, "1")], "d date, id string")
    with pytest.raises(LakeError, match="schema"):
        lake.replace_partitions(TABLE, other, "d", [D1], CommitInfo("r", "c"))
    assert lake.version(TABLE) == 0


def test_lake_vacuum_leaves_the_session_settings_as_they_were(lake):
    write(lake, [(D1, 1, "a")], [D1])
    write(lake, [(D1, 2, "b")], [D1])
    keys = (
        "spark.databricks.delta.retentionDurationCheck.enabled",
        "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled",
        LISTING_PARALLELISM,
    )
    lake.spark.conf.set(keys[0], "true")
    lake.spark.conf.set(LISTING_PARALLELISM, "123")
    before = {key: lake.spark.conf.get(key, None) for key in keys}
    try:
        assert lake.vacuum(TABLE, retention_hours=0) != []  # the replaced file, tombstoned just now
        assert {key: lake.spark.conf.get(key, None) for key in keys} == before
    finally:  # the session is shared: the settings this test made go
        for key in (keys[0], LISTING_PARALLELISM):
            lake.spark.conf.unset(key)
    assert content(lake) == [(D1, 2, "b")]


def test_lake_vacuum_lists_the_table_with_as_many_tasks_as_the_session_has_cores(lake):
    """Delta's VACUUM lists a table's folders in ``LISTING_PARALLELISM`` tasks, Spark's 10,000 by
    default, far more than a small table needs (docs/benchmarks.md, "Maintenance"; delta-rs runs
    no Spark job at all). No stage of a vacuum may run more tasks than the session has cores or
    shuffle partitions; the listing's stages are counted from Spark's own status tracker."""
    write(lake, [(D1, 1, "a"), (D2, 2, "a")], [D1, D2])
    write(lake, [(D1, 3, "b")], [D1])
    context = lake.spark.sparkContext
    bound = max(
        context.defaultParallelism, int(lake.spark.conf.get("spark.sql.shuffle.partitions"))
    )
    group = "vacuum-task-count"
    context.setJobGroup(group, "the vacuum whose tasks the test counts")
    try:
        removed = lake.vacuum(TABLE, retention_hours=0)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    tracker = context.statusTracker()
    stages = [
        tracker.getStageInfo(stage)
        for job in tracker.getJobIdsForGroup(group)
        for stage in tracker.getJobInfo(job).stageIds
    ]
    assert len(removed) == 1  # D1's first file, replaced by the second write
    assert [s.numTasks for s in stages if s is not None and s.numTasks > bound] == []
    assert content(lake) == [(D1, 3, "b"), (D2, 2, "a")]


@pytest.mark.parametrize("folder", ["lake[1]", "lake{a,b}", "lake*?"])
def test_a_lake_whose_path_holds_glob_characters_is_read_literally(spark, tmp_path, folder):
    """Spark's file reader takes paths as glob patterns: ``lake[1]`` named no file."""
    from backfill_assets.lake import Lake

    lake = Lake(tmp_path / folder, spark, engine="delta-rs")
    write(lake, [(D1, 1, "a"), (D2, 2, "b")], [D1, D2])
    assert content(lake) == [(D1, 1, "a"), (D2, 2, "b")]
