"""The intent journal of a correction's multi-step operations, and their recovery.

A cutover commits to two tables (staging, then fact), a rollback too, and a discard deletes
both tables' staged files: a crash or an I/O error between two steps must not leave the
record and the lake telling different stories. So before its first effect an operation saves
its intent in the record (``Correction.pending``): the action, the days, and per table the
write id its commit will carry (``CommitInfo.write_id``) and the version it starts from. Then
it commits, table by table; then it saves its outcome and clears the intent.

``recover`` takes an intent left behind and asks the Delta log which of its commits landed
(``Lake.commit_of_write``):

- all of them: the operation is done, only its outcome was not saved: save it;
- none: nothing changed: drop the intent (the command may be given again);
- some: complete it, committing the other tables with their recorded write ids (so that no
  recovery ever commits one twice), unless the lake refuses (production changed those days
  since, or a staged version is gone); then undo it: the landed tables' days restored to the
  versions the operation started from, under an undo intent of its own, so the undo recovers
  too. Days production rebuilt after the landed commit are left to production.

A discard is always completed (deleting staged files again is harmless). Every command on a
correction recovers it first; ``maintain`` recovers them all (``recover_all``).
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from dataclasses import dataclass, field

from backfill_assets.corrections import registry
from backfill_assets.corrections.diff import CORRECTED
from backfill_assets.corrections.registry import Correction, CorrectionError, State
from backfill_assets.lake import CommitInfo, Lake, LakeError, WriteResult
from backfill_assets.lake.commit import new_write_id
from backfill_assets.lake.log import commit_file_counts

ACTIONS = ("cutover", "rollback", "discard")
# An intent whose process still runs on this host, younger than this, is that process's to
# finish: recovery leaves it alone. Older, or its process gone, it was interrupted.
IN_PROGRESS_AT_MOST = dt.timedelta(hours=1)
COLUMNS = {t.path: t.partition_column for t in CORRECTED}


@dataclass
class Outcome:
    """What a cutover, rollback or discard did: per table, the commit; the days it covered."""

    correction: Correction
    days: list[dt.date]
    writes: dict[str, WriteResult]
    skipped: list[dt.date]
    deleted: int = 0  # staged files a discard deleted


@dataclass
class Recovery:
    """What ``recover`` did with an interrupted operation."""

    correction_id: str
    action: str
    result: str  # completed, undone, abandoned (nothing had landed), in progress, failed
    detail: str = ""
    outcome: Outcome | None = field(default=None, repr=False)

    def __str__(self) -> str:
        return f"correction {self.correction_id}: interrupted {self.action} {self.result}" + (
            f": {self.detail}" if self.detail else ""
        )


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
        extra={"correction": c.id, "action": action, "by": registry.user(), "reason": c.reason},
        write_id=write_id,
    )


def begin(lake: Lake, c: Correction, action: str, days: list[dt.date], **extra: object) -> None:
    """Save the intent of ``action`` in the record, before its first effect."""
    c.pending = {
        "action": action,
        "at": registry.now(),
        "by": registry.user(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "days": [d.isoformat() for d in days],
        "tables": {
            t.path: {"write_id": new_write_id(), "from": lake.version(t.path)} for t in CORRECTED
        },
        **extra,
    }
    try:
        registry.save(lake.root, c)
    except OSError as exc:
        c.pending = {}
        raise CorrectionError(
            f"{action} of {c.id} not started: its intent could not be saved to "
            f"{registry.record_path(lake.root, c.id)} ({exc}); nothing changed"
        ) from exc


def carry_out(lake: Lake, c: Correction) -> Outcome:
    """Carry out the intent just saved by ``begin``. On any error, recover at once: the
    operation is completed (and its outcome returned) or undone (CorrectionError saying so);
    if even that fails, the intent stays for the next command or ``maintain``."""
    action = c.pending["action"]
    try:
        return _forward(lake, c)
    except Exception as exc:
        try:
            done = recover(lake, c.id)
        except Exception as again:
            raise CorrectionError(
                f"{action} of {c.id} stopped ({type(exc).__name__}: {exc}) and recovering it "
                f"failed too ({type(again).__name__}: {again}). Its intent stays recorded in "
                f"{registry.record_path(lake.root, c.id)}: run backfill-assets {action} {c.id} "
                "again, or backfill-assets maintain, to complete or undo it"
            ) from exc
        if done is not None and done.outcome is not None:
            return done.outcome
        raise CorrectionError(
            f"{action} of {c.id} failed ({type(exc).__name__}: {exc})"
            + (f"; {done.result}: {done.detail}" if done is not None else "")
        ) from exc


def recover(lake: Lake, correction_id: str) -> Recovery | None:
    """Complete or undo the operation the record of ``correction_id`` says was interrupted
    (see the module docstring); None when there is none. BrokenRecord on an unreadable record."""
    c = registry.load(lake.root, correction_id)
    if c is None or not c.pending:
        return None
    p = c.pending
    action = p.get("action")
    if action not in ACTIONS:
        raise CorrectionError(
            f"correction {c.id}: its record names an unknown interrupted operation {action!r}"
        )
    if _running_elsewhere(p):
        return Recovery(c.id, action, "in progress", f"by process {p['pid']} since {p['at']}")
    if "undo" in p:
        return _undo(lake, c, p.get("undo_reason", ""))
    if action == "discard":
        return Recovery(c.id, action, "completed", outcome=_forward(lake, c))
    landed = _landed(lake, c)
    if all(v is None for v in landed.values()):
        c.pending = {}
        c.note(f"{action} interrupted", "before any commit landed: nothing changed")
        registry.save(lake.root, c)
        return Recovery(c.id, action, "abandoned", "no commit had landed: nothing changed")
    try:
        outcome = _forward(lake, c)
    except (CorrectionError, LakeError) as refused:
        return _undo(lake, c, str(refused))
    done = ", ".join(f"{t} v{w.version}" for t, w in outcome.writes.items())
    return Recovery(c.id, action, "completed", done, outcome)


def recover_all(lake: Lake) -> list[Recovery]:
    """``recover`` every readable correction with an intent left behind; one that cannot be
    recovered now is reported ``failed``, and the others still are. Broken records are
    ``registry.scan``'s to report."""
    done = []
    for c in registry.all_corrections(lake.root):
        if not c.pending:
            continue
        try:
            found = recover(lake, c.id)
        except Exception as exc:
            found = Recovery(c.id, c.pending.get("action", "?"), "failed", str(exc))
        if found is not None:
            done.append(found)
    return done


