"""``Lake``: the one way the project reads and writes Delta tables.

Validates every input (table names, partition keys, commit info) and hands
dates, never raw strings, to an engine: delta-rs by default, native
delta-spark when the Spark session carries Delta's extension and jars.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from backfill_assets.lake.commit import CommitInfo, PartitionInfo, WriteResult, decode_metadata
from backfill_assets.lake.keys import (
    LakeError,
    check_column_name,
    check_table_name,
    date_text,
    parse_partition_dates,
)
from backfill_assets.lake.log import last_written_versions

ENGINES = ("auto", "delta-rs", "delta-spark")


class Lake:
    """Delta tables under ``root``, named like ``raw/orders``, partitioned by one DATE column."""

    def __init__(self, root: str | os.PathLike, spark: SparkSession, engine: str = "auto") -> None:
        if engine not in ENGINES:
            raise LakeError(f"engine must be one of {ENGINES}, got {engine!r}")
        self.root = Path(root).absolute()
        self.spark = spark
        if engine == "auto":
            from backfill_assets.lake.delta_spark import native_delta_available

            engine = "delta-spark" if native_delta_available(spark) else "delta-rs"
        if engine == "delta-spark":
            from backfill_assets.lake.delta_spark import DeltaSparkEngine

            self._engine = DeltaSparkEngine(spark)
        else:
            from backfill_assets.lake.delta_rs import DeltaRsEngine

            self._engine = DeltaRsEngine(spark)
        self.engine_name = self._engine.name

    def path(self, table: str) -> Path:
        return self.root / check_table_name(table)

    def exists(self, table: str) -> bool:
        return self.version(table) is not None

    def version(self, table: str) -> int | None:
        """Latest version, or None when the table does not exist."""
        return self._engine.version(str(self.path(table)))

    def replace_partitions(
        self, table: str, df: DataFrame, partition_column: str, partitions, commit: CommitInfo
    ) -> WriteResult:
        """Replace exactly ``partitions`` with the rows of ``df`` in one commit.

        Creates the table on first write. A partition of the set without rows in
        ``df`` ends up empty. Rows outside the set raise LakeError before any commit.
        """
        dates = self._dates(partitions)
        if not isinstance(commit, CommitInfo):
            raise LakeError(f"commit must be a CommitInfo, got {type(commit).__name__}")
        return self._engine.replace(table, str(self.path(table)), df,
                                    check_column_name(partition_column), dates, commit)

    def read_partitions(
        self, table: str, partition_column: str, partitions, version: int | None = None
    ) -> tuple[DataFrame, int]:
        """The rows of ``partitions`` as of ``version`` (latest when None) and that version.

        Raises LakeTableMissing when the table does not exist.
        """
        dates = self._dates(partitions)
        return self._engine.read(table, str(self.path(table)), check_column_name(partition_column),
                                 dates, self._version_arg(version))

    def read_table(self, table: str, version: int | None = None) -> tuple[DataFrame, int]:
        """The whole table as of ``version`` (latest when None) and that version."""
        return self._engine.read(table, str(self.path(table)), None, None,
                                 self._version_arg(version))

    def row_counts(self, table: str, partition_column: str, version: int | None = None) -> dict:
        """Rows per partition date as of ``version`` (latest when None), from the table's file
        statistics, not its data. Raises LakeTableMissing when the table does not exist."""
        return self._engine.row_counts(table, str(self.path(table)), check_column_name(partition_column),
                                       self._version_arg(version))

    def partitions(self, table: str, partition_column: str) -> list[PartitionInfo]:
        """Non-empty partitions, oldest first, with rows and the version that last changed them."""
        column = check_column_name(partition_column)
        table_dir = str(self.path(table))
        counts = self.row_counts(table, column)
        versions = last_written_versions(table_dir, column, {date_text(d) for d in counts})
        return [PartitionInfo(day, rows, versions[date_text(day)])
                for day, rows in sorted(counts.items()) if rows > 0]

    def history(self, table: str) -> list[dict]:
        """Commits newest first: version, timestamp (UTC datetime), operation, metadata."""
        entries = self._engine.history(table, str(self.path(table)))
        result = []
        for entry in sorted(entries, key=lambda e: e["version"], reverse=True):
            stamp = entry["timestamp"]
            if isinstance(stamp, (int, float)):
                stamp = dt.datetime.fromtimestamp(stamp / 1000, tz=dt.UTC)
            result.append({"version": entry["version"], "timestamp": stamp,
                           "operation": entry["operation"],
                           "metadata": decode_metadata(entry["user_metadata"])})
        return result

    def restore_partitions(
        self, table: str, partition_column: str, partitions, version: int, commit: CommitInfo
    ) -> WriteResult:
        """Give ``partitions`` the content they had at ``version``, in one new commit."""
        dates = self._dates(partitions)
        if not isinstance(commit, CommitInfo):
            raise LakeError(f"commit must be a CommitInfo, got {type(commit).__name__}")
        return self._engine.restore(table, str(self.path(table)),
                                    check_column_name(partition_column), dates,
                                    self._version_arg(version, required=True), commit)

    def vacuum(self, table: str, retention_hours: float) -> list[str]:
        """Delete files no version needs (incl. a killed writer's) older than the retention."""
        if not isinstance(retention_hours, (int, float)) or retention_hours < 0:
            raise LakeError(f"retention_hours must be >= 0, got {retention_hours!r}")
        return self._engine.vacuum(table, str(self.path(table)), retention_hours)

    @staticmethod
    def _dates(partitions) -> list[dt.date]:
        dates = parse_partition_dates(partitions)
        if not dates:
            raise LakeError("the partition set is empty")
        return dates

    @staticmethod
    def _version_arg(version, required: bool = False) -> int | None:
        if version is None and not required:
            return None
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise LakeError(f"version must be a non-negative int, got {version!r}")
        return version
