"""delta-rs specifics: stray files stay invisible, unsupported reader features are refused."""

from __future__ import annotations

import datetime as dt
import os
import shutil

import pytest

from backfill_assets.lake import CommitInfo, Lake, LakeUnsupported
from backfill_assets_testkit.reader_features import declare_reader_feature
from backfill_assets_testkit.spark_jobs import jobs_started

D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)


@pytest.fixture
def lake(spark, tmp_path):
    return Lake(tmp_path / "lake", spark, engine="delta-rs")


def write(lake, rows, partitions):
    df = lake.spark.createDataFrame(rows, "d date, id bigint")
    return lake.replace_partitions("raw/t", df, "d", partitions, CommitInfo("r", "c"))


def test_lake_uncommitted_files_never_read_and_vacuumed_after_retention(lake):
    write(lake, [(D1, 1)], [D1])
    part_dir = lake.path("raw/t") / "d=2024-01-01"
    committed = next(part_dir.glob("*.parquet"))
    stray = part_dir / "part-stray.snappy.parquet"
    shutil.copy(committed, stray)
    df, _ = lake.read_partitions("raw/t", "d", [D1])
    assert [tuple(r) for r in df.collect()] == [(D1, 1)]
    assert lake.partitions("raw/t", "d")[0].rows == 1
    assert lake.vacuum("raw/t", retention_hours=1) == []
    two_hours_ago = stray.stat().st_mtime - 7200
    os.utime(stray, (two_hours_ago, two_hours_ago))
    assert lake.vacuum("raw/t", retention_hours=1) == ["d=2024-01-01/part-stray.snappy.parquet"]
    assert not stray.exists() and committed.exists()


def test_lake_auto_engine_is_delta_rs_without_delta_extension(spark, tmp_path):
    assert Lake(tmp_path, spark).engine.name == "delta-rs"


@pytest.mark.parametrize("feature", ["deletionVectors", "columnMapping"])
def test_lake_refuses_reader_features_it_cannot_honour(lake, feature):
    write(lake, [(D1, 1)], [D1])
    lake.check_supported("raw/t")
    assert declare_reader_feature(lake.path("raw/t"), feature) == 1
    with pytest.raises(LakeUnsupported, match=feature) as refused:
        lake.check_supported("raw/t")
    assert refused.value.features == [feature]
    with pytest.raises(LakeUnsupported, match=feature):
        lake.read_partitions("raw/t", "d", [D1])
    with pytest.raises(LakeUnsupported, match=feature):
        write(lake, [(D1, 2)], [D1])
    df, version = lake.read_partitions("raw/t", "d", [D1], version=0)
    assert version == 0 and [tuple(r) for r in df.collect()] == [(D1, 1)]


def test_lake_read_of_many_files_runs_no_listing_job(lake):
    days = [D1 + dt.timedelta(days=n) for n in range(40)]
    df = lake.spark.createDataFrame([(day, n) for n, day in enumerate(days)], "d date, id bigint")
    lake.replace_partitions("raw/t", df, "d", days, CommitInfo("r", "c"))
    with jobs_started(lake.spark) as jobs:
        frame, _ = lake.read_partitions("raw/t", "d", days)
    assert jobs == []
    assert frame.count() == 40
    assert frame.agg({"id": "sum"}).collect()[0][0] == sum(range(40))
