"""Executor-side writer: Parquet files straight into the table directory, metadata back to the
driver.

``write_files`` runs one Spark job. Each task receives a block of consecutive
partitions (``day_blocks``) as Arrow batches sorted by the partition column,
streams them into one Parquet file per partition value (rolled at
``MAX_ROWS_PER_FILE``) under ``<table>/<column>=<YYYY-MM-DD>/`` and returns one
small row per file. The driver never holds the data itself, only
this list, so its memory does not grow with the size of a write.

On S3 (an ``s3://`` table location) the tasks write through pyarrow's S3 filesystem, built on
the executor from the ``S3Settings`` the task carries (the driver's: the endpoint and keys travel
in the pickled task, as Spark's own s3a settings travel in its conf), so no Hadoop jar is needed.

Files are named ``part-<uuid>.snappy.parquet`` and become visible only when a
Delta commit adds them; a writer killed before its commit leaves orphans that
reads never list and vacuum removes. On local disk each file is synced, with its folder (and
the table's, when the folder is new), before the driver hears of it: Delta's rule, data files
durable before the commit that names them.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DateType

import backfill_assets.lake.durable as durable
from backfill_assets import seam
from backfill_assets.day_blocks import BLOCK, by_day_blocks
from backfill_assets.lake.errors import LakeError
from backfill_assets.lake.file_stats import DEFAULT_INDEXED_COLUMNS, file_stats
from backfill_assets.lake.keys import date_text
from backfill_assets.lake.manifests import StagedFile
from backfill_assets.settings import S3Settings
from backfill_assets.spark.python_workers import freeze_worker_heap
from backfill_assets.storage.stores import S3_SCHEME, S3Storage, arrow_s3, storage_for

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa

if TYPE_CHECKING:
    from pyarrow.parquet import ParquetWriter

MAX_ROWS_PER_FILE = 2_000_000
ROW_GROUP_ROWS = 131_072
FILE_SCHEMA = (
    "path string, size long, partition string, rows long, modification_time long, "
    "stats string, outside long"
)
_FILE_FIELDS = ("path", "size", "partition", "rows", "modification_time", "stats", "outside")


def write_files(
    df: DataFrame,
    table_dir: str,
    column: str,
    dates: list[dt.date],
    spread: int = 1,
    in_day_blocks: bool = False,
    nulls_apart: str | None = None,
    indexed_columns: int = DEFAULT_INDEXED_COLUMNS,
) -> list[StagedFile]:
    """Write ``df`` as Parquet files of the given partitions; LakeError if a row lies outside them.

    Each block of ``DAYS_PER_TASK`` consecutive partitions is written by one task, so a task
    sorts as much for a year as for a month; with ``spread`` > 1 each partition is written by up
    to that many (rows sent by partition and a hash of the row, into exactly ``spread`` tasks,
    which adaptive execution does not merge back): a salt for a partition much larger than the
    rest. With ``in_day_blocks`` the rows already arrive so, each task's sorted by partition
    (sent by ``by_day_blocks`` upstream, then only narrow steps), and are written where they
    are, with no shuffle or sort here. Only the file count rests on that: a partition whose rows
    come apart in a task, or reach two tasks, is written as more than one file. With
    ``nulls_apart``, a column's NULL rows and its other rows go to row groups of their own, so
    a reader that wants only one kind skips the other's row groups by their statistics (raw's
    ``_reason``: the quarantine's split reads the rejected records' groups alone). Each file's
    Delta statistics come from its footer, for its first ``indexed_columns`` columns
    (``file_stats``)."""
    field = next((f for f in df.schema.fields if f.name == column), None)
    if field is None or not isinstance(field.dataType, DateType):
        raise LakeError(f"partition column {column!r} must be a DATE column of the DataFrame")
    allowed = frozenset(date_text(day) for day in dates)
    storage = storage_for(table_dir)
    if nulls_apart is not None and nulls_apart not in df.columns:
        raise LakeError(f"nulls_apart: {nulls_apart!r} is not a column of the DataFrame")
    task = _FileTask(
        table_dir,
        column,
        allowed,
        storage.settings if isinstance(storage, S3Storage) else None,
        nulls_apart,
        indexed_columns,
    )
    if spread > 1 and in_day_blocks:
        raise LakeError("spread and in_day_blocks exclude each other: each arranges the rows")
    if in_day_blocks:
        ordered = df
    elif spread > 1:
        salt = F.pmod(F.xxhash64(*[F.col(c) for c in df.columns]), F.lit(spread))
        ordered = df.repartition(spread, F.col(column), salt).sortWithinPartitions(F.col(column))
    else:
        ordered = by_day_blocks(df, column, dates).drop(BLOCK).sortWithinPartitions(F.col(column))
    rows = ordered.mapInArrow(task, FILE_SCHEMA).collect()
    written = [
        StagedFile(
            r["path"],
            r["size"],
            dt.date.fromisoformat(r["partition"]),
            r["rows"],
            r["modification_time"],
            r["stats"],
        )
        for r in rows
        if r["path"] is not None
    ]
    outside = sorted({r["partition"] or "NULL" for r in rows if r["path"] is None})
    if outside:
        remove_files(table_dir, [f.path for f in written])
        raise LakeError(
            f"rows with {column} outside the partitions being written: {', '.join(outside[:10])}"
        )
    return written


def remove_files(table_dir: str, paths: list[str]) -> None:
    """Best-effort removal of files that will never be committed; vacuum catches any left."""
    storage = storage_for(table_dir)
    for path in paths:
        try:
            storage.delete(os.path.join(table_dir, path))
        except OSError:
            pass


class _FileTask:
    """The mapInArrow function; a class so Spark pickles only these six fields."""

    def __init__(
        self,
        table_dir: str,
        column: str,
        allowed: frozenset[str],
        s3: S3Settings | None,
        nulls_apart: str | None = None,
        indexed_columns: int = DEFAULT_INDEXED_COLUMNS,
    ) -> None:
        self.table_dir, self.column, self.allowed, self.s3 = table_dir, column, allowed, s3
        self.nulls_apart, self.indexed_columns = nulls_apart, indexed_columns

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa
        import pyarrow.compute as pc

        freeze_worker_heap()
        sink = _PartitionSink(
            self.table_dir, self.column, self.s3, self.nulls_apart, self.indexed_columns
        )
        outside: dict[str | None, int] = {}
        for batch in batches:
            keys = batch.column(self.column)
            values = pc.unique(keys).to_pylist()
            for value in values:
                text = None if value is None else value.isoformat()
                if len(values) == 1:  # the common case, rows sorted by partition: no copy
                    part = batch
                else:
                    mask = (
                        pc.is_null(keys)
                        if value is None
                        else pc.equal(keys, pa.scalar(value, keys.type))
                    )
                    part = batch.filter(mask)
                if text not in self.allowed:
                    outside[text] = outside.get(text, 0) + part.num_rows
                    continue
                sink.write(text, part.drop_columns([self.column]))
        rows = sink.close() + [
            (None, 0, key, count, 0, None, count) for key, count in outside.items()
        ]
        if rows:
            yield pa.RecordBatch.from_pylist(
                [dict(zip(_FILE_FIELDS, r, strict=True)) for r in rows],
                schema=_result_schema(),
            )


def _result_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("path", pa.string()),
            ("size", pa.int64()),
            ("partition", pa.string()),
            ("rows", pa.int64()),
            ("modification_time", pa.int64()),
            ("stats", pa.string()),
            ("outside", pa.int64()),
        ]
    )


class _PartitionSink:
    """One open Parquet file at a time; input arrives sorted by partition, so this suffices."""

    def __init__(
        self,
        table_dir: str,
        column: str,
        s3: S3Settings | None = None,
        nulls_apart: str | None = None,
        indexed_columns: int = DEFAULT_INDEXED_COLUMNS,
    ) -> None:
        self.table_dir, self.column, self.nulls_apart = table_dir, column, nulls_apart
        self.indexed_columns = indexed_columns
        # on S3, pyarrow's filesystem and the table as it names it (bucket/prefix/table)
        self.filesystem = None if s3 is None else arrow_s3(s3)
        self.base = table_dir.removeprefix(S3_SCHEME) if s3 is not None else table_dir
        self.partition: str | None = None
        self.writer: ParquetWriter | None = None
        self.new_parents: list[str] = []  # folders whose entries the open file's folder changed
        self.pending: list = []
        self.pending_rows = self.file_rows = 0
        self.done: list[tuple] = []

    def write(self, partition: str, batch: pa.RecordBatch) -> None:
        if partition != self.partition or self.file_rows + self.pending_rows >= MAX_ROWS_PER_FILE:
            self._close_file()
            self.partition = partition
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        if self.pending_rows >= ROW_GROUP_ROWS:
            self._flush()

    def close(self) -> list[tuple]:
        self._close_file()
        return self.done

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self.pending:
            return
        table = pa.Table.from_batches(self.pending)
        if self.writer is None:
            self.relative = f"{self.column}={self.partition}/part-{uuid.uuid4().hex}.snappy.parquet"
            target = os.path.join(self.base, self.relative)
            if self.filesystem is None:
                self.new_parents = durable.make_folders(os.path.dirname(target))
            self.writer = pq.ParquetWriter(
                target, table.schema, compression="snappy", filesystem=self.filesystem
            )
        for group in self._row_groups(table):
            self.writer.write_table(group, row_group_size=ROW_GROUP_ROWS)
        self.file_rows += table.num_rows
        self.pending, self.pending_rows = [], 0

    def _row_groups(self, table: pa.Table) -> list[pa.Table]:
        """``table``, or its rows with a ``nulls_apart`` value and its rows without, each kind
        then written as row groups of its own (one ``write_table`` each)."""
        import pyarrow.compute as pc

        if self.nulls_apart is None:
            return [table]
        missing = pc.is_null(table.column(self.nulls_apart))
        parts = [table.filter(pc.invert(missing)), table.filter(missing)]
        return [part for part in parts if part.num_rows]

    def _close_file(self) -> None:
        self._flush()
        if self.writer is None:
            return
        self.writer.close()
        stats = file_stats(self.writer.writer.metadata, self.indexed_columns)
        target = os.path.join(self.base, self.relative)
        if self.filesystem is None:  # on S3 the upload is durable once it succeeds
            durable.sync_file(target)
            durable.sync_folders([os.path.dirname(target), *self.new_parents])
        size, mtime_ms = self._stat(target)
        self.done.append((self.relative, size, self.partition, self.file_rows, mtime_ms, stats, 0))
        self.writer, self.file_rows = None, 0
        seam.pause("mid_files")

    def _stat(self, target: str) -> tuple[int, int]:
        """(size, modification time in ms) of the file just written."""
        if self.filesystem is None:
            stat = os.stat(target)
            return stat.st_size, int(stat.st_mtime * 1000)
        info = self.filesystem.get_file_info(target)
        return info.size, info.mtime_ns // 1_000_000
