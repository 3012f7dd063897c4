"""The contract both engines implement (``delta_rs.DeltaRsEngine``,
``delta_spark.DeltaSparkEngine``): what ``Lake`` asks of an engine, given a table's name (for
messages) and its location.

Every write is one Delta commit, made while holding the table's commit lock (``commit_lock``),
carrying the run's ``CommitInfo`` as its ``userMetadata`` with a write id, and found in the log
by that id when the call raised after it landed: a write is never committed twice. A commit
that loses a race to another is retried from a fresh snapshot, never committed over it: both
engines run the same loop (``retry.committing``).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from backfill_assets.lake.commit import CommitInfo, Compaction, WriteResult
    from backfill_assets.lake.manifests import StagedVersion


class Engine(Protocol):
    name: str  # "delta-rs" or "delta-spark": recorded in every commit it makes

    def version(self, table_dir: str) -> int | None:
        """The latest version, None when there is no table."""
        ...

    def transaction_version(self, table_dir: str, app_id: str) -> int | None:
        """The version Delta's transaction id of ``app_id`` records at the latest version (None:
        none): every write records its write id as one (``commit.txn_version``)."""
        ...

    def snapshot_files(self, table_dir: str, version: int) -> set[str]:
        """The data files ``version``'s snapshot names (paths relative to the table, normalised;
        none: no table), from whatever checkpoint and commits the engine reads it."""
        ...

    def unsupported(self, table_dir: str) -> list[str]:
        """What of the table's protocol this engine cannot serve correctly (empty: nothing, or
        no table): ``LakeUnsupported``'s features."""
        ...

    def read(
        self,
        name: str,
        table_dir: str,
        column: str | None,
        dates: list[dt.date] | None,
        version: int | None,
    ) -> tuple[DataFrame, int]:
        """The rows of ``dates`` (all when None) at ``version`` (latest when None), and it."""
        ...

    def row_counts(
        self, name: str, table_dir: str, column: str, version: int | None = None
    ) -> dict[dt.date, int]:
        """Rows per partition, from the log's file statistics."""
        ...

    def history(self, name: str, table_dir: str) -> list[dict]:
        """The table's commits, newest first."""
        ...

    def replace(
        self,
        name: str,
        table_dir: str,
        df: DataFrame,
        column: str,
        dates: list[dt.date],
        commit: CommitInfo,
    ) -> WriteResult:
        """Exactly ``dates`` replaced by ``df``'s rows, in one commit (the table created when
        there is none)."""
        ...

    def publish(
        self,
        name: str,
        table_dir: str,
        staged: StagedVersion,
        dates: list[dt.date],
        commit: CommitInfo,
    ) -> WriteResult:
        """The staged files of ``dates`` in, the partitions' current files out, in one commit;
        LakeConflict when a commit after the staged version's base changed one of them."""
        ...

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
        """``dates`` pointed back at the files they had at ``version``; with ``since``,
        LakeConflict when a commit after it changed one of them (checked in the commit)."""
        ...

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
        """Delta's MERGE by the key columns ``on`` (``Lake.merge``); the version committed."""
        ...

    def vacuum(self, name: str, table_dir: str, retention_hours: float) -> list[str]:
        """Delete the files no version within the retention needs; the files deleted."""
        ...

    def compact(self, name: str, table_dir: str, column: str, commit: CommitInfo) -> Compaction:
        """Each partition's small files rewritten into fewer, in one commit changing no row."""
        ...

    def checkpoint(self, name: str, table_dir: str) -> int:
        """A checkpoint of the latest version; that version."""
        ...

    def properties(self, name: str, table_dir: str) -> dict[str, str]:
        """The table's properties at the latest version."""
        ...

    def set_properties(self, name: str, table_dir: str, properties: dict[str, str]) -> None:
        """Set table properties in one metadata commit."""
        ...
