"""The intent journal of a correction's multi-step operations.

A cutover commits to two tables (staging, then fact), a rollback too, and a discard deletes
both tables' staged files: a crash or an I/O error between two steps must not leave the
record and the lake telling different stories. So before its first effect an operation saves
its intent in the record (``Correction.pending``, ``begin``): the action, the days, and per
table the write id its commit will carry (``CommitInfo.write_id``) and the version it starts
from; a cutover's also names, per table, the staged files its diff compared, the only ones it
publishes (``Staging.publish``'s ``files``). Then it commits the tables whose
commit has not landed (``forward``: the log is asked first, so a commit is never made twice),
then saves its outcome and clears the intent. The intent carries a lease, renewed before each
table's step (``lease.py``): recovery, on any host, leaves an intent alone while its lease is
live, and ``recovery.py`` completes or undoes one left behind.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from backfill_assets import signals
from backfill_assets.corrections import lease, registry
from backfill_assets.corrections.diff import CORRECTED
from backfill_assets.corrections.registry import Correction, CorrectionError, State
from backfill_assets.lake import CommitInfo, Lake, LakeConflict, WriteResult
from backfill_assets.lake.commit import new_write_id
from backfill_assets.lake.log import commit_file_counts

ACTIONS = ("cutover", "rollback", "discard")
COLUMNS = {t.path: t.partition_column for t in CORRECTED}


@dataclass
class Outcome:
    """What a cutover, rollback or discard did: per table, the commit; the days it covered."""

    correction: Correction
    days: list[dt.date]
    writes: dict[str, WriteResult]
    skipped: list[dt.date]
    deleted: int = 0  # staged files a discard deleted


def commit_info(c: Correction, action: str, write_id: str | None = None) -> CommitInfo:
    """The identity of a correction's commit, carrying the journal's write id."""
    inputs: dict[str, int] = {}
    for run in c.runs:
        for table, version in run["input_versions"].items():
            inputs[table] = max(inputs.get(table, version), version)
    return CommitInfo(
        run_id=f"correction:{c.id}",
        code_version=c.code_version,
        input_versions=inputs,
        extra={
            "correction": c.id,
            "action": action,
            "by": registry.user(),
            "reason": c.reason,
        },
        write_id=write_id,
    )


def commit_carrying(lake: Lake, table: str, write_id: str, after: int | None) -> int | None:
    """The version of the commit after ``after`` (any when None) that carries the journal's
    ``write_id``, or None: whether the intent's commit landed."""
    return lake.commit_of_write(table, write_id, after)


def begin(lake: Lake, c: Correction, action: str, days: list[dt.date], **extra: object) -> None:
    """Save the intent of ``action`` in the record, before its first effect; none after a SIGINT
    or SIGTERM (``signals.check``): an operation whose intent is saved finishes its commits."""
    signals.check()
    c.pending = {
        "action": action,
        "at": registry.now(),
        "by": registry.user(),
        "days": [d.isoformat() for d in days],
        "tables": {
            t.path: {"write_id": new_write_id(), "from": lake.version(t.path)} for t in CORRECTED
        },
        **extra,
    }
    lease.hold(c.pending)
    try:
        registry.save(lake.location, c)
    except OSError as exc:
        c.pending = {}
        raise CorrectionError(
            f"{action} of {c.id} not started: its intent could not be saved to "
            f"{registry.record_path(lake.location, c.id)} ({exc}); nothing changed"
        ) from exc


def renew(lake: Lake, c: Correction) -> None:
    """Renew this process's lease on ``c``'s intent before its next step, saved: RecordChanged
    when another process saved the record meanwhile (took the intent over, say): then this one
    stops, before the step."""
    lease.hold(c.pending)
    registry.save(lake.location, c)


def days_of(c: Correction) -> list[dt.date]:
    return [dt.date.fromisoformat(d) for d in c.pending["days"]]


