"""The native engine: delta-spark writes and commits, when the session has its jars.

Reads of a version a plain scan of its files reads right, its rows per partition and the files
its swaps list come from deltalake's snapshot (``snapshot``), with no Spark job; any other
version goes through Delta's reader and its JVM snapshot.

Writes are ``replaceWhere`` overwrites whose predicate is built only from
validated dates (``DATE'YYYY-MM-DD'`` literals) and a checked column name.
Commit info travels in the ``userMetadata`` write option. Rows outside the set
are found by the same pass that counts rows per partition, before anything is
written; Delta's own replaceWhere constraint check is a second guard. A lost
race (Delta's conflict exceptions, see ``delta_spark_jvm``) is retried with a
fresh transaction; disjoint partition sets do not conflict in Delta at all (every commit,
vacuum, compaction, checkpoint and change of properties holds the table's ``commit_lock``, as
delta-rs's commits do: neither Delta's local nor its S3 log store creates a commit file only if
absent). Any
error is first checked against the log for the write's id: when it is there, the
commit landed and a post-commit step (a hook, a checkpoint) failed after it, so
the write succeeded and is neither retried nor reported as failed.
Publish and restore swap files in one metadata-only commit through Delta's
transaction API (``delta_spark_swap``): no data is copied. A publish into a table
that does not exist yet creates it in that same commit, as ``CREATE TABLE`` would.
They copy instead (a replaceWhere of the staged rows, or of a ``versionAsOf`` read) only
where a swap is not safe: a Delta version the swap was not tested with, or a table
whose writes Delta must check (constraints, generated columns).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

import backfill_assets.lake.commit_lock as commit_lock
import backfill_assets.lake.delta_spark_jvm as jvm
import backfill_assets.lake.delta_spark_swap as swaps
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
from backfill_assets.lake.keys import date_text
from backfill_assets.lake.log import (
    commit_file_counts,
    commit_of_write,
    newest_commit,
    relative_path,
    touched_after,
)
from backfill_assets.lake.manifests import StagedVersion
from backfill_assets.lake.retention import vacuum_candidates
from backfill_assets.lake.retry import Attempt, Commit, committing
from backfill_assets.lake.spark_files import read_files

if TYPE_CHECKING:
    from delta.tables import DeltaTable

# What VACUUM needs to honour a retention shorter than the table's deletedFileRetentionDuration;
# set only around it.
VACUUM_CONF = {
    "spark.databricks.delta.retentionDurationCheck.enabled": "false",
    "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled": "false",
}
# How many tasks Delta's VACUUM lists a table's folders in: Spark's default is 10,000 whatever
# the table or the cluster (what that costs a small table: docs/benchmarks.md, "Maintenance");
# set around VACUUM to the session's cores.
LISTING_PARALLELISM_CONF = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
# The session setting Delta takes a commit's userMetadata from where no write option reaches.
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
# Delta's transaction id of the session's next DML commit (MERGE), as the writer's options
# txnAppId and txnVersion give a write's.
TXN_APP_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"


def native_delta_available(spark: SparkSession) -> bool:
    """True when the session has Delta's SQL extension configured and its classes load.

    Always False over Spark Connect: the engine reads Delta's log and exception
    classes through the driver's JVM, which a Connect client does not have.
    """
    gateway = getattr(spark, "_jvm", None)
    if gateway is None:
        return False
    extensions = spark.conf.get("spark.sql.extensions", "") or ""
    if "io.delta.sql.DeltaSparkSessionExtension" not in extensions:
        return False
    from py4j.protocol import Py4JError

    try:
        loader = gateway.java.lang.Thread.currentThread().getContextClassLoader()
        loader.loadClass("io.delta.tables.DeltaTable")
        return True
    except Py4JError:
        return False


@contextlib.contextmanager
def _session_confs(spark: SparkSession, confs: dict[str, str]) -> Iterator[None]:
    """The session's settings ``confs`` for the block, then the session's own put back."""
    previous = {key: spark.conf.get(key, None) for key in confs}
    try:
        for key, value in confs.items():
            spark.conf.set(key, value)
        yield
    finally:
        for key, old in previous.items():
            if old is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, old)


def _commit_confs(metadata: str, write_id: str | None = None, floor: int | None = None) -> dict:
    """What a command's commit carries when set on the session around it (Delta's DML and
    OPTIMIZE take no write options): ``metadata`` as its ``userMetadata``, and with
    ``write_id`` Delta's transaction id for the write (``txn_version``)."""
    confs = {USER_METADATA_CONF: metadata}
    if write_id is not None:
        confs[TXN_APP_CONF] = write_id
        confs[TXN_VERSION_CONF] = str(txn_version(floor))
    return confs


