"""Reading a Delta snapshot's data files with Spark, and the checks that make that read honest.

The driver lists the snapshot's files (delta-rs reads the log); Spark's
executors read the Parquet files themselves, with the partition value taken
from the Delta log, not guessed from the file contents (on S3 through pyarrow:
``s3_files.py``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from backfill_assets.lake.errors import LakeError
from backfill_assets.lake.keys import date_text
from backfill_assets.spark.session import listing_on_driver
from backfill_assets.storage.stores import is_s3

if TYPE_CHECKING:
    from deltalake import DeltaTable

# Reader features whose files mean something other than "every row of every
# listed Parquet file": honouring them needs a Delta reader, which this engine
# is not. Anything not listed as harmless is refused.
HARMLESS_READER_FEATURES = frozenset({"timestampNtz", "v2Checkpoint", "vacuumProtocolCheck"})


def need_spark(spark: SparkSession | None) -> SparkSession:
    """``spark``; LakeError when a lake opened without one (the command line's reads) is asked
    for something only Spark does."""
    if spark is None:
        raise LakeError("this lake was opened without a Spark session: it cannot build DataFrames")
    return spark


def unreadable_features(
    min_reader_version: int, reader_features: Iterable[str], configuration: dict[str, str]
) -> list[str]:
    """What of a table's protocol a plain Parquet scan of its listed files would get wrong
    (empty: nothing): reader features not known to be harmless, column mapping, a reader
    version past 3."""
    features = set(reader_features)
    if configuration.get("delta.columnMapping.mode", "none") not in (None, "none"):
        features.add("columnMapping")
    unknown = sorted(features - HARMLESS_READER_FEATURES)
    if min_reader_version > 3:
        unknown.append(f"reader version {min_reader_version}")
    return unknown


def nullable(schema: StructType) -> StructType:
    """Every column nullable, like Spark's own file writers, so that later writes whose
    nullability differs (an outer join, a literal) still fit the table."""
    return StructType([StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])


def spark_schema(table: DeltaTable) -> StructType:
    """Delta's schemaString is Spark's StructType JSON, so the types come back exactly."""
    return StructType.fromJson(json.loads(table.schema().to_json()))


def read_files(
    spark: SparkSession,
    table_dir: str,
    schema: StructType,
    column: str | None,
    files: Iterable[tuple[str, dt.date | None, int]],
    s3_through_hadoop: bool = False,
) -> DataFrame:
    """A DataFrame over the given files (relative path, partition value, size in bytes) with
    ``schema``. Files in S3 are read with pyarrow in the executors, or by Spark's own reader
    through Hadoop's s3a when ``s3_through_hadoop`` (the delta-spark engine: its session maps
    ``s3://`` to s3a)."""
    files = list(files)
    names = [F.col(field.name) for field in schema.fields]
    if not files:
        return spark.createDataFrame([], schema)
    if is_s3(table_dir) and not s3_through_hadoop:
        from backfill_assets.lake.s3_files import read_s3_files

        return read_s3_files(spark, table_dir, schema, column, files)
    with listing_on_driver(spark, len(files)):
        if column is None:
            return _reader(spark, schema).parquet(*[_abs(table_dir, p) for p, _, _ in files])
        if all(
            day is not None and os.path.dirname(path) == f"{column}={date_text(day)}"
            for path, day, _ in files
        ):
            # Hive-style layout agrees with the log: Spark fills the partition column from
            # the path, typed by the schema we pass, in one scan.
            frame = (
                _reader(spark, schema)
                .option("basePath", table_dir)
                .parquet(*[_abs(table_dir, p) for p, _, _ in files])
            )
            return frame.select(*names)
        return _read_by_partition(spark, table_dir, schema, column, files).select(*names)


def _read_by_partition(
    spark: SparkSession,
    table_dir: str,
    schema: StructType,
    column: str,
    files: list[tuple[str, dt.date | None, int]],
) -> DataFrame:
    """Foreign layouts: one scan per partition value, the value taken from the log."""
    data_schema = StructType([f for f in schema.fields if f.name != column])
    by_day: dict[dt.date | None, list[str]] = {}
    for path, day, _ in files:
        by_day.setdefault(day, []).append(_abs(table_dir, path))
    frames = [
        _reader(spark, data_schema).parquet(*paths).withColumn(column, F.lit(day))
        for day, paths in sorted(by_day.items())
    ]
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def _reader(spark: SparkSession, schema: StructType) -> DataFrameReader:
    """Spark's reader of the lake's files: each path as it is written, not as a glob pattern (a
    lake under ``lake[1]`` named no file). ``__globPaths__``: Spark's own option for that."""
    return spark.read.schema(schema).option("__globPaths__", "false")


def _abs(table_dir: str, path: str) -> str:
    return path if "://" in path or os.path.isabs(path) else os.path.join(table_dir, path)
