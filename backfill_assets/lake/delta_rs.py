"""The embedded engine: Spark computes and reads files, delta-rs owns the transaction log.

Commits go through ``_commit``, which calls delta-rs with ``max_commit_retries=0``
and retries itself from a fresh snapshot. Why not delta-rs's own retry: two
processes overwriting the same partition with ``partition_filters`` both commit
when that partition had no files at their read version (checked with two real
processes on deltalake 1.6.6: the rebased commit finds no file it removes was
removed concurrently, so it lands and the partition holds both writers' rows).
With no rebasing, a commit lands only at ``read_version + 1``; a loser reloads
the snapshot, so the overwrite's remove actions cover what the winner added,
and the table ends as one clean write. Local commits are put-if-absent, so a
SIGKILL leaves either the old or the new version; on S3 delta-rs commits with a conditional
put (``If-None-Match: *``), which gives the same. Every commit (vacuum's, compaction's, a
checkpoint, a change of properties too) holds the table's ``commit_lock``, which delta-spark
takes around its commits: Delta's JVM does not create a commit file only if absent. Tables
on S3 are reached with the storage options of the lake's storage (``storage/stores.py``), from the
standard AWS variables.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from deltalake import DeltaTable, write_deltalake
from deltalake import Schema as DeltaSchema
from deltalake.exceptions import CommitFailedError, DeltaError
from deltalake.transaction import (
    AddAction,
    CommitProperties,
    RemoveAction,
    Transaction,
    create_table_with_add_actions,
)
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

import backfill_assets.lake.commit_lock as commit_lock
import backfill_assets.lake.durable as durable
import backfill_assets.lake.snapshot as snapshot
from backfill_assets import seam
from backfill_assets.lake.commit import (
    CommitInfo,
    Compaction,
    WriteResult,
    encode_metadata,
    txn_version,
    write_id_of,
)
from backfill_assets.lake.errors import LakeConflict, LakeError, LakeTableMissing
from backfill_assets.lake.file_stats import DEFAULT_INDEXED_COLUMNS, file_stats, indexed_columns
from backfill_assets.lake.keys import date_text
from backfill_assets.lake.log import (
    commit_added_files,
    commit_file_counts,
    commit_of_write,
    touched_after,
)
from backfill_assets.lake.manifests import StagedFile, StagedVersion
from backfill_assets.lake.parquet_writer import write_files
from backfill_assets.lake.retry import Attempt, Commit, committing
from backfill_assets.lake.spark_files import (
    need_spark,
    nullable,
    read_files,
    spark_schema,
)
from backfill_assets.storage.stores import storage_for

if TYPE_CHECKING:
    import pyarrow as pa


class DeltaRsEngine:
    """Delta tables, local or on S3, committed through delta-rs; see the module docstring."""

    name = "delta-rs"

    def __init__(
        self, spark: SparkSession | None, table_properties: dict[str, str] | None = None
    ) -> None:
        self.spark = spark
        # What a table this engine creates is created with (``retention.table_properties``).
        self.table_properties = dict(table_properties or {})

    def version(self, table_dir: str) -> int | None:
        table = snapshot.load(table_dir)
        return None if table is None else table.version()

    def transaction_version(self, table_dir: str, app_id: str) -> int | None:
        """What Delta's transaction id of ``app_id`` records at the latest version (None: none,
        or no table)."""
        return snapshot.transaction_version(table_dir, app_id)

    def snapshot_files(self, table_dir: str, version: int) -> set[str]:
        """The data files ``version``'s snapshot names, relative to the table (none: no table)."""
        return snapshot.file_paths(table_dir, version)

    def unsupported(self, table_dir: str) -> list[str]:
        """The reader features of the table's latest version that Spark's plain read of its
        files would get wrong (``spark_files.unreadable_features``)."""
        table = snapshot.load(table_dir)
        return [] if table is None else snapshot.unreadable(table)

    def replace(
        self,
        name: str,
        table_dir: str,
        df: DataFrame,
        column: str,
        dates: list[dt.date],
        commit: CommitInfo,
    ) -> WriteResult:
        seam.pause("before_files")
        new_schema = nullable(df.schema)
        existing = snapshot.load(table_dir)
        if existing is not None:
            _check_target(existing, name, new_schema, column)
        storage_for(table_dir).makedirs(table_dir)
        indexed = (
            DEFAULT_INDEXED_COLUMNS
            if existing is None
            else indexed_columns(dict(existing.metadata().configuration))
        )
        files = write_files(df, table_dir, column, dates, indexed_columns=indexed)
        seam.pause("after_files")
        return self._overwrite(
            name,
            table_dir,
            new_schema,
            column,
            dates,
            files,
            commit,
            "replace_partitions",
            base_version=None,
        )

    def publish(
        self,
        name: str,
        table_dir: str,
        staged: StagedVersion,
        dates: list[dt.date],
        commit: CommitInfo,
    ) -> WriteResult:
        """One commit: the current files of ``dates`` out, the staged files of ``dates`` in.

        Refused with LakeConflict when a commit after the version the staged data was staged
        (and audited) against touched one of ``dates``: its data would be replaced unseen."""
        schema = StructType.fromJson(json.loads(staged.schema_json))
        return self._overwrite(
            name,
            table_dir,
            schema,
            staged.column,
            dates,
            staged.files_of(dates),
            commit,
            "publish_staged",
            base_version=staged.base_version,
            check_base=True,
        )

    def _overwrite(
        self,
        name: str,
        table_dir: str,
        schema: StructType,
        column: str,
        dates: list[dt.date],
        files: list[StagedFile],
        commit: CommitInfo,
        operation: str,
        base_version: int | None,
        check_base: bool = False,
    ) -> WriteResult:
        rows = dict.fromkeys(dates, 0)
        for f in files:
            rows[f.partition] += f.rows
        adds = [
            AddAction(
                f.path,
                f.size,
                {column: date_text(f.partition)},
                f.modification_time,
                True,
                f.stats or json.dumps({"numRecords": f.rows}),
            )
            for f in files
        ]
        texts = [date_text(day) for day in dates]

        def actions(table: DeltaTable) -> tuple[list, str, list | None]:
            _check_target(table, name, schema, column)
            if check_base:
                _refuse_changed(
                    name,
                    table_dir,
                    column,
                    base_version,
                    set(texts),
                    " that the staged data was audited against; stage again",
                )
            return adds, "overwrite", [(column, "in", texts)]

        write_id = write_id_of(commit)
        metadata = encode_metadata(commit, self.name, operation, rows, write_id=write_id)
        delta_schema = DeltaSchema.from_json(schema.json())
        version, attempts = self._commit(
            table_dir, column, delta_schema, adds, actions, metadata, write_id
        )
        seam.pause("after_commit")
        return WriteResult(name, version, rows, len(adds), attempts)

    def read(
        self,
        name: str,
        table_dir: str,
        column: str | None,
        dates: list[dt.date] | None,
        version: int | None,
    ) -> tuple[DataFrame, int]:
        """(DataFrame, version) of the files of ``dates`` (all files when None) at ``version``."""
        table = snapshot.load(table_dir, version)
        if table is None:
            raise LakeTableMissing(f"table {name} does not exist")
        snapshot.check_readable(table, name)
        partition_columns = table.metadata().partition_columns
        if column is None:
            if len(partition_columns) > 1:
                raise LakeError(f"table {name} has several partition columns: {partition_columns}")
            column = partition_columns[0] if partition_columns else None
        elif partition_columns != [column]:
            raise LakeError(f"table {name} is partitioned by {partition_columns}, not [{column!r}]")
        active = snapshot.files(table_dir, table, column)
        if dates is not None:
            wanted = set(dates)
            active = [f for f in active if f.day in wanted]
        files = [(f.path, f.day, f.size) for f in active]
        return read_files(
            need_spark(self.spark), table_dir, spark_schema(table), column, files
        ), table.version()

    def row_counts(
        self, name: str, table_dir: str, column: str, version: int | None = None
    ) -> dict[dt.date, int]:
        table = snapshot.load(table_dir, version)
        if table is None:
            raise LakeTableMissing(f"table {name} does not exist")
        return snapshot.row_counts(
            table_dir, column, snapshot.files(table_dir, table, column), name
        )

    def history(self, name: str, table_dir: str) -> list[dict]:
        table = snapshot.load(table_dir)
        if table is None:
            raise LakeTableMissing(f"table {name} does not exist")
        return [
            {
                "version": entry["version"],
                "timestamp": entry.get("timestamp"),
                "operation": entry.get("operation"),
                "user_metadata": entry.get("userMetadata"),
            }
            for entry in table.history()
        ]

    def restore(
        self,
        name: str,
        table_dir: str,
        column: str,
        dates: list[dt.date],
        version: int,
        commit: CommitInfo,
        since: int | None = None,
    ) -> WriteResult:
        """Point the partitions back at the files they had at ``version``: no data is rewritten.
        With ``since``: LakeConflict when a commit after it changed one of the partitions,
        checked against the snapshot the commit lands on (at its read version + 1 only)."""
        old = snapshot.load(table_dir, version)
        if old is None:
            raise LakeTableMissing(f"table {name} does not exist")
        wanted = set(dates)
        old_files = {
            f.path: f for f in snapshot.files(table_dir, old, column, True) if f.day in wanted
        }
        storage = storage_for(table_dir)
        missing = [p for p in old_files if not storage.exists(os.path.join(table_dir, p))]
        if missing:
            raise LakeError(
                f"cannot restore {name} to version {version}: files were vacuumed, "
                f"e.g. {missing[0]}"
            )
        indexed = indexed_columns(dict(old.metadata().configuration))
        rows = {day: 0 for day in dates}
        rows.update(snapshot.row_counts(table_dir, column, list(old_files.values()), name))
        added = [0]

        def actions(table: DeltaTable) -> tuple[list, str, list | None]:
            snapshot.check_readable(table, name)
            if since is not None:
                _refuse_changed(name, table_dir, column, since, {date_text(d) for d in dates})
            now = int(time.time() * 1000)
            current = {
                f.path: f for f in snapshot.files(table_dir, table, column) if f.day in wanted
            }
            removes = [
                RemoveAction(f.path, True, now, f.size, f.partition_values(column))
                for f in current.values()
                if f.path not in old_files
            ]
            adds = [
                AddAction(
                    f.path,  # decoded: delta-rs encodes it for the log
                    f.size,
                    f.partition_values(column),
                    f.modification_time,
                    True,
                    f.stats or file_stats(snapshot.footer(table_dir, f.path), indexed),
                )
                for f in old_files.values()
                if f.path not in current
            ]
            added[0] = len(adds)
            return removes + adds, "append", None

        write_id = write_id_of(commit)
        metadata = encode_metadata(
            commit, self.name, "restore_partitions", rows, version, write_id=write_id
        )
        new_version, attempts = self._commit(
            table_dir, column, None, [], actions, metadata, write_id
        )
        return WriteResult(name, new_version, rows, added[0], attempts)

    def vacuum(self, name: str, table_dir: str, retention_hours: float) -> list[str]:
        table = snapshot.load(table_dir)
        if table is None:
            raise LakeTableMissing(f"table {name} does not exist")
        # Whole hours only in delta-rs; round up so nothing younger than asked is removed.
        hours = max(0, int(-(-retention_hours // 1)))
        seam.io("vacuum")
        with commit_lock.held(table_dir, "vacuum"):  # its VACUUM START and END are commits
            return sorted(
                table.vacuum(
                    retention_hours=hours,
                    dry_run=False,
                    enforce_retention_duration=False,
                    full=True,
                )
            )

    def compact(self, name: str, table_dir: str, column: str, commit: CommitInfo) -> Compaction:
        """delta-rs's ``optimize.compact``: each partition's small files rewritten into fewer, in
        one commit whose actions are ``dataChange: false`` (same rows, so a staged version's
        conflict check and ``partitions`` ignore it). Committed like every write here: at
        read_version + 1 only, retried from a fresh snapshot when another commit came first,
        so a publish that lands meanwhile is never undone by a compaction of the old files."""
        write_id = write_id_of(commit)

        def attempt(a: Attempt) -> Compaction:
            table = self._readable(name, table_dir)
            a.floor = table.version()
            rows = self.row_counts(name, table_dir, column, a.floor)
            metadata = encode_metadata(commit, self.name, "compact", rows, write_id=write_id)
            if a.number == 1:
                seam.pause("before_commit")
            seam.io("commit")
            with commit_lock.held(table_dir, "compact"):
                metrics = table.optimize.compact(commit_properties=_no_retries(metadata))
            seam.io("commit.landed")
            version = commit_of_write(table_dir, write_id, a.floor)
            if version is None:
                return Compaction(name, None, 0, 0, a.number)
            durable.sync_commit(table_dir, version, sorted(commit_added_files(table_dir, version)))
            removed, added = metrics["numFilesRemoved"], metrics["numFilesAdded"]
            return Compaction(name, version, removed, added, a.number)

        def landed(a: Attempt) -> Compaction | None:
            version = commit_of_write(table_dir, write_id, a.floor)
            if version is None:
                return None
            added, removed = commit_file_counts(table_dir, version)
            return Compaction(name, version, removed, added, a.number)

        return committing(
            Commit(f"compaction of {name}", attempt, landed, self._lost_race(table_dir))
        )[0]

    def merge(
        self,
        name: str,
        table_dir: str,
        df: DataFrame,
        on: list[str],
        replace_for: str | None,
        commit: CommitInfo,
        create_column: str | None = None,
    ) -> int:
        """delta-rs's MERGE of ``df`` into the table (``Lake.merge``), holding the commit lock
        from its read to its commit: no commit lands in between, so the rows it keeps are the
        table's as the commit finds it. With ``create_column``, a table not there yet is created
        with ``df``'s rows under that lock."""
        source = df.toArrow()
        write_id = write_id_of(commit)
        metadata = encode_metadata(commit, self.name, "merge", {}, write_id=write_id)
        matched = " AND ".join(f"t.{c} = s.{c}" for c in on)  # names checked by Lake.merge
        keys = replaced_keys(source, replace_for)

        def attempt(a: Attempt) -> int:
            with commit_lock.held(table_dir, "merge"):
                # the partition column of the table this merge creates (None: it merges)
                creates = None if snapshot.load(table_dir) is not None else create_column
                if creates is None:
                    table = self._readable(name, table_dir)
                    a.floor = table.version()
                if a.number == 1:
                    seam.pause("before_commit")
                seam.io("commit")
                if creates is not None:
                    write_deltalake(
                        table_dir,
                        source,
                        mode="error",
                        partition_by=[creates],
                        configuration=self.table_properties,
                        commit_properties=_no_retries(metadata, write_id),
                        storage_options=storage_for(table_dir).delta_options(),
                    )
                else:
                    merger = (
                        table.merge(
                            source,
                            matched,
                            source_alias="s",
                            target_alias="t",
                            commit_properties=_no_retries(metadata, write_id, a.floor),
                        )
                        .when_matched_update_all()
                        .when_not_matched_insert_all()
                    )
                    if keys:
                        listed = ", ".join("'" + k.replace("'", "''") + "'" for k in keys)
                        merger = merger.when_not_matched_by_source_delete(
                            f"t.{replace_for} IN ({listed})"
                        )
                    merger.execute()
                seam.io("commit.landed")
            version = commit_of_write(table_dir, write_id, a.floor)
            if version is None:
                raise LakeError(f"{name}: the merge's commit is not in the log")
            durable.sync_commit(table_dir, version, sorted(commit_added_files(table_dir, version)))
            return version

        def landed(a: Attempt) -> int | None:
            return commit_of_write(table_dir, write_id, a.floor)

        def retry(exc: Exception, a: Attempt) -> bool:
            return isinstance(exc, CommitFailedError)

        return committing(Commit(f"merge into {name}", attempt, landed, retry))[0]

    def properties(self, name: str, table_dir: str) -> dict[str, str]:
        """The table's properties (its metadata's ``configuration``) at the latest version."""
        table = snapshot.load(table_dir)
        if table is None:
            raise LakeTableMissing(f"table {name} does not exist")
        return dict(table.metadata().configuration)

    def set_properties(self, name: str, table_dir: str, properties: dict[str, str]) -> None:
        """Set table properties in one metadata commit (delta-rs's ``SET TBLPROPERTIES``)."""
        table = snapshot.load(table_dir)
        if table is None:
            raise LakeTableMissing(f"table {name} does not exist")
        seam.io("commit")
        with commit_lock.held(table_dir, "set table properties"):
            table.alter.set_table_properties(properties, raise_if_not_exists=True)
        seam.io("commit.landed")

    def checkpoint(self, name: str, table_dir: str) -> int:
        """Write a checkpoint of the latest version; that version."""
        table = snapshot.load(table_dir)
        if table is None:
            raise LakeTableMissing(f"table {name} does not exist")
        with commit_lock.held(table_dir, "checkpoint"):
            table.create_checkpoint()
        return table.version()

    def _commit(
        self,
        table_dir: str,
        column: str,
        create_schema: DeltaSchema | None,
        create_adds: list[AddAction],
        actions: Callable[[DeltaTable], tuple[list, str, list | None]],
        metadata: str,
        write_id: str,
    ) -> tuple[int, int]:
        """Commit once at read_version + 1 (``retry.committing``: from a fresh snapshot after a
        lost race; ``metadata`` carries ``write_id``, which tells a commit that landed before
        its call raised); (version, attempts)."""

        def attempt(a: Attempt) -> int:
            table = snapshot.load(table_dir)
            if table is None:
                if create_schema is None:
                    raise LakeTableMissing(f"table at {table_dir} disappeared")
                if a.number == 1:
                    seam.pause("before_commit")
                seam.io("commit")
                with commit_lock.held(table_dir, "create"):
                    create_table_with_add_actions(
                        table_dir,
                        create_schema,
                        create_adds,
                        mode="error",
                        partition_by=[column],
                        configuration=self.table_properties,
                        commit_properties=_no_retries(metadata, write_id),
                        storage_options=storage_for(table_dir).delta_options(),
                    )
                seam.io("commit.landed")
                durable.sync_commit(table_dir, 0)
                return 0
            a.floor = table.version()  # the snapshot read, before the commit moves it
            file_actions, mode, filters = actions(table)
            if a.number == 1:
                seam.pause("before_commit")
            seam.io("commit")
            with commit_lock.held(table_dir, "commit"):
                table.create_write_transaction(
                    file_actions,
                    mode=mode,
                    schema=table.schema(),
                    partition_by=[column],
                    partition_filters=filters,
                    commit_properties=_no_retries(metadata, write_id, a.floor),
                )
            seam.io("commit.landed")
            durable.sync_commit(table_dir, a.floor + 1)
            return a.floor + 1

        def landed(a: Attempt) -> int | None:
            version = commit_of_write(table_dir, write_id, a.floor)
            if version is not None:
                durable.sync_commit(table_dir, version)
            return version

        def retry(exc: Exception, a: Attempt) -> bool:
            if isinstance(exc, CommitFailedError):
                # Only a lost race is worth retrying: the table must have moved on.
                if a.floor is not None and self.version(table_dir) == a.floor:
                    raise LakeError(f"commit to {table_dir} refused: {exc}") from exc
                return True
            # Creating the table, another process created it first: retry as a replace.
            created = a.floor is None and snapshot.load(table_dir) is not None
            return isinstance(exc, DeltaError) and created

        return committing(Commit(f"commit to {table_dir}", attempt, landed, retry))

    def _readable(self, name: str, table_dir: str) -> DeltaTable:
        """The table's latest snapshot, refused when it does not exist or delta-rs cannot read
        it."""
        table = snapshot.load(table_dir)
        if table is None:
            raise LakeTableMissing(f"table {name} does not exist")
        snapshot.check_readable(table, name)
        return table

    def _lost_race(self, table_dir: str) -> Callable[[Exception, Attempt], bool]:
        """A commit that failed because another commit came first: the table moved on."""

        def retry(exc: Exception, a: Attempt) -> bool:
            return isinstance(exc, CommitFailedError) and self.version(table_dir) != a.floor

        return retry


def _no_retries(
    metadata: str, write_id: str | None = None, floor: int | None = None
) -> CommitProperties:
    """A commit's properties: its metadata document, with ``write_id`` Delta's transaction id
    of the write (``txn_version``), and no rebasing by delta-rs (see the module's docstring)."""
    txns = []
    if write_id is not None:
        now_ms = int(time.time() * 1000)
        txns.append(Transaction(write_id, txn_version(floor), last_updated=now_ms))
    return CommitProperties(
        custom_metadata={"userMetadata": metadata}, max_commit_retries=0, app_transactions=txns
    )


def _refuse_changed(
    name: str,
    table_dir: str,
    column: str,
    base: int | None,
    texts: set[str],
    then: str = "; restoring them would revert that write",
) -> None:
    """LakeConflict when a commit after ``base`` changed data in one of the partitions
    ``texts``. Called on the snapshot a commit is about to land on (read version + 1 only): a
    commit after this check takes that version first, and the retry checks again."""
    changed = touched_after(table_dir, column, base, texts)
    if changed:
        raise LakeConflict(
            f"{name}: partitions {sorted(changed)} changed after version {base}{then}"
        )


def _check_target(table: DeltaTable, name: str, new_schema: StructType, column: str) -> None:
    snapshot.check_readable(table, name)
    if table.metadata().partition_columns != [column]:
        raise LakeError(
            f"table {name} is partitioned by {table.metadata().partition_columns}, not [{column!r}]"
        )
    have = {f.name: f.dataType for f in spark_schema(table).fields}
    new = {f.name: f.dataType for f in new_schema.fields}
    if have != new:
        raise LakeError(
            f"schema of the new data for {name} differs from the table: "
            f"table {sorted((k, v.simpleString()) for k, v in have.items())}, "
            f"new {sorted((k, v.simpleString()) for k, v in new.items())}"
        )


def replaced_keys(source: pa.Table, replace_for: str | None) -> list[str]:
    """The values of ``replace_for`` that ``source`` holds whole (``Lake.merge``)."""
    if replace_for is None:
        return []
    return sorted({k for k in source.column(replace_for).to_pylist() if k is not None})
