"""Recovery of a correction's operation left interrupted (its intent in ``pending``, see
``journal.py``).

``recover`` asks the Delta log which of the intent's commits landed (``commit_carrying``):

- all of them: the operation is done, only its outcome was not saved: save it;
- none: nothing changed: drop the intent (the command may be given again);
- some: complete it, committing the other tables with their recorded write ids (so that no
  recovery ever commits one twice), unless the lake refuses (production changed those days
  since, or a staged version is gone); then undo it: the landed tables' days restored to the
  versions the operation started from, under an undo intent of its own, so the undo recovers
  too. Days production rebuilt after the landed commit are left to production.

A discard is always completed (deleting staged files again is harmless). An intent being
carried out now, by a process on this host or any other, is left to it: its lease is live
(``lease.py``). Past the lease, or once its process is gone from this host, it was interrupted:
recovery takes it over (a compare-and-swap save of the record, so of two recoveries one acts
and the other fails with RecordChanged) and renews the lease before each step, as the
operation did. Every command on a correction recovers it first (``settled``), an operation that
fails recovers at once (``carry_out``), and ``maintain`` recovers them all (``recover_all``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from backfill_assets.corrections import lease, registry
from backfill_assets.corrections.journal import (
    ACTIONS,
    COLUMNS,
    Outcome,
    commit_carrying,
    commit_info,
    days_of,
    forward,
    landed,
    renew,
    restore,
)
from backfill_assets.corrections.registry import Correction, CorrectionError, State
from backfill_assets.lake import Lake, LakeError
from backfill_assets.lake.commit import new_write_id


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


def carry_out(lake: Lake, c: Correction) -> Outcome:
    """Carry out the intent just saved by ``begin``. On any error, recover at once: the
    operation is completed (and its outcome returned) or undone (CorrectionError saying so);
    if even that fails, the intent stays for the next command or ``maintain``."""
    action = c.pending["action"]
    try:
        return forward(lake, c)
    except Exception as exc:
        try:
            done = recover(lake, c.id)
        except Exception as again:
            raise CorrectionError(
                f"{action} of {c.id} stopped ({type(exc).__name__}: {exc}) and recovering it "
                f"failed too ({type(again).__name__}: {again}). Its intent stays recorded in "
                f"{registry.record_path(lake.location, c.id)}: run backfill-assets {action} {c.id} "
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
    c = registry.load(lake.location, correction_id)
    if c is None or not c.pending:
        return None
    p = c.pending
    action = p.get("action")
    if action not in ACTIONS:
        raise CorrectionError(
            f"correction {c.id}: its record names an unknown interrupted operation {action!r}"
        )
    if lease.held_elsewhere(p):
        return Recovery(c.id, action, "in progress", _holder(p))
    renew(lake, c)  # taken over: no other recovery acts on it now
    if "undo" in p:
        return _undo(lake, c, p.get("undo_reason", ""))
    if action == "discard":
        return Recovery(c.id, action, "completed", outcome=forward(lake, c))
    if all(v is None for v in landed(lake, c).values()):
        c.pending = {}
        c.note(f"{action} interrupted", "before any commit landed: nothing changed")
        registry.save(lake.location, c)
        return Recovery(c.id, action, "abandoned", "no commit had landed: nothing changed")
    try:
        outcome = forward(lake, c)
    except (CorrectionError, LakeError) as refused:
        return _undo(lake, c, str(refused))
    done = ", ".join(f"{t} v{w.version}" for t, w in outcome.writes.items())
    return Recovery(c.id, action, "completed", done, outcome)


def recover_all(lake: Lake) -> list[Recovery]:
    """``recover`` every readable correction with an intent left behind; one that cannot be
    recovered now is reported ``failed``, and the others still are. Broken records are
    ``registry.scan``'s to report."""
    done = []
    for c in registry.all_corrections(lake.location):
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
    return registry.get(lake.location, correction_id), found


def completed(found: Recovery | None, action: str) -> Outcome | None:
    """The outcome of ``action`` when ``found`` completed that very action, else None."""
    if found is not None and found.action == action and found.result == "completed":
        return found.outcome
    return None


def _holder(p: dict) -> str:
    where = f" on {p['host']}" if p.get("host") else ""
    until = f", its lease until {p['expires']}" if "expires" in p else ""
    return f"by process {p.get('pid')}{where} since {p['at']}{until}"


def _undo(lake: Lake, c: Correction, reason: str) -> Recovery:
    """Restore the days of the tables whose commit landed, under an undo intent of its own."""
    p, days = c.pending, days_of(c)
    action = p["action"]
    if "undo" not in p:
        p["undo"] = {
            path: {"write_id": new_write_id(), "landed": version}
            for path, version in landed(lake, c).items()
            if version is not None
        }
        p["undo_reason"] = reason
        registry.save(lake.location, c)
    restored = []
    for path, u in p["undo"].items():
        version = commit_carrying(lake, path, u["write_id"], u["landed"])
        if version is None:
            renew(lake, c)
            # Days production rebuilt after the landed commit are production's now.
            rebuilt = lake.changed_since(path, COLUMNS[path], u["landed"], days)
            todo = [d for d in days if d not in rebuilt]
            if todo:
                # saved before the commit: once it landed, log cleanup may delete its file
                u["days"] = [d.isoformat() for d in todo]
                registry.save(lake.location, c)
                commit = commit_info(c, f"{action} undone", u["write_id"])
                version = restore(
                    lake, c, path, todo, p["tables"][path]["from"], commit, since=u["landed"]
                ).version
        else:
            todo = [dt.date.fromisoformat(d) for d in u.get("days", [])]
        if version is not None and set(todo) == set(days):
            if not lake.changed_since(path, COLUMNS[path], version, days):
                # The days hold what they held before: the next check starts from here.
                _baseline(c, action)[path] = version
        restored.append(path)
    c.pending = {}
    detail = f"{', '.join(restored)} restored: {reason}"
    c.note(f"{action} undone", detail)
    registry.save(lake.location, c)
    return Recovery(c.id, action, "undone", detail)


def _baseline(c: Correction, action: str) -> dict:
    """The versions the next cutover (or rollback) checks production against."""
    if action == "rollback":
        return c.cutover["versions"]
    return c.rollback["versions"] if c.state == State.ROLLED_BACK else c.diff["versions"]
