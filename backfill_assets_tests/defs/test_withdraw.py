"""A held raw day is put back as it was before the step wrote it; its neighbours keep the new rows."""

from __future__ import annotations

from datetime import date

from deltalake import DeltaTable
from pyspark.sql import types as T

from backfill_assets.catalog import Table
from backfill_assets.defs.raw.assets import withdraw
from backfill_assets.lake import CommitInfo, Lake

SCHEMA = T.StructType([T.StructField("day", T.DateType()), T.StructField("payload", T.StringType())])
A, B = date(2024, 1, 1), date(2024, 1, 2)
COMMIT = CommitInfo(run_id="test", code_version="test")


def _rows(path) -> set[tuple]:
    return {(r["day"], r["payload"]) for r in DeltaTable(str(path)).to_pyarrow_table().to_pylist()}


def test_held_day_is_restored_and_the_rest_kept(spark, tmp_path):
    lake = Lake(tmp_path, spark, engine="delta-rs")
    old = spark.createDataFrame([(A, "a-old"), (B, "b-old")], SCHEMA)
    lake.replace_partitions("t", old, "day", [A, B], COMMIT)
    before = lake.version("t")
    new = spark.createDataFrame([(A, "a-new"), (B, "b-new")], SCHEMA)
    lake.replace_partitions("t", new, "day", [A, B], COMMIT)

    withdraw(spark, lake, Table("t", "day"), [A], before, SCHEMA, COMMIT)
    assert _rows(lake.path("t")) == {(A, "a-old"), (B, "b-new")}


def test_held_day_of_a_new_table_ends_empty(spark, tmp_path):
    lake = Lake(tmp_path, spark, engine="delta-rs")
    new = spark.createDataFrame([(A, "a-new"), (B, "b-new")], SCHEMA)
    lake.replace_partitions("t", new, "day", [A, B], COMMIT)

    withdraw(spark, lake, Table("t", "day"), [A], None, SCHEMA, COMMIT)
    assert _rows(lake.path("t")) == {(B, "b-new")}
