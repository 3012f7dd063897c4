"""``Lake``: the one way the project reads and writes Delta tables.

Validates every input (table names, partition keys, commit info) and hands
dates, never raw strings, to an engine: delta-rs by default, native
delta-spark when the Spark session carries Delta's extension and jars.

Two ways to write: ``replace_partitions`` (write and commit at once), and write-audit-publish
for data that must be checked before anyone reads it: ``Lake.staging`` (``staging.py``).
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession

import backfill_assets.lake.manifests as manifests
import backfill_assets.lake.retention as retention
import backfill_assets.settings as settings
from backfill_assets.lake.commit import (
    CommitInfo,
    Compaction,
    PartitionInfo,
    WriteResult,
    check_commit,
    decode_metadata,
)
from backfill_assets.lake.engine import Engine
from backfill_assets.lake.errors import LakeError, LakeUnsupported
from backfill_assets.lake.keys import (
    check_column_name,
    check_table_name,
    date_text,
    partition_dates,
    required_version,
    version_arg,
)
from backfill_assets.lake.log import (
    commit_metadata,
    find_write,
    last_written_versions,
    touched_after,
)
from backfill_assets.lake.spark_files import need_spark
from backfill_assets.lake.staging import Staging
from backfill_assets.storage import StorageError
from backfill_assets.storage.stores import normalise, storage_for

if TYPE_CHECKING:
    import pyarrow as pa


ENGINES = ("auto", "delta-rs", "delta-spark")


class Lake:
    """Delta tables under ``root``, named like ``raw/orders``, partitioned by one DATE column.

    ``root`` is a local folder or ``s3://bucket/prefix`` (reached with the standard AWS variables:
    ``storage/stores.py``; ``auto`` picks delta-rs there, delta-spark must be asked for)."""

    def __init__(
        self,
        root: str | os.PathLike,
        spark: SparkSession | None,
        engine: str = "auto",
        retention_days: float | None = None,
    ) -> None:
        """``spark`` None: a lake for reads without Spark (the command line's), on delta-rs.
        ``retention_days`` (default ``BACKFILL_RETENTION_DAYS``): how long every table keeps
        removed files and its log at least (``retention.py``)."""
        if engine not in ENGINES:
            raise LakeError(f"engine must be one of {ENGINES}, got {engine!r}")
        days = settings.retention_days() if retention_days is None else retention_days
        self.retention_hours = float(days) * 24
        properties = retention.table_properties(self.retention_hours)
        try:
            self.storage = storage_for(root)
            # the root as the storage names it: an absolute local path or s3://bucket/prefix
            self.location = normalise(root)
            self.storage.check(self.location)  # on S3, one clear error before anything is written
        except StorageError as exc:
            raise LakeError(str(exc)) from None
        self._spark = spark
        if engine == "auto":
            from backfill_assets.lake.delta_spark import native_delta_available

            native = spark is not None and native_delta_available(spark)
            engine = "delta-spark" if native and self.storage.is_local else "delta-rs"
        self.engine: Engine  # commits and reads the tables (delta_rs or delta_spark)
        if engine == "delta-spark":
            from backfill_assets.lake.delta_spark import DeltaSparkEngine

            session = need_spark(spark)
            if not self.storage.is_local:
                self._reach_s3(session)
            self.engine = DeltaSparkEngine(session, properties)
        else:
            from backfill_assets.lake.delta_rs import DeltaRsEngine

            self.engine = DeltaRsEngine(spark, properties)
        # Write-audit-publish: stage, read, publish, keep, discard and expire staged versions.
        self.staging = Staging(self.engine, self.storage, self.location, spark)

    def _reach_s3(self, spark: SparkSession) -> None:
        """delta-spark on S3: the session must have the s3a jars; the AWS variables' settings
        go into its Hadoop configuration (``spark/s3a.py``)."""
        from backfill_assets.spark import s3a
        from backfill_assets.spark.delta_jars import S3A_FIX
        from backfill_assets.storage.stores import S3Storage

        if not s3a.available(spark):
            raise LakeError(
                f"the lake {self.location} is on S3 and the Spark session cannot reach it with "
                f"delta-spark: it has no s3a jars. {S3A_FIX}, and set BACKFILL_LAKE_DIR before "
                "the session starts (spark_config adds them); or BACKFILL_LAKE_ENGINE=delta-rs"
            )
        assert isinstance(self.storage, S3Storage)
        s3a.configure(spark, self.storage.settings)

    @property
    def root(self) -> Path:
        """The lake's folder; LakeError for a lake on S3, which has none (``location``)."""
        if not self.storage.is_local:
            raise LakeError(f"the lake {self.location} is on S3: it has no local folder")
        return Path(self.location)

    @property
    def spark(self) -> SparkSession:
        """The lake's Spark session; LakeError when it was opened without one."""
        return need_spark(self._spark)

    def path(self, table: str) -> Path:
        """The table's folder (a local lake's only; ``table_location`` names it on any)."""
        return self.root / check_table_name(table)

    def table_location(self, table: str) -> str:
        """Where the table lives: a local path or ``s3://bucket/prefix/<table>``."""
        return f"{self.location}/{check_table_name(table)}"

    def exists(self, table: str) -> bool:
        return self.version(table) is not None

    def version(self, table: str) -> int | None:
        """Latest version, or None when the table does not exist."""
        return self.engine.version(self.table_location(table))

    def check_supported(self, table: str) -> None:
        """LakeUnsupported, naming the features, when this engine cannot serve the table's
        latest version correctly (nothing when there is no table)."""
        features = self.engine.unsupported(self.table_location(table))
        if features:
            raise LakeUnsupported(table, self.engine.name, features)

    def replace_partitions(
        self,
        table: str,
        df: DataFrame,
        partition_column: str,
        partitions: Iterable[object],
        commit: CommitInfo,
    ) -> WriteResult:
        """Replace exactly ``partitions`` with the rows of ``df`` in one commit.

        Creates the table on first write. A partition of the set without rows in
        ``df`` ends up empty. Rows outside the set raise LakeError before any commit.
        """
        dates = partition_dates(partitions)
        check_commit(commit)
        return self.engine.replace(
            table,
            self.table_location(table),
            df,
            check_column_name(partition_column),
            dates,
            commit,
        )

    def merge(
        self,
        table: str,
        df: DataFrame,
        on: Iterable[str],
        commit: CommitInfo,
        replace_for: str | None = None,
        partition_column: str | None = None,
    ) -> int:
        """Merge ``df`` into the existing table by the key columns ``on``, in one commit: a row
        whose key the table holds replaces it, the others are added; with ``replace_for``, a
        table row whose ``replace_for`` value appears in ``df`` and whose key does not is
        deleted (``df`` holds those values' rows whole). Delta's MERGE, with the table's
        commit lock held from its read to its commit, so a concurrent writer's rows are merged
        with, never written over. The version it committed. Where there is no table yet: with
        ``partition_column``, ``df`` creates it, partitioned by that column, under the same lock,
        so of two first merges the second merges into what the first created; else
        LakeTableMissing."""
        keys = [check_column_name(c) for c in on]
        if not keys:
            raise LakeError("merge needs at least one key column")
        if replace_for is not None:
            check_column_name(replace_for)
        if partition_column is not None:
            check_column_name(partition_column)
        check_commit(commit)
        return self.engine.merge(
            table, self.table_location(table), df, keys, replace_for, commit, partition_column
        )

    def read_partitions(
        self,
        table: str,
        partition_column: str,
        partitions: Iterable[object],
        version: int | None = None,
    ) -> tuple[DataFrame, int]:
        """The rows of ``partitions`` as of ``version`` (latest when None) and that version.

        Raises LakeTableMissing when the table does not exist.
        """
        dates = partition_dates(partitions)
        return self.engine.read(
            table,
            self.table_location(table),
            check_column_name(partition_column),
            dates,
            version_arg(version),
        )

    def read_table(self, table: str, version: int | None = None) -> tuple[DataFrame, int]:
        """The whole table as of ``version`` (latest when None) and that version."""
        return self.engine.read(table, self.table_location(table), None, None, version_arg(version))

    def read_arrow(
        self, table: str, partition_column: str, partitions: Iterable[object], columns: list[str]
    ) -> pa.Table | None:
        """``columns`` of the rows of ``partitions`` (latest version) as a pyarrow Table, read
        through delta-rs whatever the engine: no Spark, for the command line's dry runs. None
        when the table does not exist."""
        import pyarrow as pa
        from deltalake import DeltaTable

        if not self.exists(table):
            return None
        dates = partition_dates(partitions)
        if not dates:
            return pa.table({c: pa.array([], pa.null()) for c in columns})
        wanted = [(check_column_name(partition_column), "in", [date_text(d) for d in dates])]
        return DeltaTable(
            self.table_location(table), storage_options=self.storage.delta_options()
        ).to_pyarrow_table(partitions=wanted, columns=columns)

    def row_counts(self, table: str, partition_column: str, version: int | None = None) -> dict:
        """Rows per partition date as of ``version`` (latest when None), from the table's file
        statistics, not its data. Raises LakeTableMissing when the table does not exist."""
        return self.engine.row_counts(
            table,
            self.table_location(table),
            check_column_name(partition_column),
            version_arg(version),
        )

    def partitions(self, table: str, partition_column: str) -> list[PartitionInfo]:
        """Non-empty partitions, oldest first, with rows and the version that last changed them."""
        column = check_column_name(partition_column)
        table_dir = self.table_location(table)
        counts = self.row_counts(table, column)
        versions = last_written_versions(table_dir, column, {date_text(d) for d in counts})
        return [
            PartitionInfo(day, rows, versions[date_text(day)])
            for day, rows in sorted(counts.items())
            if rows > 0
        ]

    def changed_since(
        self, table: str, partition_column: str, version: int | None, partitions: Iterable[object]
    ) -> set[dt.date]:
        """The partitions of the set a commit after ``version`` changed (any commit when None)."""
        texts = {date_text(d) for d in partition_dates(partitions)}
        changed = touched_after(
            self.table_location(table), check_column_name(partition_column), version, texts
        )
        return {dt.date.fromisoformat(t) for t in changed}

    def commit_of_write(self, table: str, write_id: str, after: int | None = None) -> int | None:
        """The version of the commit after ``after`` (any when None) that recorded ``write_id``
        (``CommitInfo.write_id``), or None: how a journal learns whether its commit landed."""
        return find_write(
            self.table_location(table),
            write_id,
            version_arg(after),
            self.engine.transaction_version,
        )

    def commit_metadata(self, table: str, version: int) -> dict:
        """The CommitInfo document (run, code and input versions) of one commit, from its commit
        file; {} for a commit this layer did not write or whose file was cleaned up."""
        return commit_metadata(self.table_location(table), required_version(version))

    def history(self, table: str) -> list[dict]:
        """Commits newest first: version, timestamp (UTC datetime), operation, metadata."""
        entries = self.engine.history(table, self.table_location(table))
        result = []
        for entry in sorted(entries, key=lambda e: e["version"], reverse=True):
            stamp = entry["timestamp"]
            if isinstance(stamp, (int, float)):
                stamp = dt.datetime.fromtimestamp(stamp / 1000, tz=dt.UTC)
            result.append(
                {
                    "version": entry["version"],
                    "timestamp": stamp,
                    "operation": entry["operation"],
                    "metadata": decode_metadata(entry["user_metadata"]),
                }
            )
        return result

    def restore_partitions(
        self,
        table: str,
        partition_column: str,
        partitions: Iterable[object],
        version: int,
        commit: CommitInfo,
        since: int | None = None,
    ) -> WriteResult:
        """Give ``partitions`` the content they had at ``version``, in one new commit. With
        ``since``, raises LakeConflict when a commit after ``since`` changed one of them,
        checked inside that commit as a publish checks its base: a restore never reverts
        data written after the version its caller checked."""
        dates = partition_dates(partitions)
        check_commit(commit)
        return self.engine.restore(
            table,
            self.table_location(table),
            check_column_name(partition_column),
            dates,
            required_version(version),
            commit,
            version_arg(since),
        )

    def vacuum(self, table: str, retention_hours: float) -> list[str]:
        """Delete files no version needs (incl. a killed writer's) older than the retention.

        Refused while a staged version older than the retention is open: its files are in no
        version yet, and vacuum would delete them. Discard or expire it first. A table whose
        retention properties fall short of the retention (and the lake's) is brought up to
        it first (``keep_retention``)."""
        if not isinstance(retention_hours, (int, float)) or retention_hours < 0:
            raise LakeError(f"retention_hours must be >= 0, got {retention_hours!r}")
        cutoff_ms = (time.time() - retention_hours * 3600) * 1000
        # By its oldest file too: a stage that took longer than the retention wrote files older
        # than its manifest, and vacuum judges a file no version names by the file's own age.
        at_risk = [
            s.id
            for s in self.staging.versions(table)
            if min([s.created_ms, *manifests.file_ages_ms(self.table_location(table), s)])
            <= cutoff_ms
        ]
        if at_risk:
            raise LakeError(
                f"{table}: vacuum with {retention_hours} h retention would delete the "
                f"files of open staged versions {at_risk}; discard or expire them first"
            )
        self.keep_retention(table, retention_hours)
        location = self.table_location(table)
        if all(modified > cutoff_ms for modified in retention.vacuum_candidates(location).values()):
            return []  # no file is old enough to go: VACUUM would delete nothing
        return self.engine.vacuum(table, location, retention_hours)

    def keep_retention(self, table: str, retention_hours: float = 0) -> dict[str, str]:
        """Bring the table's retention properties up to ``retention_hours`` and the lake's
        retention in one metadata commit, when they fall short (``retention.py``); the
        properties it set ({} when none fell short)."""
        hours = max(retention_hours, self.retention_hours)
        table_dir = self.table_location(table)
        missing = retention.shortfall(table, self.engine.properties(table, table_dir), hours)
        if missing:
            self.engine.set_properties(table, table_dir, missing)
        return missing

    def compact(self, table: str, partition_column: str, commit: CommitInfo) -> Compaction:
        """Join each partition's small files into fewer, bigger ones, in one commit that changes
        no row (its actions say ``dataChange: false``). A commit that lands first (a publish)
        wins: the compaction is retried from the new snapshot, never committed over it."""
        check_commit(commit)
        return self.engine.compact(
            table, self.table_location(table), check_column_name(partition_column), commit
        )

    def checkpoint(self, table: str) -> int:
        """Write a checkpoint of the latest version (readers then replay the log from it, not
        from version 0); that version. The table's retention properties are brought up to the
        lake's retention first: a checkpoint drops the tombstones older than they say."""
        self.keep_retention(table)
        return self.engine.checkpoint(table, self.table_location(table))

    def maintain(self, table: str, retention_hours: float) -> tuple[list[str], list[str]]:
        """Close the staged versions older than the retention, then vacuum with it: (staged
        version ids expired, files deleted). Open versions younger than the retention, and
        every file a version within it needs, stay."""
        expired = self.staging.expire(table, retention_hours)
        return expired, self.vacuum(table, retention_hours)