def settled(lake: Lake, correction_id: str) -> tuple[Correction, Recovery | None]:
    """The record of ``correction_id`` after recovering what was left interrupted, and what
    that recovery did (None: nothing was)."""
    found = recover(lake, correction_id)
    if found is not None and found.result == "in progress":
        raise CorrectionError(
            f"correction {correction_id}: its {found.action} is under way ({found.detail}); "
            "try again when it ends"
        )
    return registry.get(lake.root, correction_id), found


def completed(found: Recovery | None, action: str) -> Outcome | None:
    """The outcome of ``action`` when ``found`` completed that very action, else None."""
    if found is not None and found.action == action and found.result == "completed":
        return found.outcome
    return None


def _running_elsewhere(p: dict) -> bool:
    if p.get("host") != socket.gethostname() or p.get("pid") in (None, os.getpid()):
        return False
    at = dt.datetime.fromisoformat(p["at"])
    if dt.datetime.now(dt.UTC) - at > IN_PROGRESS_AT_MOST:
        return False
    try:
        os.kill(int(p["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _days(c: Correction) -> list[dt.date]:
    return [dt.date.fromisoformat(d) for d in c.pending["days"]]


def _landed(lake: Lake, c: Correction) -> dict[str, int | None]:
    """Per table, the version of the intent's commit, None when it did not land."""
    return {
        path: lake.commit_of_write(path, t["write_id"], after=t["from"])
        for path, t in c.pending["tables"].items()
    }


def _forward(lake: Lake, c: Correction) -> Outcome:
    """Commit every table whose commit has not landed, in order, then save the outcome."""
    p = c.pending
    if p["action"] == "discard":
        deleted = 0
        for table in CORRECTED:
            staged = lake.staged_version(table.path, c.id)
            if staged is not None:
                deleted += lake.discard(staged)
        return _finish(lake, c, {}, deleted)
    landed = _landed(lake, c)
    writes = {}
    for table in CORRECTED:
        version = landed[table.path]
        if version is None:
            writes[table.path] = _commit(lake, c, table.path)
        else:
            writes[table.path] = _landed_write(lake, table.path, version)
    return _finish(lake, c, writes)


def _commit(lake: Lake, c: Correction, path: str) -> WriteResult:
    p, days = c.pending, _days(c)
    commit = commit_info(c, p["action"], p["tables"][path]["write_id"])
    if p["action"] == "cutover":
        staged = lake.staged_version(path, c.id)
        if staged is None:
            raise CorrectionError(f"{path}: the staged version of {c.id} is gone")
        return lake.publish(staged, days, commit, since=p["since"][path])
    changed = lake.changed_since(path, COLUMNS[path], c.cutover["versions"][path], days)
    if changed:
        raise CorrectionError(
            f"{path}: production changed {', '.join(map(str, sorted(changed)))} after the "
            "cutover; rolling back would revert those rebuilds"
        )
    return _restore(lake, c, path, days, c.cutover["versions_before"][path], commit)


def _restore(
    lake: Lake,
    c: Correction,
    path: str,
    days: list[dt.date],
    version: int | None,
    commit: CommitInfo,
) -> WriteResult:
    if version is None:
        raise CorrectionError(
            f"{path} did not exist before the {c.pending['action']} of {c.id}: nothing to "
            "restore it to"
        )
    return lake.restore_partitions(path, COLUMNS[path], days, version, commit)


def _landed_write(lake: Lake, path: str, version: int) -> WriteResult:
    """What an earlier attempt's landed commit did, read back from the log."""
    document = lake.commit_metadata(path, version)
    rows = {dt.date.fromisoformat(d): n for d, n in document.get("rows_by_partition", {}).items()}
    added, _ = commit_file_counts(str(lake.path(path)), version)
    return WriteResult(path, version, rows, added, 1)


def _finish(lake: Lake, c: Correction, writes: dict[str, WriteResult], deleted: int = 0) -> Outcome:
    p, days = c.pending, _days(c)
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
    registry.save(lake.root, c)
    return Outcome(c, days, writes, skipped, deleted)


def _undo(lake: Lake, c: Correction, reason: str) -> Recovery:
    """Restore the days of the tables whose commit landed, under an undo intent of its own."""
    p, days = c.pending, _days(c)
    action = p["action"]
    if "undo" not in p:
        p["undo"] = {
            path: {"write_id": new_write_id(), "landed": version}
            for path, version in _landed(lake, c).items()
            if version is not None
        }
        p["undo_reason"] = reason
        registry.save(lake.root, c)
    restored = []
    for path, u in p["undo"].items():
        version = lake.commit_of_write(path, u["write_id"], after=u["landed"])
        if version is None:
            # Days production rebuilt after the landed commit are production's now.
            rebuilt = lake.changed_since(path, COLUMNS[path], u["landed"], days)
            todo = [d for d in days if d not in rebuilt]
            if todo:
                commit = commit_info(c, f"{action} undone", u["write_id"])
                version = _restore(lake, c, path, todo, p["tables"][path]["from"], commit).version
        else:
            todo = [
                dt.date.fromisoformat(d) for d in lake.commit_metadata(path, version)["partitions"]
            ]
        if version is not None and set(todo) == set(days):
            if not lake.changed_since(path, COLUMNS[path], version, days):
                # The days hold what they held before: the next check starts from here.
                _baseline(c, action)[path] = version
        restored.append(path)
    c.pending = {}
    detail = f"{', '.join(restored)} restored: {reason}"
    c.note(f"{action} undone", detail)
    registry.save(lake.root, c)
    return Recovery(c.id, action, "undone", detail)


def _baseline(c: Correction, action: str) -> dict:
    """The versions the next cutover (or rollback) checks production against."""
    if action == "rollback":
        return c.cutover["versions"]
    return c.rollback["versions"] if c.state == State.ROLLED_BACK else c.diff["versions"]
