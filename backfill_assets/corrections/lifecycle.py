"""Cutover, rollback, discard and decommission of a correction: each a metadata change.

- ``cutover``: one commit per table, staging before fact, publishing the correction's
  passing days (the staged files themselves; nothing copied on delta-rs). Refused when
  production changed those days after the diff, when a day's revenue moves more than the
  guardrail allows (unless forced), or when the live lane rebuilt a day after the
  correction was staged (unless those days are skipped). If the fact's commit fails after
  staging's, staging is put back, so the two never disagree.
- ``rollback``: one commit per table pointing exactly the cut-over days back at their
  pre-cutover files. Refused when production changed them after the cutover.
- ``discard`` drops the correction's staged files; ``decommission`` does it for every
  correction older than the retention, after which a rollback is a clear error.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from backfill_assets.corrections import registry
from backfill_assets.corrections.diff import CORRECTED, ready_days
from backfill_assets.corrections.registry import Correction, CorrectionError, State
from backfill_assets.lake import CommitInfo, Lake, StagedVersion, WriteResult

DEFAULT_MAX_REVENUE_CHANGE_PCT = 10.0


@dataclass
class Outcome:
    """What a cutover or rollback committed: per table, the commit; and the days it covered."""

    correction: Correction
    days: list[dt.date]
    writes: dict[str, WriteResult]
    skipped: list[dt.date]


def _commit(correction: Correction, action: str) -> CommitInfo:
    inputs: dict[str, int] = {}
    for run in correction.runs:
        for table, version in run["input_versions"].items():
            inputs[table] = max(inputs.get(table, version), version)
    return CommitInfo(
        run_id=f"correction:{correction.id}",
        code_version=correction.code_version,
        input_versions=inputs,
        extra={
            "correction": correction.id,
            "action": action,
            "by": registry.user(),
            "reason": correction.reason,
        },
    )


def _dates(texts: Iterable[str]) -> list[dt.date]:
    return sorted(dt.date.fromisoformat(t) for t in texts)


def guardrail_breaches(correction: Correction, max_pct: float) -> dict[str, float | None]:
    """Diffed days whose revenue moves more than ``max_pct`` % (None: from zero to something)."""
    return {
        day: d["revenue_pct"]
        for day, d in correction.diff.get("days", {}).items()
        if d["revenue_pct"] is None or abs(d["revenue_pct"]) > max_pct
    }


def cutover(
    lake: Lake,
    correction_id: str,
    max_revenue_change_pct: float = DEFAULT_MAX_REVENUE_CHANGE_PCT,
    force: bool = False,
    skip_rebuilt: bool = False,
) -> Outcome:
    c = registry.get(lake.root, correction_id)
    if c.state == State.STAGED:
        raise CorrectionError(
            f"correction {c.id} has not been diffed: run backfill-assets diff {c.id} first"
        )
    if c.state != State.DIFFED and c.state != State.ROLLED_BACK:
        raise CorrectionError(f"correction {c.id} is {c.state}: nothing to cut over")
    days = [d for d in ready_days(c) if d.isoformat() in c.diff["days"]]
    if not days:
        raise CorrectionError(f"correction {c.id} has no diffed day that passed its checks")
    breaches = guardrail_breaches(c, max_revenue_change_pct)
    if breaches and not force:
        shown = ", ".join(
            f"{d} ({'new' if p is None else f'{p:+.2f}%'})" for d, p in sorted(breaches.items())
        )
        raise CorrectionError(
            f"refusing: revenue moves more than {max_revenue_change_pct}% on {shown}; "
            "check the diff, then pass --force if that is the intended correction"
        )
    since = dict(c.rollback["versions"] if c.state == State.ROLLED_BACK else c.diff["versions"])
    moved = {}
    for table in CORRECTED:
        changed = lake.changed_since(table.path, table.partition_column, since[table.path], days)
        if changed:
            moved[table.path] = sorted(changed)
    if moved:
        raise CorrectionError(
            f"refusing: production changed since the diff: {_listing(moved)}; "
            f"run backfill-assets diff {c.id} again"
        )
    rebuilt = sorted({d for days_ in c.diff.get("rebuilt", {}).values() for d in _dates(days_)})
    if rebuilt and not skip_rebuilt:
        raise CorrectionError(
            f"refusing: production rebuilt {', '.join(map(str, rebuilt))} after the correction was "
            "staged (the live lane ran meanwhile); pass --skip-rebuilt to leave those days to "
            "production, or discard and correct again"
        )
    days = [d for d in days if d not in set(rebuilt)]
    if not days:
        raise CorrectionError(f"correction {c.id}: every diffed day was rebuilt in production")
    staged = _staged_versions(lake, c)
    before = {t.path: lake.version(t.path) for t in CORRECTED}
    writes: dict[str, WriteResult] = {}
    commit = _commit(c, "cutover")
    try:
        for table in CORRECTED:
            writes[table.path] = lake.publish(
                staged[table.path], days, commit, since=since[table.path]
            )
    except Exception:
        if writes:  # staging is published, the fact is not: put staging back
            _restore(lake, c, list(writes), days, before, _commit(c, "cutover undone"))
        raise
    c.cutover = {
        "at": registry.now(),
        "days": [d.isoformat() for d in days],
        "versions_before": before,
        "versions": {t: w.version for t, w in writes.items()},
        "skipped_rebuilt": [d.isoformat() for d in rebuilt],
    }
    c.rollback = {}
    c.state = State.CUT_OVER
    c.note(
        "cut over",
        f"{len(days)} day(s): " + ", ".join(f"{t} v{w.version}" for t, w in writes.items()),
    )
    registry.save(lake.root, c)
    return Outcome(c, days, writes, rebuilt)


def _staged_versions(lake: Lake, c: Correction) -> dict[str, StagedVersion]:
    """Every corrected table's open staged version of ``c``, checked before anything is
    published: a missing one (discarded, or expired by maintain) publishes neither table."""
    staged = {t.path: lake.staged_version(t.path, c.id) for t in CORRECTED}
    found = {path: s for path, s in staged.items() if s is not None}
    gone = [path for path in staged if path not in found]
    if gone:
        raise CorrectionError(
            f"correction {c.id} has no staged version of {', '.join(gone)} any more (discarded "
            "or expired by maintain after the retention): nothing to cut over. Run backfill-assets "
            f"correct again for {c.start}..{c.end}, then diff and cut over the new correction; "
            f"backfill-assets discard {c.id} closes this one"
        )
    return found


def _restore(
    lake: Lake,
    c: Correction,
    tables: list[str],
    days: list[dt.date],
    versions: Mapping[str, int | None],
    commit: CommitInfo,
) -> dict[str, WriteResult]:
    by_path = {t.path: t for t in CORRECTED}
    writes = {}
    for path in tables:
        version = versions[path]
        if version is None:
            raise CorrectionError(
                f"{path} did not exist before the cutover of {c.id}: nothing to restore"
            )
        table = by_path[path]
        writes[path] = lake.restore_partitions(path, table.partition_column, days, version, commit)
    return writes


def rollback(lake: Lake, correction_id: str) -> Outcome:
    c = registry.get(lake.root, correction_id)
    if c.state == State.DECOMMISSIONED:
        raise CorrectionError(
            f"correction {c.id} was decommissioned ({_last(c, 'decommissioned')}) after the "
            "retention "
            "window (BACKFILL_RETENTION_DAYS): its pre-cutover files may be vacuumed, so it cannot "
            "be rolled back. Correct the range again instead"
        )
    if c.state != State.CUT_OVER:
        raise CorrectionError(
            f"correction {c.id} is {c.state}: only a cut-over correction rolls back"
        )
    days = _dates(c.cutover["days"])
    done = c.rollback.get("versions", {})
    moved = {}
    for table in CORRECTED:
        if table.path in done:
            continue
        changed = lake.changed_since(
            table.path, table.partition_column, c.cutover["versions"][table.path], days
        )
        if changed:
            moved[table.path] = sorted(changed)
    if moved:
        raise CorrectionError(
            f"refusing: production changed after the cutover: {_listing(moved)}; "
            "rolling back would revert those rebuilds"
        )
    writes = {}
    for table in CORRECTED:
        if table.path in done:
            continue
        writes.update(
            _restore(
                lake, c, [table.path], days, c.cutover["versions_before"], _commit(c, "rollback")
            )
        )
        done[table.path] = writes[table.path].version
        c.rollback = {"at": registry.now(), "versions": done}
        registry.save(lake.root, c)  # a rollback stopped half-way resumes with the other table
    c.state = State.ROLLED_BACK
    c.note("rolled back", ", ".join(f"{t} v{v}" for t, v in done.items()))
    registry.save(lake.root, c)
    return Outcome(c, days, writes, [])


def discard(lake: Lake, correction_id: str, state: str = State.DISCARDED) -> int:
    """Drop the correction's staged files (published ones stay: they are production's now)."""
    c = registry.get(lake.root, correction_id)
    if c.state in State.CLOSED:
        raise CorrectionError(f"correction {c.id} is already {c.state}")
    deleted = 0
    for table in CORRECTED:
        staged = lake.staged_version(table.path, c.id)
        if staged is not None:
            deleted += lake.discard(staged)
    c.state = state
    c.note(state, f"{deleted} staged file(s) deleted")
    registry.save(lake.root, c)
    return deleted


def decommission(lake: Lake, retention_days: float, now: dt.datetime | None = None) -> list[str]:
    """Close every open correction created more than ``retention_days`` ago; their ids."""
    now = now or dt.datetime.now(dt.UTC)
    closed = []
    for c in registry.all_corrections(lake.root):
        if c.state in State.CLOSED:
            continue
        if now - dt.datetime.fromisoformat(c.created_at) > dt.timedelta(days=retention_days):
            discard(lake, c.id, State.DECOMMISSIONED)
            closed.append(c.id)
    return closed


def _listing(by_table: dict[str, list[dt.date]]) -> str:
    return "; ".join(f"{t}: {', '.join(map(str, days))}" for t, days in by_table.items())


def _last(c: Correction, action: str) -> str:
    at = [h["at"] for h in c.history if h["action"] == action]
    return at[-1] if at else "earlier"