def _delta_table(spark: SparkSession, table_dir: str) -> DeltaTable:
    """delta-spark's Python API on the table (``delta.tables.DeltaTable``): history, OPTIMIZE,
    MERGE; VACUUM FULL and table properties, which it does not offer, go through SQL."""
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, table_dir)


def _sql_path(table_dir: str) -> str:
    return "delta.`" + table_dir.replace("`", "``") + "`"


def _quoted(text: str) -> str:
    """``text`` inside a SQL string literal."""
    return text.replace("\\", "\\\\").replace("'", "\\'")


def _predicate(column: str, dates: list[dt.date]) -> str:
    literals = ", ".join(f"DATE'{date_text(day)}'" for day in dates)
    return f"`{column}` IN ({literals})"


class DeltaSparkEngine:
    """Delta tables through the session's delta-spark: replaceWhere, versionAsOf, history."""

    name = "delta-spark"

    def __init__(self, spark: SparkSession, table_properties: dict[str, str] | None = None) -> None:
        try:
            import delta  # noqa: F401 (delta-spark's Python API: history, merge, optimize)
        except ImportError:
            raise LakeError(
                "the delta-spark engine needs delta-spark's Python package, which is not "
                "installed: install the project's `native` extra (`make setup` does: "
                "uv sync --extra native), or set BACKFILL_LAKE_ENGINE=delta-rs"
            ) from None
        if not native_delta_available(spark):
            raise LakeError(
                "the delta-spark engine needs a classic (not Spark Connect) session "
                "with Delta's jars and extension: set BACKFILL_LAKE_ENGINE=delta-spark "
                "before the session starts (spark_config adds them) and run "
                "`make setup`"
            )
        self.spark = spark
        # What a table this engine creates is created with (``retention.table_properties``).
        self.table_properties = dict(table_properties or {})
        # Whether publish and restore may swap files through Delta's internal transaction API.
        self.swaps_files = jvm.native_commits(spark)

    def version(self, table_dir: str) -> int | None:
        """The newest commit file in the log's listing: what ``DESCRIBE HISTORY`` reports,
        without a Spark job (a commit file is written whole, once, or not at all)."""
        return newest_commit(table_dir)

    def unsupported(self, table_dir: str) -> list[str]:
        """Nothing: Delta's own reader serves whatever its protocol check lets through, and
        refuses the rest itself."""
        return []

    def transaction_version(self, table_dir: str, app_id: str) -> int | None:
        """What Delta's transaction id of ``app_id`` records at the latest version (None: none,
        or no table): from deltalake's snapshot, which reads the log's ``txn`` actions without a
        Spark job; from Delta's in the JVM, whose state is rebuilt in Spark jobs, only for a log
        deltalake cannot load."""
        try:
            return snapshot.transaction_version(table_dir, app_id)
        except LakeError:
            pass
        if self.version(table_dir) is None:
            return None
        return jvm.transaction_version(self.spark, table_dir, app_id)

    def snapshot_files(self, table_dir: str, version: int) -> set[str]:
        """The data files ``version``'s snapshot names, relative to the table (none: no table):
        from deltalake's snapshot; from Delta's in the JVM for a version deltalake cannot load."""
        try:
            return snapshot.file_paths(table_dir, version)
        except LakeError:
            pass
        if self.version(table_dir) is None:
            return set()
        files = jvm.snapshot_files(self.spark, table_dir, version).select("path").collect()
        return {relative_path(table_dir, row.path) for row in files}

    def replace(
        self,
        name: str,
        table_dir: str,
        df: DataFrame,
        column: str,
        dates: list[dt.date],
        commit: CommitInfo,
        operation: str = "replace_partitions",
        restored_from: int | None = None,
    ) -> WriteResult:
        seam.pause("before_files")
        latest = self.version(table_dir)
        if latest is not None:
            self._check_target(name, table_dir, latest, df, column)
        # One counting pass (rows per partition, and any row outside the set), then the write.
        counts = {row[column]: row["count"] for row in df.groupBy(column).count().collect()}
        outside = sorted(
            str(day) if day is not None else "NULL" for day in counts if day not in set(dates)
        )
        if outside:
            raise LakeError(
                f"rows with {column} outside the partitions being written: "
                f"{', '.join(outside[:10])}"
            )
        rows = {day: counts.get(day, 0) for day in dates}
        write_id = write_id_of(commit)
        metadata = encode_metadata(
            commit, self.name, operation, rows, restored_from, write_id=write_id
        )

        def attempt(a: Attempt) -> int:
            a.floor = newest_commit(table_dir)  # this write's commit is newer
            seam.io("commit")
            with commit_lock.held(table_dir, operation):
                (
                    (seam.in_write_job(self.spark, df, column, dates) if a.number == 1 else df)
                    .write.format("delta")
                    .mode("overwrite")
                    .option("replaceWhere", _predicate(column, dates))
                    .option("userMetadata", metadata)
                    .option("txnAppId", write_id)
                    .option("txnVersion", txn_version(a.floor))
                    # "delta." options are the properties of a table the write creates
                    .options(**self.table_properties)
                    .partitionBy(column)
                    .save(table_dir)
                )
            seam.io("commit.landed")
            return self._landed_write(table_dir, write_id, a.floor)

        def retry(exc: Exception, a: Attempt) -> bool:
            if jvm.error_condition(exc) == "DELTA_REPLACE_WHERE_MISMATCH":
                raise LakeError(f"rows outside the partitions being written: {exc}") from exc
            return jvm.is_lost_race(self.spark, exc)

        version, attempts = committing(
            Commit(f"commit to {table_dir}", attempt, self._landed(table_dir, write_id), retry)
        )
        seam.pause("after_commit")
        return WriteResult(name, version, rows, commit_file_counts(table_dir, version)[0], attempts)

    def _landed(self, table_dir: str, write_id: str) -> Callable[[Attempt], int | None]:
        """A try's own commit, when it landed though the call raised (a hook or a checkpoint
        failed after it)."""
        return lambda a: commit_of_write(table_dir, write_id, a.floor)

    def _landed_write(self, table_dir: str, write_id: str, floor: int | None) -> int:
        """The version of the commit a write's call just returned from."""
        version = commit_of_write(table_dir, write_id, floor)
        if version is None:
            raise LakeError(f"the commit of write {write_id} is missing from {table_dir}'s log")
        return version

    def _lost_race(self) -> Callable[[Exception, Attempt], bool]:
        return lambda exc, a: jvm.is_lost_race(self.spark, exc)

    def _pinned(self, name: str, table_dir: str, version: int | None) -> int:
        """``version``, or the latest when None; LakeError when the table has no such version."""
        latest = self.version(table_dir)
        if latest is None:
            raise LakeTableMissing(f"table {name} does not exist")
        pinned = latest if version is None else version
        if pinned > latest:
            raise LakeError(f"table {name} has no version {pinned} (latest is {latest})")
        return pinned

    def read(
        self,
        name: str,
        table_dir: str,
        column: str | None,
        dates: list[dt.date] | None,
        version: int | None,
    ) -> tuple[DataFrame, int]:
        """(DataFrame, version) of ``dates`` (all when None) at ``version`` (the latest when
        None). A version a plain Parquet scan reads right (``snapshot.plain``) is read from its
        files as deltalake lists them, as delta-rs's engine reads: Delta's reader would first
        rebuild the version's state in Spark jobs, a second or more per table read. Any other
        version goes through Delta's reader."""
        pinned = self._pinned(name, table_dir, version)
        found = snapshot.plain(table_dir, pinned)
        if found is not None:
            return self._read_files(name, table_dir, found, column, dates), pinned
        frame = self.spark.read.format("delta").option("versionAsOf", pinned).load(table_dir)
        if column is not None:
            partitioned_by = self._partition_columns(table_dir, pinned)
            if partitioned_by != [column]:
                raise LakeError(
                    f"table {name} is partitioned by {partitioned_by}, not [{column!r}]"
                )
            if dates is not None:
                frame = frame.where(F.col(column).isin(list(dates)))
        return frame, pinned

    def _read_files(
        self,
        name: str,
        table_dir: str,
        found: snapshot.Snapshot,
        column: str | None,
        dates: list[dt.date] | None,
    ) -> DataFrame:
        partitioned_by = found.partition_columns
        if column is not None and partitioned_by != [column]:
            raise LakeError(f"table {name} is partitioned by {partitioned_by}, not [{column!r}]")
        key = partitioned_by[0] if partitioned_by else None
        files = found.files if dates is None else found.in_days(dates)
        return read_files(
            self.spark,
            table_dir,
            found.schema,
            key,
            [(f.path, f.day, f.size) for f in files],
            s3_through_hadoop=True,
        )

    def row_counts(
        self, name: str, table_dir: str, column: str, version: int | None = None
    ) -> dict[dt.date, int]:
        """From the files' ``numRecords``: deltalake's snapshot of a plain version (a file lacking
        them counted from its footer), else Delta's JVM snapshot (less the rows deletion vectors
        delete; a partition with a file lacking them counted by a read)."""
        pinned = self._pinned(name, table_dir, version)
        found = snapshot.plain(table_dir, pinned)
        if found is not None and found.partition_columns == [column]:
            return snapshot.row_counts(table_dir, column, found.files, name)
        counts, unknown = jvm.snapshot_records(self.spark, table_dir, column, pinned)
        if unknown:
            frame, _ = self.read(name, table_dir, column, unknown, pinned)
            counts.update({r[column]: r["count"] for r in frame.groupBy(column).count().collect()})
        return counts

    def history(self, name: str, table_dir: str) -> list[dict]:
        if self.version(table_dir) is None:
            raise LakeTableMissing(f"table {name} does not exist")
        entries = (
            _delta_table(self.spark, table_dir)
            .history()
            .select("version", F.unix_millis("timestamp").alias("ts"), "operation", "userMetadata")
        )
        return [
            {
                "version": r["version"],
                "timestamp": r["ts"],
                "operation": r["operation"],
                "user_metadata": r["userMetadata"],
            }
            for r in entries.collect()
        ]

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
        (and audited) against changed one of ``dates``: its data would be replaced unseen."""
        if self.swaps_files and swaps.can_swap(self.spark, name, table_dir, "publish"):
            return swaps.publish(
                self.spark, self.name, name, table_dir, staged, dates, commit, self.table_properties
            )
        return self._publish_by_copy(name, table_dir, staged, dates, commit)

    def _publish_by_copy(
        self,
        name: str,
        table_dir: str,
        staged: StagedVersion,
        dates: list[dt.date],
        commit: CommitInfo,
    ) -> WriteResult:
        """Check for conflicts, then replace the partitions with a copy of the staged rows (one
        replaceWhere commit, data rewritten), both under the table's commit lock: no other
        commit comes between them (``commit_lock``)."""
        with commit_lock.held(table_dir, "publish"):
            changed = touched_after(
                table_dir, staged.column, staged.base_version, {date_text(d) for d in dates}
            )
            if changed:
                raise LakeConflict(
                    f"{name}: partitions {sorted(changed)} changed after "
                    f"version {staged.base_version}; stage again"
                )
            rows = read_files(
                self.spark,
                table_dir,
                StructType.fromJson(json.loads(staged.schema_json)),
                staged.column,
                [(f.path, f.partition, f.size) for f in staged.files_of(dates)],
            )
            return self.replace(name, table_dir, rows, staged.column, dates, commit)

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
        """Point the partitions back at the files they had at ``version``: no data is rewritten
        (LakeError when some were vacuumed). With ``since``: LakeConflict when a commit after it
        changed one of the partitions, Delta's conflict check of a transaction that read them
        at ``since``. Where a swap is not safe, rewrite them from a ``versionAsOf`` read in
        one replaceWhere commit."""
        pinned = self._pinned(name, table_dir, version)
        if self.swaps_files and swaps.can_swap(self.spark, name, table_dir, "restore"):
            return swaps.restore(
                self.spark, self.name, name, table_dir, column, dates, pinned, commit, since
            )
        # The guard and the copy's commit under the table's commit lock: no other commit comes
        # between them (``commit_lock``), as Delta's replaceWhere cannot be pinned to ``since``.
        with commit_lock.held(table_dir, "restore"):
            changed = (
                set()
                if since is None
                else touched_after(table_dir, column, since, {date_text(d) for d in dates})
            )
            if changed:
                raise LakeConflict(
                    f"{name}: partitions {sorted(changed)} changed after version {since}; "
                    "restoring them would revert that write"
                )
            # Safe to read lazily: an overwrite only tombstones the old version's files.
            old, _ = self.read(name, table_dir, column, dates, pinned)
            return self.replace(
                name,
                table_dir,
                old,
                column,
                dates,
                commit,
                operation="restore_partitions",
                restored_from=pinned,
            )

    def vacuum(self, name: str, table_dir: str, retention_hours: float) -> list[str]:
        """VACUUM with the retention asked for, its listing in as many tasks as the session has
        cores; the session's own settings are put back."""
        if self.version(table_dir) is None:
            raise LakeTableMissing(f"table {name} does not exist")
        before = set(vacuum_candidates(table_dir))
        conf = {
            **VACUUM_CONF,
            LISTING_PARALLELISM_CONF: str(max(1, self.spark.sparkContext.defaultParallelism)),
        }
        with _session_confs(self.spark, conf):
            seam.io("vacuum")
            with commit_lock.held(table_dir, "vacuum"):
                self.spark.sql(
                    f"VACUUM {_sql_path(table_dir)} FULL RETAIN {float(retention_hours)} HOURS"
                )
        return sorted(before - set(vacuum_candidates(table_dir)))

    def compact(self, name: str, table_dir: str, column: str, commit: CommitInfo) -> Compaction:
        """``OPTIMIZE``: each partition's small files rewritten into fewer, in one commit whose
        actions are ``dataChange: false``. A lost race (a publish landed first) is Delta's
        conflict exception on the compaction's side: retried from a fresh snapshot, so the
        publish stands. The commit carries the metadata document through the session's
        ``commitInfo.userMetadata`` setting, set only around the command."""
        write_id = write_id_of(commit)

        def attempt(a: Attempt) -> Compaction:
            a.floor = self._pinned(name, table_dir, None)
            rows = self.row_counts(name, table_dir, column, a.floor)
            metadata = encode_metadata(commit, self.name, "compact", rows, write_id=write_id)
            if a.number == 1:
                seam.pause("before_commit")
            seam.io("commit")
            with (
                _session_confs(self.spark, _commit_confs(metadata)),
                commit_lock.held(table_dir, "compact"),
            ):
                optimized = (
                    _delta_table(self.spark, table_dir).optimize().executeCompaction().collect()
                )
            metrics = optimized[0]["metrics"]
            seam.io("commit.landed")
            version = commit_of_write(table_dir, write_id, a.floor)
            removed, added = metrics["numFilesRemoved"], metrics["numFilesAdded"]
            return Compaction(name, version, removed, added, a.number)

        def landed(a: Attempt) -> Compaction | None:
            version = commit_of_write(table_dir, write_id, a.floor)
            # The counts are unknown: the hook after the commit failed.
            return None if version is None else Compaction(name, version, -1, -1, a.number)

        return committing(Commit(f"compaction of {name}", attempt, landed, self._lost_race()))[0]

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
        """Delta's MERGE (``delta.tables.DeltaTable``) of ``df`` into the table
        (``Lake.merge``), holding the commit lock from its read to its commit: no commit lands
        in between, so the rows it keeps are the table's as the commit finds it. With
        ``create_column``, a table not there yet is created with ``df``'s rows under that
        lock."""
        write_id = write_id_of(commit)
        metadata = encode_metadata(commit, self.name, "merge", {}, write_id=write_id)
        matched = " AND ".join(f"t.`{c}` = s.`{c}`" for c in on)
        keys = (
            []
            if replace_for is None
            else sorted(r[0] for r in df.select(replace_for).distinct().collect() if r[0])
        )

        def attempt(a: Attempt) -> int:
            with commit_lock.held(table_dir, "merge"):
                # the partition column of the table this merge creates (None: it merges)
                creates = None if self.version(table_dir) is not None else create_column
                if creates is None:
                    a.floor = self._pinned(name, table_dir, None)
                if a.number == 1:
                    seam.pause("before_commit")
                seam.io("commit")
                with _session_confs(self.spark, _commit_confs(metadata, write_id, a.floor)):
                    if creates is not None:
                        df.write.format("delta").mode("errorifexists").options(
                            **self.table_properties
                        ).partitionBy(creates).save(table_dir)
                    else:
                        merger = (
                            _delta_table(self.spark, table_dir)
                            .alias("t")
                            .merge(df.alias("s"), matched)
                            .whenMatchedUpdateAll()
                            .whenNotMatchedInsertAll()
                        )
                        if keys:
                            listed = ", ".join(f"'{_quoted(k)}'" for k in keys)
                            merger = merger.whenNotMatchedBySourceDelete(
                                f"t.`{replace_for}` IN ({listed})"
                            )
                        merger.execute()
                seam.io("commit.landed")
            return self._landed_write(table_dir, write_id, a.floor)

        return committing(
            Commit(
                f"merge into {name}",
                attempt,
                self._landed(table_dir, write_id),
                self._lost_race(),
            )
        )[0]

    def properties(self, name: str, table_dir: str) -> dict[str, str]:
        """The table's properties (its metadata's ``configuration``) at the latest version."""
        version = self._pinned(name, table_dir, None)
        return jvm.table_shape(jvm.snapshot_at(self.spark, table_dir, version))[2]

    def set_properties(self, name: str, table_dir: str, properties: dict[str, str]) -> None:
        """Set table properties in one metadata commit (``ALTER TABLE ... SET TBLPROPERTIES``),
        retried when another commit came first."""
        pairs = ", ".join(f"'{_quoted(k)}' = '{_quoted(v)}'" for k, v in properties.items())

        def attempt(a: Attempt) -> None:
            seam.io("commit")
            with commit_lock.held(table_dir, "set table properties"):
                self.spark.sql(f"ALTER TABLE {_sql_path(table_dir)} SET TBLPROPERTIES ({pairs})")
            seam.io("commit.landed")

        # Nothing tells a commit that landed: setting the same properties twice is harmless.
        committing(Commit(f"properties of {name}", attempt, lambda a: None, self._lost_race()))

    def checkpoint(self, name: str, table_dir: str) -> int:
        """Write a checkpoint of the latest version through Delta's log in the JVM; that version."""
        version = self._pinned(name, table_dir, None)
        with commit_lock.held(table_dir, "checkpoint"):
            jvm.write_checkpoint(self.spark, table_dir, version)
        return version

    def _partition_columns(self, table_dir: str, version: int) -> list[str]:
        """The partition columns of ``version``, from its snapshot's metadata: ``DESCRIBE
        DETAIL`` would also count every file, a reconstruction of the whole table's state in
        Spark jobs."""
        return jvm.table_shape(jvm.snapshot_at(self.spark, table_dir, version))[1]

    def _check_target(
        self, name: str, table_dir: str, version: int, df: DataFrame, column: str
    ) -> None:
        partitioned_by = self._partition_columns(table_dir, version)
        if partitioned_by != [column]:
            raise LakeError(f"table {name} is partitioned by {partitioned_by}, not [{column!r}]")
        have = {
            f.name: f.dataType
            for f in self.spark.read.format("delta").load(table_dir).schema.fields
        }
        new = {f.name: f.dataType for f in df.schema.fields}
        if have != new:
            raise LakeError(
                f"schema of the new data for {name} differs from the table: "
                f"table {sorted((k, v.simpleString()) for k, v in have.items())}, "
                f"new {sorted((k, v.simpleString()) for k, v in new.items())}"
            )
