"""Reading a snapshot's data files on S3 with Spark, without Hadoop's s3a jars.

Spark's own Parquet reader needs a Hadoop filesystem for ``s3://`` (the s3a jars, which this
project does not fetch yet). So, as ``parquet_writer.py`` writes, the executors read: the
driver turns the list of files the log names into a small DataFrame, and each task opens its
files with pyarrow's S3 filesystem (built from the ``S3Settings`` the task carries) and streams
their batches, the partition column filled from the log's value, every column cast to the
table's schema. The driver holds the list of files, never the rows.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from backfill_assets.lake.errors import LakeError
from backfill_assets.lake.keys import date_text
from backfill_assets.settings import S3Settings
from backfill_assets.spark.python_workers import freeze_worker_heap
from backfill_assets.storage.stores import S3_SCHEME, S3Storage, arrow_s3, storage_for

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs

BATCH_ROWS = 65_536


def read_s3_files(
    spark: SparkSession,
    table_dir: str,
    schema: StructType,
    column: str | None,
    files: list[tuple[str, dt.date | None, int]],
) -> DataFrame:
    """A DataFrame with ``schema`` over ``files`` (relative path, partition value, size in
    bytes) of the table at the ``s3://`` location ``table_dir``."""
    storage = storage_for(table_dir)
    if not isinstance(storage, S3Storage):
        raise LakeError(f"{table_dir} is not on S3")
    listing = [(path, None if day is None else date_text(day), size) for path, day, size in files]
    tasks = max(1, min(len(listing), int(spark.conf.get("spark.sql.shuffle.partitions") or 8)))
    frame = spark.createDataFrame(listing, "path string, day string, size long")
    frame = frame.repartition(tasks)
    task = _ReadTask(table_dir, schema.json(), column, storage.settings)
    return frame.mapInArrow(task, schema)


class _ReadTask:
    """The mapInArrow function: reads the files of its rows (path, day, size)."""

    def __init__(
        self, table_dir: str, schema_json: str, column: str | None, s3: S3Settings
    ) -> None:
        self.table_dir, self.schema_json, self.column, self.s3 = (
            table_dir,
            schema_json,
            column,
            s3,
        )

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark.sql.pandas.types import to_arrow_schema

        freeze_worker_heap()
        target = to_arrow_schema(StructType.fromJson(json.loads(self.schema_json)), timezone="UTC")
        filesystem = arrow_s3(self.s3)
        base = self.table_dir.removeprefix(S3_SCHEME)
        for listing in batches:
            for path, day, size in zip(
                listing.column("path").to_pylist(),
                listing.column("day").to_pylist(),
                listing.column("size").to_pylist(),
                strict=True,
            ):
                yield from self._file(filesystem, os.path.join(base, path), day, size, target)

    def _file(
        self,
        filesystem: pafs.FileSystem,
        path: str,
        day: str | None,
        size: int,
        target: pa.Schema,
    ) -> Iterator[pa.RecordBatch]:
        """The file's rows as ``target``'s batches. Its size, from the log or the manifest,
        spares the request that would ask the store for it: each read of a file is then its
        footer and its columns (``make_fragment``'s ``file_size``)."""
        import pyarrow as pa
        import pyarrow.dataset as ds

        fragment = ds.ParquetFileFormat().make_fragment(path, filesystem, file_size=size)
        present = set(fragment.physical_schema.names)
        wanted = [f.name for f in target if f.name in present and f.name != self.column]
        for batch in fragment.to_batches(columns=wanted, batch_size=BATCH_ROWS, use_threads=False):
            columns = []
            for field in target:
                if field.name == self.column:
                    value = None if day is None else dt.date.fromisoformat(day)
                    columns.append(pa.repeat(pa.scalar(value, field.type), batch.num_rows))
                elif field.name in present:
                    columns.append(batch.column(field.name).cast(field.type))
                else:  # a column the file predates
                    columns.append(pa.nulls(batch.num_rows, field.type))
            yield pa.RecordBatch.from_arrays(columns, schema=target)
