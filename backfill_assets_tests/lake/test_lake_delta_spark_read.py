"""delta-spark's reads: a plain table is read from its files as deltalake's snapshot lists them,
with the state Delta's JVM holds for each version; a table whose files a Parquet scan would
misread (deletion vectors, column mapping) goes through Delta's reader, and its row counts are
the rows that reader returns."""

from __future__ import annotations

import json

import pytest

import backfill_assets.lake.delta_spark_jvm as jvm
from backfill_assets.lake import snapshot
from backfill_assets.lake.delta_spark_jvm import (
    snapshot_at,
    snapshot_files,
    snapshot_records,
)
from backfill_assets.lake.errors import LakeConflict
from backfill_assets.lake.log import relative_path
from backfill_assets_tests.lake.lake_support import THINGS, commit
from backfill_assets_tests.lake.test_lake_staged import D1, D2, D3, frame

NATIVE = pytest.mark.parametrize("lake", ["delta-spark"], indirect=True)
ROWS = [(D1, 1, "a"), (D1, 2, "b"), (D2, 3, "c"), (D2, 4, "d"), (D3, 5, "e")]


def write_rows(lake, rows, days, run_id="w"):
    lake.replace_partitions(THINGS, frame(lake, rows), "d", days, commit(run_id))


def sql_path(lake) -> str:
    return f"delta.`{lake.path(THINGS)}`"


def read(lake, days=None) -> list[tuple]:
    if days is None:
        df, _ = lake.read_table(THINGS)
    else:
        df, _ = lake.read_partitions(THINGS, "d", days)
    return sorted(tuple(r) for r in df.collect())


def file_index(lake, days) -> str:
    """The kind of file index the read's scan lists its files with."""
    df, _ = lake.read_partitions(THINGS, "d", days)
    plan = str(df._jdf.queryExecution().executedPlan().toString())
    return plan.split("Location: ", 1)[1].split("(", 1)[0].split("[", 1)[0]


def expected_counts(rows) -> dict:
    counts: dict = {}
    for day, *_ in rows:
        counts[day] = counts.get(day, 0) + 1
    return counts


@NATIVE
def test_deltalakes_snapshot_holds_what_deltas_jvm_holds_at_every_version(lake):
    write_rows(lake, ROWS, [D1, D2, D3], "v0")
    write_rows(lake, [(D2, 30, "x")], [D2], "v1")
    lake.spark.sql(f"ALTER TABLE {sql_path(lake)} SET TBLPROPERTIES ('owner.note' = 'kept')")
    lake.checkpoint(THINGS)  # of version 2: versions 2 and 3 are read from it
    write_rows(lake, [(D1, 10, "y"), (D3, 50, "z")], [D1, D3], "v3")
    root = str(lake.path(THINGS))
    for version in range(4):
        found = snapshot.plain(root, version)
        assert found is not None
        schema_json, columns, configuration = jvm.table_shape(
            snapshot_at(lake.spark, root, version)
        )
        assert (json.loads(found.schema_json), found.partition_columns, found.configuration) == (
            json.loads(schema_json),
            columns,
            configuration,
        ), version
        files = snapshot_files(lake.spark, root, version).select("path", "size").collect()
        assert sorted((f.path, f.size) for f in found.files) == sorted(
            (relative_path(root, r["path"]), r["size"]) for r in files
        ), version
        assert lake.engine.snapshot_files(root, version) == {
            relative_path(root, r["path"]) for r in files
        }, version
    # another writer's property kept beside the retention every table of the lake is created
    # with: 14 days (BACKFILL_RETENTION_DAYS), never below Delta's defaults (7 and 30 days)
    assert snapshot.plain(root, 3).configuration == {
        "owner.note": "kept",
        "delta.deletedFileRetentionDuration": "interval 14 days",
        "delta.logRetentionDuration": "interval 30 days",
    }


@NATIVE
def test_a_plain_table_is_read_from_its_files_without_deltas_reader(lake):
    write_rows(lake, ROWS, [D1, D2, D3])
    assert read(lake, [D1, D3]) == sorted(r for r in ROWS if r[0] in (D1, D3))
    assert read(lake) == sorted(ROWS)
    assert file_index(lake, [D1]) == "InMemoryFileIndex"
    assert lake.row_counts(THINGS, "d") == expected_counts(ROWS)


@NATIVE
def test_a_table_with_deletion_vectors_is_read_and_counted_through_delta(lake):
    write_rows(lake, ROWS, [D1, D2, D3])
    lake.spark.sql(
        f"ALTER TABLE {sql_path(lake)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = true)"
    )
    lake.spark.sql(f"DELETE FROM {sql_path(lake)} WHERE id IN (1, 3)")
    log = lake.path(THINGS) / "_delta_log"
    newest = max(log.glob("*.json"))
    assert any(
        "deletionVector" in json.loads(line).get("add", {})
        for line in newest.read_text().splitlines()
    ), "the DELETE did not write a deletion vector"
    remaining = [r for r in ROWS if r[1] not in (1, 3)]
    assert read(lake, [D1, D2]) == sorted(r for r in remaining if r[0] in (D1, D2))
    assert read(lake) == sorted(remaining)
    assert lake.row_counts(THINGS, "d") == expected_counts(remaining)
    root, version = str(lake.path(THINGS)), lake.version(THINGS)
    assert snapshot_records(lake.spark, root, "d", version) == (expected_counts(remaining), [])
    assert snapshot.plain(root, version) is None  # reads, counts and swaps leave it to Delta
    # the delete guard's files of a version: the data files Delta's own snapshot names
    delta_files = snapshot_files(lake.spark, root, version).select("path").collect()
    assert lake.engine.snapshot_files(root, version) == {
        relative_path(root, r["path"]) for r in delta_files
    }


@NATIVE
def test_a_table_with_column_mapping_is_read_through_delta(lake):
    write_rows(lake, ROWS, [D1, D2, D3])
    lake.spark.sql(
        f"ALTER TABLE {sql_path(lake)} SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.minReaderVersion' = '2', 'delta.minWriterVersion' = '5')"
    )
    lake.spark.sql(f"ALTER TABLE {sql_path(lake)} RENAME COLUMN id TO w")
    df, _ = lake.read_partitions(THINGS, "d", [D1, D2])
    assert df.columns[1] == "w"
    assert sorted(tuple(r) for r in df.collect()) == sorted(r for r in ROWS if r[0] in (D1, D2))
    assert "Delta" in file_index(lake, [D1])


@NATIVE
def test_a_publish_into_a_table_with_column_mapping_sees_a_concurrent_writers_day(lake):
    lake.spark.sql(
        f"CREATE TABLE {sql_path(lake)} (d DATE, id BIGINT, tag STRING) USING DELTA "
        "PARTITIONED BY (d) TBLPROPERTIES ('delta.columnMapping.mode' = 'name')"
    )
    write_rows(lake, ROWS, [D1, D2, D3])
    log = lake.path(THINGS) / "_delta_log"
    assert '"d"' not in (log / f"{1:020d}.json").read_text(), "d has its name as physical name"
    staged = lake.staging.stage(THINGS, frame(lake, [(D1, 7, "staged")]), "d", [D1], commit("s"))
    lake.spark.sql(f"INSERT INTO {sql_path(lake)} VALUES (DATE'{D1}', 8, 'concurrent')")
    with pytest.raises(LakeConflict, match="2024-01-01"):
        lake.staging.publish(staged)
    expected = [*ROWS, (D1, 8, "concurrent")]
    assert read(lake) == sorted(expected)
    assert lake.row_counts(THINGS, "d") == expected_counts(expected)
