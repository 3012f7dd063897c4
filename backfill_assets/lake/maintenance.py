"""Routine upkeep of the lake's tables: vacuum with the retention honoured, compaction of small
files, checkpoints. ``backfill-assets maintain`` runs it on demand, the weekly schedule of
``defs/automation/maintenance_schedule.py`` in Dagster; both over every table of the catalog.

The retention (``BACKFILL_RETENTION_DAYS``, default 14, read by ``settings.retention_days``) has
a floor, ``settings.RETENTION_FLOOR_DAYS``: vacuum deletes every file no version within the
retention needs and older than it, and that includes files a writer has written but not
committed yet (a long backfill run, a killed one retried later) and the files of a staged
version waiting to be published. Below the floor both refuse to run. Per table, in this order:

1. close the staged versions opened longer ago than the retention (``Staging.expire``:
   abandoned by a killed step or a dropped correction);
2. vacuum with the retention (``Lake.vacuum``, which refuses while an open staged version has a
   file older than the retention: that table's vacuum is skipped and reported, not forced; and
   which first brings a table's retention properties up to the retention: ``retention.py``);
3. compact small files (``Lake.compact``: one commit, same rows, loses to a concurrent publish
   and retries instead of undoing it); the files it replaces stay until a later vacuum finds
   them older than the retention, so time travel within the retention keeps working;
4. write a checkpoint of the latest version (``Lake.checkpoint``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from backfill_assets.lake.commit import CommitInfo, Compaction
from backfill_assets.lake.errors import LakeError
from backfill_assets.lake.table import Lake
from backfill_assets.settings import check_retention


@dataclass
class TableMaintenance:
    """What maintenance did to one table."""

    table: str
    missing: bool = False
    expired_staged: list[str] = field(default_factory=list)
    vacuumed: list[str] = field(default_factory=list)
    vacuum_refused: str | None = None
    compaction: Compaction | None = None
    checkpoint_version: int | None = None

    def summary(self) -> str:
        if self.missing:
            return f"{self.table}: no table yet, nothing to do"
        vacuum = (
            f"vacuum skipped ({self.vacuum_refused})"
            if self.vacuum_refused
            else f"vacuum deleted {len(self.vacuumed)} files"
        )
        c = self.compaction
        compacted = (
            "no small files to compact"
            if c is None or c.version is None
            else f"compacted {c.files_removed} files into {c.files_added} (version {c.version})"
        )
        return (
            f"{self.table}: expired {len(self.expired_staged)} staged versions; {vacuum}; "
            f"{compacted}; checkpoint at version {self.checkpoint_version}"
        )


def maintain_tables(
    lake: Lake,
    tables: Iterable[tuple[str, str]],
    retention_days: float,
    commit: CommitInfo,
    between: Callable[[], None] = lambda: None,
) -> list[TableMaintenance]:
    """Maintain each (table path, partition column); see the module docstring. ``between`` is
    called before each step of each table: what it raises (a stop) ends maintenance there."""
    check_retention(retention_days)
    hours = retention_days * 24
    done = []
    for path, column in tables:
        between()
        result = TableMaintenance(path)
        done.append(result)
        if not lake.exists(path):
            result.missing = True
            continue
        result.expired_staged = lake.staging.expire(path, hours)
        between()
        try:
            result.vacuumed = lake.vacuum(path, hours)
        except LakeError as exc:
            result.vacuum_refused = str(exc)
        between()
        result.compaction = lake.compact(path, column, commit)
        between()
        result.checkpoint_version = lake.checkpoint(path)
    return done