def landed(lake: Lake, c: Correction) -> dict[str, int | None]:
    """Per table, the version of the intent's commit, None when it did not land."""
    return {
        path: commit_carrying(lake, path, t["write_id"], t["from"])
        for path, t in c.pending["tables"].items()
    }


def forward(lake: Lake, c: Correction) -> Outcome:
    """Commit every table whose commit has not landed, in order, then save the outcome."""
    p = c.pending
    if p["action"] == "discard":
        deleted = 0
        for table in CORRECTED:
            staged = lake.staging.version(table.path, c.id)
            if staged is not None:
                renew(lake, c)
                deleted += lake.staging.discard(staged)
        return _finish(lake, c, {}, deleted)
    done = landed(lake, c)
    writes = {}
    for table in CORRECTED:
        version = done[table.path]
        if version is None:
            renew(lake, c)
            writes[table.path] = _commit(lake, c, table.path)
        else:
            writes[table.path] = _landed_write(lake, table.path, version)
    return _finish(lake, c, writes)


def _commit(lake: Lake, c: Correction, path: str) -> WriteResult:
    p, days = c.pending, days_of(c)
    commit = commit_info(c, p["action"], p["tables"][path]["write_id"])
    if p["action"] == "cutover":
        staged = lake.staging.version(path, c.id)
        if staged is None:
            raise CorrectionError(f"{path}: the staged version of {c.id} is gone")
        files = p.get("files", {}).get(path)  # none in an intent saved before file sets were
        return lake.staging.publish(staged, days, commit, since=p["since"][path], files=files)
    cut = c.cutover["versions"][path]
    try:
        return restore(lake, c, path, days, c.cutover["versions_before"][path], commit, cut)
    except LakeConflict as exc:
        raise CorrectionError(
            f"{path}: production changed after the cutover (version {cut}); rolling back would "
            f"revert those rebuilds ({exc})"
        ) from exc


def restore(
    lake: Lake,
    c: Correction,
    path: str,
    days: list[dt.date],
    version: int | None,
    commit: CommitInfo,
    since: int,
) -> WriteResult:
    """Restore ``days`` of ``path`` to ``version``, refused (LakeConflict) when a commit after
    ``since`` changed one of them: checked inside the restore's own commit."""
    if version is None:
        raise CorrectionError(
            f"{path} did not exist before the {c.pending['action']} of {c.id}: nothing to "
            "restore it to"
        )
    return lake.restore_partitions(path, COLUMNS[path], days, version, commit, since=since)


def _landed_write(lake: Lake, path: str, version: int) -> WriteResult:
    """What an earlier attempt's landed commit did, read back from the log."""
    document = lake.commit_metadata(path, version)
    rows = {dt.date.fromisoformat(d): n for d, n in document.get("rows_by_partition", {}).items()}
    added, _ = commit_file_counts(lake.table_location(path), version)
    return WriteResult(path, version, rows, added, 1)


def _finish(lake: Lake, c: Correction, writes: dict[str, WriteResult], deleted: int = 0) -> Outcome:
    p, days = c.pending, days_of(c)
    skipped = [dt.date.fromisoformat(d) for d in p.get("skipped_rebuilt", [])]
    versions = {t: w.version for t, w in writes.items()}
    shown = ", ".join(f"{t} v{v}" for t, v in versions.items())
    if p["action"] == "cutover":
        c.cutover = {
            "at": registry.now(),
            "days": p["days"],
            "versions_before": {t: x["from"] for t, x in p["tables"].items()},
            "versions": versions,
            "skipped_rebuilt": p.get("skipped_rebuilt", []),
        }
        c.rollback = {}
        c.state = State.CUT_OVER
        c.note("cut over", f"{len(days)} day(s): {shown}")
    elif p["action"] == "rollback":
        c.rollback = {"at": registry.now(), "versions": versions}
        c.state = State.ROLLED_BACK
        c.note("rolled back", shown)
    else:
        c.state = p["state"]
        c.note(c.state, f"{deleted} staged file(s) deleted")
    c.pending = {}
    registry.save(lake.location, c)
    return Outcome(c, days, writes, skipped, deleted)
