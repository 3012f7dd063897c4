"""Write-audit-publish on a lake's tables: ``Staging``, the staged-version protocol (stage,
read, publish, keep, discard, expire), over the manifests of ``manifests.py`` and the lake's
engine. ``Lake.staging`` is a lake's.

A staged version's files are written into the table's storage without a commit, recorded in its
manifest; ``publish`` swaps them in with one commit, after its intent is saved; every method that
opens a staged version settles a stopped intent first (``staged.settle``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Collection, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

import backfill_assets.lake.durable as durable
import backfill_assets.lake.manifests as manifests
from backfill_assets import seam
from backfill_assets.lake.commit import CommitInfo, WriteResult, check_commit, new_write_id
from backfill_assets.lake.errors import LakeError, ManifestChanged
from backfill_assets.lake.file_stats import DEFAULT_INDEXED_COLUMNS, indexed_columns
from backfill_assets.lake.keys import (
    check_column_name,
    check_table_name,
    date_text,
    partition_dates,
    version_arg,
)
from backfill_assets.lake.log import commit_added_files, newest_commit
from backfill_assets.lake.manifests import StagedFile, StagedVersion
from backfill_assets.lake.parquet_writer import remove_files, write_files
from backfill_assets.lake.spark_files import need_spark, nullable, read_files

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from backfill_assets.lake.engine import Engine
    from backfill_assets.storage.stores import LocalStorage, S3Storage


class Staging:
    """The staged versions of the tables under ``location`` (in ``storage``), committed by
    ``engine``; ``spark`` reads them (None: a lake without Spark, which cannot)."""

    def __init__(
        self,
        engine: Engine,
        storage: LocalStorage | S3Storage,
        location: str,
        spark: SparkSession | None,
    ) -> None:
        self._engine = engine
        self._storage = storage
        self._location = location
        self._spark = spark

    def _table_dir(self, table: str) -> str:
        return f"{self._location}/{check_table_name(table)}"

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
        dates = partition_dates(partitions)
        column = check_column_name(partition_column)
        check_commit(commit)
        table_dir = self._table_dir(table)
        stage_id = manifests.check_id(stage_id) if stage_id else manifests.new_id()
        if manifests.load(table_dir, stage_id) is not None:
            raise LakeError(f"{table}: a staged version {stage_id!r} is already open")
        base = self._engine.version(table_dir)
        seam.pause("before_files")
        self._storage.makedirs(table_dir)
        seam.io("files.write")
        indexed = (
            DEFAULT_INDEXED_COLUMNS
            if base is None
            else indexed_columns(self._engine.properties(table, table_dir))
        )
        written = write_files(
            df, table_dir, column, dates, spread, in_day_blocks, nulls_apart, indexed
        )
        seam.pause("after_files")
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
            seam.pause("staged")
        except BaseException:
            manifests.remove(
                table_dir, staged, self._engine
            )  # the caller never learns of it: nothing staged
            raise
        return staged

    def read(self, staged: StagedVersion, partitions: Iterable[object] | None = None) -> DataFrame:
        """The staged rows (of ``partitions``, all by default): exactly what would be published."""
        files = staged.files if partitions is None else staged.files_of(partition_dates(partitions))
        schema = StructType.fromJson(json.loads(staged.schema_json))
        return read_files(
            need_spark(self._spark),
            self._table_dir(staged.table),
            schema,
            staged.column,
            [(f.path, f.partition, f.size) for f in files],
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
        dates = list(staged.dates) if partitions is None else partition_dates(partitions)
        table_dir = self._table_dir(staged.table)
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
        seam.pause("publish_read")
        commit = commit or staged.commit
        if commit.write_id is None:  # a journaling caller's own id is kept: it looks for it
            commit = replace(commit, write_id=new_write_id())
        current = on_disk
        if since is not None:
            current = replace(current, base_version=version_arg(since))
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
        seam.pause("publish_intent")
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
        table_dir = self._table_dir(claimed.table)
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
            if not self._storage.exists(os.path.join(table_dir, f.path))
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
        table_dir = self._table_dir(current.table)
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
        table_dir = self._table_dir(staged.table)
        swapped = commit_added_files(table_dir, result.version)
        gone = [
            f.path
            for f in staged.files_of(dates)
            if not self._storage.exists(os.path.join(table_dir, f.path))
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
        table_dir = self._table_dir(staged.table)
        with manifests.locked(table_dir, staged.id):
            current = self._settled(table_dir, staged.id)
            return 0 if current is None else manifests.remove(table_dir, current, self._engine)

    def keep(self, staged: StagedVersion, partitions: Iterable[object], into: str) -> StagedVersion:
        """Move the staged files of ``partitions`` into the staged version ``into`` of the same
        table (opened when absent), replacing the files it held for them, which are deleted.
        How a correction gathers the days of several runs into one version to cut over.

        Three saves, the intent first (``moving`` on the source), so that ``settle`` completes
        or drops a move stopped at any point; until the source drops them, both manifests own the
        moved files, and ``delete_files`` keeps a file any open version owns. Repeated once done,
        it changes nothing."""
        dates = partition_dates(partitions)
        table_dir = self._table_dir(staged.table)
        into = manifests.check_id(into)
        with manifests.locked(table_dir, staged.id, into):
            return self._keep(staged, dates, into)

    def _keep(self, staged: StagedVersion, dates: list[dt.date], into: str) -> StagedVersion:
        table_dir = self._table_dir(staged.table)
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
        manifests.save(table_dir, manifests.finish_move(table_dir, source, self._engine))
        return merged

    def _open_staged(self, staged: StagedVersion, dates: Iterable[dt.date]) -> StagedVersion:
        """The current manifest of ``staged`` (settled); LakeError when it is closed or lacks
        ``dates``."""
        unknown = sorted(set(dates) - set(staged.dates))
        if unknown:
            raise LakeError(
                f"{staged.table}: {unknown} are not partitions of staged version {staged.id}"
            )
        current = self._settled(self._table_dir(staged.table), staged.id)
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
        return manifests.settled(table_dir, stage_id, self._engine)

    def version(self, table: str, stage_id: str) -> StagedVersion | None:
        """The open staged version ``stage_id`` of ``table``, or None."""
        return self._settled(self._table_dir(table), manifests.check_id(stage_id))

    def versions(self, table: str) -> list[StagedVersion]:
        """The open staged versions of ``table``, each settled (``staged.settle``)."""
        table_dir = self._table_dir(table)
        found = (self._settled(table_dir, s.id) for s in manifests.open_versions(table_dir))
        return [s for s in found if s is not None]

    def expire(self, table: str, retention_hours: float) -> list[str]:
        """Discard the staged versions opened more than ``retention_hours`` ago; their ids. The
        temporary manifests killed writers left as old go too (``durable``)."""
        cutoff_ms = (time.time() - retention_hours * 3600) * 1000
        expired = [s for s in self.versions(table) if s.created_ms < cutoff_ms]
        for s in expired:
            self.discard(s)
        staged_dir = os.path.join(self._table_dir(table), manifests.STAGED_DIR)
        durable.remove_dead_temporaries(staged_dir, retention_hours * 3600)
        return [s.id for s in expired]
