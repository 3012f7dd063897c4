"""The executor-side writer's row groups: a column's NULL rows apart from its others."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from backfill_assets.lake.errors import LakeError
from backfill_assets.lake.parquet_writer import write_files

D1, D2 = date(2024, 1, 1), date(2024, 1, 2)


def _rows() -> list[tuple]:
    # Rejections interleaved with valid rows, as a landed file's lines come.
    return [
        (day, n, None if n % 3 else f"reason-{n % 2}") for day in (D1, D2) for n in range(1, 40)
    ]


def _null_shares(path: Path, column: str) -> list[tuple[int, int]]:
    """(rows, NULLs of ``column``) of each row group of the file at ``path``."""
    meta = pq.ParquetFile(path).metadata
    index = meta.schema.names.index(column)
    return [
        (meta.row_group(g).num_rows, meta.row_group(g).column(index).statistics.null_count)
        for g in range(meta.num_row_groups)
    ]


def test_a_columns_null_rows_and_its_others_are_written_in_row_groups_of_their_own(spark, tmp_path):
    rows = _rows()
    df = spark.createDataFrame(rows, "d date, n bigint, reason string")
    written = write_files(df, str(tmp_path), "d", [D1, D2], nulls_apart="reason")

    assert sorted(f.partition for f in written) == [D1, D2]
    for f in written:
        groups = _null_shares(tmp_path / f.path, "reason")
        mine = [r for r in rows if r[0] == f.partition]
        # two groups: one all NULL, one without a NULL, holding every row of the day
        assert sorted(groups) == sorted(
            [
                (sum(r[2] is None for r in mine), sum(r[2] is None for r in mine)),
                (sum(r[2] is not None for r in mine), 0),
            ]
        )
    back = spark.read.option("basePath", str(tmp_path)).parquet(
        *[str(tmp_path / f.path) for f in written]
    )
    assert sorted(tuple(r) for r in back.select("d", "n", "reason").collect()) == sorted(rows)
    rejected = back.filter(F.col("reason").isNotNull()).select("d", "n", "reason").collect()
    assert sorted(tuple(r) for r in rejected) == sorted(r for r in rows if r[2] is not None)


def test_without_it_a_days_rows_are_one_row_group(spark, tmp_path):
    rows = _rows()
    df = spark.createDataFrame(rows, "d date, n bigint, reason string")
    written = write_files(df, str(tmp_path), "d", [D1, D2])
    for f in written:
        mine = [r for r in rows if r[0] == f.partition]
        nulls = sum(r[2] is None for r in mine)
        assert _null_shares(tmp_path / f.path, "reason") == [(len(mine), nulls)]


def test_a_column_the_rows_lack_is_refused(spark, tmp_path):
    df = spark.createDataFrame(_rows(), "d date, n bigint, reason string")
    with pytest.raises(LakeError, match="nulls_apart"):
        write_files(df, str(tmp_path), "d", [D1, D2], nulls_apart="verdict")
