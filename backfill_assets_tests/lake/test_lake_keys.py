"""Validation of partition keys, table and column names, and commit info before anything reaches
Delta."""

from __future__ import annotations

import datetime as dt

import pytest

from backfill_assets.lake import CommitInfo, Lake, LakeError, parse_partition_dates


def test_lake_keys_parse_dates_and_strings_sorted_unique():
    keys = ["2024-01-03", dt.date(2024, 1, 1), "2024-01-01", dt.date(2024, 2, 29)]
    assert parse_partition_dates(keys) == [
        dt.date(2024, 1, 1),
        dt.date(2024, 1, 3),
        dt.date(2024, 2, 29),
    ]


@pytest.mark.parametrize(
    "bad",
    [
        "2024-13-01",
        "2023-02-29",
        "2024-1-01",
        "20240101",
        " 2024-01-01",
        "2024-01-01 ",
        "2024-01-01' OR '1'='1",
        "2024-01-01T00:00:00",
        20240101,
        None,
        dt.datetime(2024, 1, 1),
        b"2024-01-01",
    ],
)
def test_lake_keys_reject_anything_but_a_date(bad):
    with pytest.raises(LakeError) as info:
        parse_partition_dates(["2024-01-02", bad])
    assert repr(bad) in str(info.value)


def test_lake_keys_reject_a_bare_string():
    with pytest.raises(LakeError, match="collection"):
        parse_partition_dates("2024-01-01")
    assert issubclass(LakeError, ValueError)


@pytest.mark.parametrize("name", ["../etc", "raw/../x", "/abs", "raw//x", "raw/x y", "", "raw/"])
def test_lake_keys_table_names_cannot_escape_root(spark, tmp_path, name):
    lake = Lake(tmp_path, spark, engine="delta-rs")
    with pytest.raises(LakeError, match="table name"):
        lake.path(name)


def test_lake_keys_injected_column_and_empty_set_refused(spark, tmp_path):
    lake = Lake(tmp_path, spark, engine="delta-rs")
    df = spark.createDataFrame([(dt.date(2024, 1, 1), 1)], "d date, n bigint")
    with pytest.raises(LakeError, match="column name"):
        lake.read_partitions("raw/t", "d) OR (1=1", ["2024-01-01"])
    with pytest.raises(LakeError, match="empty"):
        lake.replace_partitions("raw/t", df, "d", [], CommitInfo("r", "c"))
    with pytest.raises(LakeError, match="DATE"):
        lake.replace_partitions("raw/t", df, "n", ["2024-01-01"], CommitInfo("r", "c"))
    assert not lake.exists("raw/t")


def test_lake_keys_commit_info_validated():
    with pytest.raises(LakeError, match="run_id"):
        CommitInfo(run_id="", code_version="c")
    with pytest.raises(LakeError, match="input_versions"):
        CommitInfo("r", "c", input_versions={"raw/orders": "7"})
    with pytest.raises(LakeError, match="extra"):
        CommitInfo("r", "c", extra={"rows": 3})


def test_lake_keys_native_predicate_is_built_from_dates_only(spark):
    from backfill_assets.lake.delta_spark import _predicate

    predicate = _predicate("d", [dt.date(2024, 1, 1), dt.date(2024, 1, 3)])
    assert predicate == "`d` IN (DATE'2024-01-01', DATE'2024-01-03')"
    days = spark.createDataFrame([(dt.date(2024, 1, n),) for n in (1, 2, 3)], "d date")
    assert [r["d"].day for r in days.where(predicate).orderBy("d").collect()] == [1, 3]
    with pytest.raises(LakeError):
        _predicate("d", ["2024-01-01') OR (1=1"])
