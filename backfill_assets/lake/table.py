"""``Lake``: the one way the project reads and writes Delta tables.

Validates every input (table names, partition keys, commit info) and hands
dates, never raw strings, to an engine: delta-rs by default, native
delta-spark when the Spark session carries Delta's extension and jars.

Two ways to write: ``replace_partitions`` (write and commit at once), and write-audit-publish
for data that must be checked before anyone reads it: ``stage``, ``read_staged``,
``publish``, ``discard`` (see ``staged.py``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Collection, Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

import backfill_assets.lake.retention as retention
import backfill_assets.lake.staged as manifests
import backfill_assets.settings as settings
from backfill_assets.lake.commit import (
    CommitInfo,
    Compaction,
    PartitionInfo,
    WriteResult,
    decode_metadata,
    new_write_id,
)
from backfill_assets.lake.engine import Engine
from backfill_assets.lake.errors import LakeError, LakeUnsupported, ManifestChanged
from backfill_assets.lake.file_stats import DEFAULT_INDEXED_COLUMNS, indexed_columns
from backfill_assets.lake.keys import (
    check_column_name,
    check_table_name,
    date_text,
    parse_partition_dates,
)
from backfill_assets.lake.log import (
    commit_added_files,
    commit_metadata,
    commit_of_write,
    last_written_versions,
    newest_commit,
    touched_after,
)
from backfill_assets.lake.parquet_writer import remove_files, write_files
from backfill_assets.lake.spark_files import need_spark, nullable, read_files
from backfill_assets.lake.staged import StagedFile, StagedVersion
from backfill_assets.lake.storage import normalise, storage_for, vacuum_candidates
from backfill_assets.testing.faults import STAGED, pause_point
from backfill_assets.testing.iofault import io_step

if TYPE_CHECKING:
    import pyarrow as pa


ENGINES = ("auto", "delta-rs", "delta-spark")


class Lake:
    """Delta tables under ``root``, named like ``raw/orders``, partitioned by one DATE column.

    ``root`` is a local folder or ``s3://bucket/prefix`` (reached with the standard AWS
    variables: ``storage.py``; ``auto`` picks delta-rs there, delta-spark must be asked for)."""

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
        self.storage = storage_for(root)
        # the root as the storage names it: an absolute local path or s3://bucket/prefix
        self.location = normalise(root)
        self.storage.check(self.location)  # on S3, one clear error before anything is written
        self._spark = spark
        if engine == "auto":
            from backfill_assets.lake.delta_spark import native_delta_available

            native = spark is not None and native_delta_available(spark)
            engine = "delta-spark" if native and self.storage.is_local else "delta-rs"
        self._engine: Engine
        if engine == "delta-spark":
            from backfill_assets.lake.delta_spark import DeltaSparkEngine

            session = need_spark(spark)
            if not self.storage.is_local:
                self._reach_s3(session)
            self._engine = DeltaSparkEngine(session, properties)
        else:
            from backfill_assets.lake.delta_rs import DeltaRsEngine

            self._engine = DeltaRsEngine(spark, properties)
        self.engine_name = self._engine.name

    def _reach_s3(self, spark: SparkSession) -> None:
        """delta-spark on S3: the session must have the s3a jars; the AWS variables' settings
        go into its Hadoop configuration (``s3a.py``)."""
        from backfill_assets import s3a
        from backfill_assets.delta_jars import S3A_FIX
        from backfill_assets.lake.storage import S3Storage

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
        return self._engine.version(self.table_location(table))

    def check_supported(self, table: str) -> None:
        """LakeUnsupported, naming the features, when this engine cannot serve the table's
        latest version correctly (nothing when there is no table)."""
        features = self._engine.unsupported(self.table_location(table))
        if features:
            raise LakeUnsupported(table, self.engine_name, features)

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
        dates = self._dates(partitions)
        if not isinstance(commit, CommitInfo):
            raise LakeError(f"commit must be a CommitInfo, got {type(commit).__name__}")
        return self._engine.replace(
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
    ) -> int:
        """Merge ``df`` into the existing table by the key columns ``on``, in one commit: a row
        whose key the table holds replaces it, the others are added; with ``replace_for``, a
        table row whose ``replace_for`` value appears in ``df`` and whose key does not is
        deleted (``df`` holds those values' rows whole). Delta's MERGE, with the table's
        commit lock held from its read to its commit, so a concurrent writer's rows are merged
        with, never written over. The version it committed. LakeTableMissing when there is no
        table: its first rows are a ``replace_partitions``."""
        keys = [check_column_name(c) for c in on]
        if not keys:
            raise LakeError("merge needs at least one key column")
        if replace_for is not None:
            check_column_name(replace_for)
        if not isinstance(commit, CommitInfo):
            raise LakeError(f"commit must be a CommitInfo, got {type(commit).__name__}")
        return self._engine.merge(table, self.table_location(table), df, keys, replace_for, commit)

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
        dates = self._dates(partitions)
        return self._engine.read(
            table,
            self.table_location(table),
            check_column_name(partition_column),
            dates,
            self._version_arg(version),
        )

    def read_table(self, table: str, version: int | None = None) -> tuple[DataFrame, int]:
        """The whole table as of ``version`` (latest when None) and that version."""
        return self._engine.read(
            table, self.table_location(table), None, None, self._version_arg(version)
        )

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
        dates = self._dates(partitions)
        if not dates:
            return pa.table({c: pa.array([], pa.null()) for c in columns})
        wanted = [(check_column_name(partition_column), "in", [date_text(d) for d in dates])]
        return DeltaTable(
            self.table_location(table), storage_options=self.storage.delta_options()
        ).to_pyarrow_table(partitions=wanted, columns=columns)

    def row_counts(self, table: str, partition_column: str, version: int | None = None) -> dict:
        """Rows per partition date as of ``version`` (latest when None), from the table's file
        statistics, not its data. Raises LakeTableMissing when the table does not exist."""
        return self._engine.row_counts(
            table,
            self.table_location(table),
            check_column_name(partition_column),
            self._version_arg(version),
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
        texts = {date_text(d) for d in self._dates(partitions)}
        changed = touched_after(
            self.table_location(table), check_column_name(partition_column), version, texts
        )
        return {dt.date.fromisoformat(t) for t in changed}

    def commit_of_write(self, table: str, write_id: str, after: int | None = None) -> int | None:
        """The version of the commit after ``after`` (any when None) that recorded ``write_id``
        (``CommitInfo.write_id``), or None: how a journal learns whether its commit landed."""
        return self._find_write(self.table_location(table), write_id, self._version_arg(after))

    def _find_write(self, table_dir: str, write_id: str, after: int | None) -> int | None:
        """``commit_of_write`` by location: the commit file carrying ``write_id``; once log
        cleanup deleted it, the version the write's Delta transaction id records
        (``commit.txn_version``), which the table's checkpoint keeps. No transaction id: the
        write never landed."""
        found = commit_of_write(table_dir, write_id, after)
        if found is not None:
            return found
        recorded = self._engine.transaction_version(table_dir, write_id)
        if recorded is None:
            return None
        return recorded if after is None else max(recorded, after + 1)

    def commit_metadata(self, table: str, version: int) -> dict:
        """The CommitInfo document (run, code and input versions) of one commit, from its commit
        file; {} for a commit this layer did not write or whose file was cleaned up."""
        return commit_metadata(self.table_location(table), self._required_version(version))

    def history(self, table: str) -> list[dict]:
        """Commits newest first: version, timestamp (UTC datetime), operation, metadata."""
        entries = self._engine.history(table, self.table_location(table))
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
        dates = self._dates(partitions)
        if not isinstance(commit, CommitInfo):
            raise LakeError(f"commit must be a CommitInfo, got {type(commit).__name__}")
        return self._engine.restore(
            table,
            self.table_location(table),
            check_column_name(partition_column),
            dates,
            self._required_version(version),
            commit,
            self._version_arg(since),
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
            for s in self.staged_versions(table)
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
        if all(modified > cutoff_ms for modified in vacuum_candidates(location).values()):
            return []  # no file is old enough to go: VACUUM would delete nothing
        return self._engine.vacuum(table, location, retention_hours)

    def keep_retention(self, table: str, retention_hours: float = 0) -> dict[str, str]:
        """Bring the table's retention properties up to ``retention_hours`` and the lake's
        retention in one metadata commit, when they fall short (``retention.py``); the
        properties it set ({} when none fell short)."""
        hours = max(retention_hours, self.retention_hours)
        table_dir = self.table_location(table)
        missing = retention.shortfall(table, self._engine.properties(table, table_dir), hours)
        if missing:
            self._engine.set_properties(table, table_dir, missing)
        return missing

    def compact(self, table: str, partition_column: str, commit: CommitInfo) -> Compaction:
        """Join each partition's small files into fewer, bigger ones, in one commit that changes
        no row (its actions say ``dataChange: false``). A commit that lands first (a publish)
        wins: the compaction is retried from the new snapshot, never committed over it."""
        if not isinstance(commit, CommitInfo):
            raise LakeError(f"commit must be a CommitInfo, got {type(commit).__name__}")
        return self._engine.compact(
            table, self.table_location(table), check_column_name(partition_column), commit
        )

    def checkpoint(self, table: str) -> int:
        """Write a checkpoint of the latest version (readers then replay the log from it, not
        from version 0); that version. The table's retention properties are brought up to the
        lake's retention first: a checkpoint drops the tombstones older than they say."""
        self.keep_retention(table)
        return self._engine.checkpoint(table, self.table_location(table))

    # Write-audit-publish -------------------------------------------------------------------

    def stage(
        self,
        table: str,
        df: DataFrame,
        partition_column: str,
        partitions: Iterable[object],
        commit: CommitInfo,
        stage_id: str | None = None,
        spread: int = 1,
        in_day_blocks: bool = False,
        nulls_apart: str | None = None,
    ) -> StagedVersion:
        """Write ``df``'s rows of ``partitions`` into the table's storage without committing
        them: no reader of the table sees them until ``publish``; ``spread`` > 1 writes each
        partition from up to that many tasks, ``in_day_blocks`` takes the rows as they are
        arranged already, ``nulls_apart`` writes a column's NULL rows and its others in row
        groups of their own (``write_files``). Rows outside the set raise
        LakeError before anything is recorded."""
        dates = self._dates(partitions)
        column = check_column_name(partition_column)
        if not isinstance(commit, CommitInfo):
            raise LakeError(f"commit must be a CommitInfo, got {type(commit).__name__}")
        table_dir = self.table_location(table)
        stage_id = manifests.check_id(stage_id) if stage_id else manifests.new_id()
        if manifests.load(table_dir, stage_id) is not None:
            raise LakeError(f"{table}: a staged version {stage_id!r} is already open")
        base = self.version(table)
        pause_point("before_files")
        self.storage.makedirs(table_dir)
        io_step("files.write")
        indexed = (
            DEFAULT_INDEXED_COLUMNS
            if base is None
            else indexed_columns(self._engine.properties(table, table_dir))
        )
        written = write_files(
            df, table_dir, column, dates, spread, in_day_blocks, nulls_apart, indexed
        )
        pause_point("after_files")
        staged = StagedVersion(
            table=table,
            id=stage_id,
            column=column,
            dates=tuple(dates),
            files=tuple(
                StagedFile(f.path, f.size, f.partition, f.rows, f.modification_time, f.stats)
                for f in written
            ),
            schema_json=nullable(df.schema).json(),
            commit=commit,
            base_version=base,
            created_ms=int(time.time() * 1000),
        )
        try:
            manifests.save(table_dir, staged, create=True)
        except FileExistsError:
            remove_files(table_dir, [f.path for f in written])
            raise LakeError(
                f"{table}: a staged version {stage_id!r} was opened by another writer meanwhile"
            ) from None
        try:
            pause_point(STAGED)
        except BaseException:
            manifests.remove(table_dir, staged)  # the caller never learns of it: nothing staged
            raise
        return staged

    def read_staged(
        self, staged: StagedVersion, partitions: Iterable[object] | None = None
    ) -> DataFrame:
        """The staged rows (of ``partitions``, all by default): exactly what would be published."""
        files = staged.files if partitions is None else staged.files_of(self._dates(partitions))
        schema = StructType.fromJson(json.loads(staged.schema_json))
        return read_files(
            self.spark,
            self.table_location(staged.table),
            schema,
            staged.column,
            [(f.path, f.partition) for f in files],
        )

    def publish(
        self,
        staged: StagedVersion,
        partitions: Iterable[object] | None = None,
        commit: CommitInfo | None = None,
        since: int | None = None,
        files: Collection[str] | None = None,
    ) -> WriteResult:
        """Make the staged files of ``partitions`` (all by default) the table's content of those
        partitions, in one commit that swaps files and copies no data. Raises LakeConflict when
        a commit after ``since`` (default: the staged version's base, the version its audit
        compared with) touched one of them. ``files``: the staged files (paths in the table)
        those partitions must hold, exactly, for instance the ones a check or a diff read;
        ManifestChanged, with nothing committed, when the manifest holds others for them.

        The manifest is claimed by compare-and-swap (the intent is saved only over the manifest
        this publish read), then checked again, with every staged file it adds, right before
        the commit, while holding it (``staged.locked``): a staged version discarded, expired
        or changed meanwhile fails the publish with a LakeError, and nothing is committed."""
        dates = list(staged.dates) if partitions is None else self._dates(partitions)
        table_dir = self.table_location(staged.table)
        on_disk = self._open_staged(staged, dates)
        if files is not None:  # the claim below fails if the manifest changes after this read
            held = {f.path for f in on_disk.files_of(dates)}
            if held != set(files):
                raise ManifestChanged(
                    f"{staged.table}: staged version {staged.id} holds other files for "
                    f"{[date_text(d) for d in dates]} than were named to publish "
                    f"({len(held - set(files))} added, {len(set(files) - held)} gone since): "
                    "nothing was committed"
                )
        pause_point("publish_read")
        commit = commit or staged.commit
        if commit.write_id is None:  # a journaling caller's own id is kept: it looks for it
            commit = replace(commit, write_id=new_write_id())
        current = on_disk
        if since is not None:
            current = replace(current, base_version=self._version_arg(since))
        # The intent first: whatever stops this publish, the write id tells ``settle`` whether
        # the commit landed, so the manifest ends up agreeing with the log.
        intent = {
            "write_id": commit.write_id,
            "dates": [date_text(d) for d in dates],
            "after": newest_commit(table_dir),
        }
        try:
            claimed = manifests.save(table_dir, replace(on_disk, publishing=intent))
        except ManifestChanged as exc:
            raise ManifestChanged(f"{exc}; nothing was committed: stage again") from None
        pause_point("publish_intent")
        with manifests.locked(table_dir, staged.id):
            self._check_claim(claimed, dates)
            try:
                result = self._engine.publish(staged.table, table_dir, current, dates, commit)
            except Exception:
                self._settle_quietly(table_dir, staged.id)
                raise
            return self._record_published(current, dates, result)

    def _check_claim(self, claimed: StagedVersion, dates: list[dt.date]) -> None:
        """LakeError, before anything is committed, unless the manifest is still the one this
        publish saved its intent in and every staged file of ``dates`` is in storage."""
        table_dir = self.table_location(claimed.table)
        current = manifests.load(table_dir, claimed.id)
        if current is None or current.generation != claimed.generation:
            how = "discarded or expired" if current is None else "changed"
            raise ManifestChanged(
                f"{claimed.table}: staged version {claimed.id} was {how} by another writer "
                "while this publish ran: nothing was committed; stage again"
            )
        gone = [
            f.path
            for f in claimed.files_of(dates)
            if not self.storage.exists(os.path.join(table_dir, f.path))
        ]
        if gone:
            manifests.save(table_dir, replace(current, publishing=None))
            raise LakeError(
                f"{claimed.table}: staged files {gone} of staged version {claimed.id} are gone "
                "from storage: nothing was committed; discard it and stage again"
            )

    def _record_published(
        self, current: StagedVersion, dates: list[dt.date], result: WriteResult
    ) -> WriteResult:
        """Record ``result``'s version for ``dates`` in the manifest, which then has no intent."""
        table_dir = self.table_location(current.table)
        after = manifests.load(table_dir, current.id)
        if after is None:
            # Closed (discarded or expired) while this commit landed: nothing left to record,
            # but the closer deleted the files it thought unpublished, which a swap just committed.
            self._check_swapped_files(current, dates, result)
            return result
        manifests.save(
            table_dir,
            replace(
                after,
                published={**after.published, **dict.fromkeys(dates, result.version)},
                publishing=None,
            ),
        )
        return result

    def _settle_quietly(self, table_dir: str, stage_id: str) -> None:
        """Settle a failed publish's intent now if the disk lets us; else the next opener will."""
        try:
            self._settled(table_dir, stage_id)
        except Exception:
            pass

    def _check_swapped_files(
        self, staged: StagedVersion, dates: list[dt.date], result: WriteResult
    ) -> None:
        """LakeError when ``result``'s commit swapped in staged files that are gone from disk (a
        commit that copied their rows does not name them)."""
        table_dir = self.table_location(staged.table)
        swapped = commit_added_files(table_dir, result.version)
        gone = [
            f.path
            for f in staged.files_of(dates)
            if not self.storage.exists(os.path.join(table_dir, f.path))
            and os.path.normpath(f.path) in swapped
        ]
        if not gone:
            return
        days = [date_text(d) for d in dates]
        repair = (
            f"restore partitions {days} from version {result.version - 1} (Lake.restore_partitions)"
            if result.version > 0
            else "the commit created the table: remove it"
        )
        raise LakeError(
            f"{staged.table}: version {result.version} was committed, but staged version "
            f"{staged.id} was closed (discarded or expired) meanwhile and its files {gone} "
            f"deleted: {repair}, then stage again"
        )

    def discard(self, staged: StagedVersion) -> int:
        """Close a staged version: delete the files of partitions it never published, and its
        manifest. Returns the files deleted. Published partitions are not touched."""
        table_dir = self.table_location(staged.table)
        with manifests.locked(table_dir, staged.id):
            current = self._settled(table_dir, staged.id)
            return 0 if current is None else manifests.remove(table_dir, current)

    def keep_staged(
        self, staged: StagedVersion, partitions: Iterable[object], into: str
    ) -> StagedVersion:
        """Move the staged files of ``partitions`` into the staged version ``into`` of the same
        table (opened when absent), replacing the files it held for them, which are deleted.
        How a correction gathers the days of several runs into one version to cut over.

        Three saves, the intent first (``moving`` on the source), so that ``settle`` completes
        or drops a move stopped at any point; until the source drops them, both manifests own the
        moved files, and ``delete_files`` keeps a file any open version owns. Repeated once done,
        it changes nothing."""
        dates = self._dates(partitions)
        table_dir = self.table_location(staged.table)
        into = manifests.check_id(into)
        with manifests.locked(table_dir, staged.id, into):
            return self._keep(staged, dates, into)

    def _keep(self, staged: StagedVersion, dates: list[dt.date], into: str) -> StagedVersion:
        table_dir = self.table_location(staged.table)
        source = self._settled(table_dir, staged.id)
        if source is not None and all(source.moved.get(d) == into for d in dates):
            kept = self._settled(table_dir, into)
            if kept is not None:
                return kept
        source = self._open_staged(staged, dates)
        target = self._settled(table_dir, into)
        if target is not None and target.closing:
            raise LakeError(f"{staged.table}: staged version {into} is being discarded")
        intent = {
            "into": into,
            "dates": [date_text(d) for d in dates],
            "replaced": []
            if target is None
            else [f.path for f in target.files_of(dates) if f.partition not in target.published],
            "since": None if target is None else target.base_version,
        }
        source = manifests.save(table_dir, replace(source, moving=intent))
        merged = manifests.merge(target, source, dates, into)
        merged = manifests.save(table_dir, merged, create=target is None)
        manifests.save(table_dir, manifests.finish_move(table_dir, source))
        return merged

    def _open_staged(self, staged: StagedVersion, dates: Iterable[dt.date]) -> StagedVersion:
        """The current manifest of ``staged`` (settled); LakeError when it is closed or lacks
        ``dates``."""
        unknown = sorted(set(dates) - set(staged.dates))
        if unknown:
            raise LakeError(
                f"{staged.table}: {unknown} are not partitions of staged version {staged.id}"
            )
        current = self._settled(self.table_location(staged.table), staged.id)
        if current is None:
            raise LakeError(f"{staged.table}: staged version {staged.id} is not open (discarded?)")
        if current.closing:
            raise LakeError(
                f"{staged.table}: staged version {staged.id} is being discarded (a discard or "
                "expiry claimed it; the next one completes it)"
            )
        gone = sorted(set(dates) - set(current.dates))
        if gone:
            raise LakeError(
                f"{staged.table}: partitions {[date_text(d) for d in gone]} of staged version "
                f"{staged.id} were kept into {sorted({current.moved.get(d, '?') for d in gone})}"
            )
        return current

    def _settled(self, table_dir: str, stage_id: str) -> StagedVersion | None:
        return manifests.settled(table_dir, stage_id, self._find_write)

    def staged_version(self, table: str, stage_id: str) -> StagedVersion | None:
        """The open staged version ``stage_id`` of ``table``, or None."""
        return self._settled(self.table_location(table), manifests.check_id(stage_id))

    def staged_versions(self, table: str) -> list[StagedVersion]:
        """The open staged versions of ``table``, each settled (``staged.settle``)."""
        table_dir = self.table_location(table)
        found = (self._settled(table_dir, s.id) for s in manifests.open_versions(table_dir))
        return [s for s in found if s is not None]

    def maintain(self, table: str, retention_hours: float) -> tuple[list[str], list[str]]:
        """Close the staged versions older than the retention, then vacuum with it: (staged
        version ids expired, files deleted). Open versions younger than the retention, and
        every file a version within it needs, stay."""
        expired = self.expire_staged(table, retention_hours)
        return expired, self.vacuum(table, retention_hours)

    def expire_staged(self, table: str, retention_hours: float) -> list[str]:
        """Discard the staged versions opened more than ``retention_hours`` ago; their ids."""
        cutoff_ms = (time.time() - retention_hours * 3600) * 1000
        expired = [s for s in self.staged_versions(table) if s.created_ms < cutoff_ms]
        for s in expired:
            self.discard(s)
        return [s.id for s in expired]

    @staticmethod
    def _dates(partitions: Iterable[object]) -> list[dt.date]:
        dates = parse_partition_dates(partitions)
        if not dates:
            raise LakeError("the partition set is empty")
        return dates

    @staticmethod
    def _version_arg(version: object) -> int | None:
        return None if version is None else Lake._required_version(version)

    @staticmethod
    def _required_version(version: object) -> int:
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise LakeError(f"version must be a non-negative int, got {version!r}")
        return version
