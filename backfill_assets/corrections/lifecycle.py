"""Cutover, rollback, discard and decommission of a correction: each a metadata change.

- ``cutover``: one commit per table, staging before fact, publishing the correction's
  passing days: exactly the staged files its diff compared (nothing copied on delta-rs).
  Refused when production changed those days after the diff, when the correction holds other
  files for them than the diff compared (a rebuild kept since: diff again), when a day's
  revenue moves more than the guardrail allows (unless forced), or when the live lane rebuilt
  a day after the correction was staged (unless those days are skipped). The file set is
  checked again inside each table's publish, against the manifest it claims.
- ``rollback``: one commit per table pointing exactly the cut-over days back at their
  pre-cutover files. Refused when production changed them after the cutover.
- ``discard`` drops the correction's staged files; ``decommission`` does it for every
  correction older than the retention, after which a rollback is a clear error.

Each records its intent in the correction's record before its first effect and recovers
when interrupted (``journal.py``): if the fact's commit fails after staging's, the cutover is
completed, or staging is put back, so the two never disagree for longer than one command.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from backfill_assets.catalog import STAGING_TABLE
from backfill_assets.corrections import journal, recovery, registry
from backfill_assets.corrections.diff import CORRECTED, file_set, files_since_diff, ready_days
from backfill_assets.corrections.journal import Outcome
from backfill_assets.corrections.recovery import Recovery, recover, recover_all
from backfill_assets.corrections.registry import Correction, CorrectionError, State
from backfill_assets.lake import Lake, LakeTableMissing, StagedVersion, durable

__all__ = [
    "DEFAULT_MAX_REVENUE_CHANGE_PCT",
    "Outcome",
    "Recovery",
    "cutover",
    "decommission",
    "discard",
    "guardrail_breaches",
    "recover",
    "recover_all",
    "rollback",
]

DEFAULT_MAX_REVENUE_CHANGE_PCT = 10.0


def _dates(texts: Iterable[str]) -> list[dt.date]:
    return sorted(dt.date.fromisoformat(t) for t in texts)


def require_production(lake: Lake, start: dt.date, end: dt.date) -> None:
    """CorrectionError unless production has published staging for at least one day of
    ``start .. end``: a correction rebuilds published history; a range never built is a
    backfill's to build."""
    try:
        counts = lake.row_counts(STAGING_TABLE.path, STAGING_TABLE.partition_column)
    except LakeTableMissing:
        counts = {}
    if not any(start <= day <= end and rows > 0 for day, rows in counts.items()):
        raise CorrectionError(
            f"production has no published {STAGING_TABLE.path} day in {start}..{end}: nothing "
            "to correct there (a backfill builds a range never published)"
        )


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
    c, found = recovery.settled(lake, correction_id)
    if (done := recovery.completed(found, "cutover")) is not None:
        return done  # this very cutover, interrupted: now completed
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
            "check the diff, then force it (--force; the cutover job's force) if that is the "
            "intended correction"
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
    staged = _staged_versions(lake, c)  # both open, checked before anything is published
    journal.begin(
        lake,
        c,
        "cutover",
        days,
        since=since,
        skipped_rebuilt=[d.isoformat() for d in rebuilt],
        files=_diffed_files(c, staged, days),
    )
    return recovery.carry_out(lake, c)


def _diffed_files(c: Correction, staged: dict[str, StagedVersion], days: list[dt.date]) -> dict:
    """Per table, the staged files of ``days`` the diff compared, which the cutover publishes;
    CorrectionError when the staged versions hold others now (a rebuild kept after the diff), or
    when the diff recorded none (a diff made before file sets were recorded)."""
    if "files" not in c.diff:
        raise CorrectionError(
            f"refusing: the diff of correction {c.id} recorded no file set (it predates them), so "
            f"what it compared is unknown: run backfill-assets diff {c.id} again"
        )
    changed = {}
    for path, version in staged.items():
        moved = files_since_diff(c, version, days)
        if moved:
            changed[path] = moved
    if changed:
        raise CorrectionError(
            f"refusing: correction {c.id} was rebuilt since the diff ({_listing(changed)} hold "
            f"other files than the diff compared): run backfill-assets diff {c.id} again"
        )
    return {
        path: sorted(p for paths in file_set(version, days).values() for p in paths)
        for path, version in staged.items()
    }


def _staged_versions(lake: Lake, c: Correction) -> dict[str, StagedVersion]:
    """Every corrected table's open staged version of ``c``, checked before anything is
    published: a missing one (discarded, or expired by maintain) publishes neither table."""
    staged = {t.path: lake.staging.version(t.path, c.id) for t in CORRECTED}
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


def rollback(lake: Lake, correction_id: str) -> Outcome:
    c, found = recovery.settled(lake, correction_id)
    if (done := recovery.completed(found, "rollback")) is not None:
        return done
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
    moved = {}
    for table in CORRECTED:
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
    journal.begin(lake, c, "rollback", days)
    return recovery.carry_out(lake, c)


def discard(lake: Lake, correction_id: str, state: str = State.DISCARDED) -> int:
    """Drop the correction's staged files (published ones stay: they are production's now)."""
    c, found = recovery.settled(lake, correction_id)
    if (done := recovery.completed(found, "discard")) is not None and c.state == state:
        return done.deleted
    if c.state in State.CLOSED:
        raise CorrectionError(f"correction {c.id} is already {c.state}")
    journal.begin(lake, c, "discard", [], state=state)
    return recovery.carry_out(lake, c).deleted


def decommission(lake: Lake, retention_days: float, now: dt.datetime | None = None) -> list[str]:
    """Close every open correction created more than ``retention_days`` ago; their ids. The
    temporary records killed commands left as old go too (``durable``)."""
    now = now or dt.datetime.now(dt.UTC)
    closed = []
    for found in registry.all_corrections(lake.location):
        try:
            c, _ = recovery.settled(lake, found.id)  # an interrupted discard may close it
        except CorrectionError:
            continue  # under way in another process, or not recoverable now: maintain says so
        if c.state in State.CLOSED:
            continue
        if now - dt.datetime.fromisoformat(c.created_at) > dt.timedelta(days=retention_days):
            discard(lake, c.id, State.DECOMMISSIONED)
            closed.append(c.id)
    durable.remove_dead_temporaries(registry.folder(lake.location), retention_days * 24 * 3600)
    return closed


def _listing(by_table: dict[str, list[dt.date]]) -> str:
    return "; ".join(f"{t}: {', '.join(map(str, days))}" for t, days in by_table.items())


def _last(c: Correction, action: str) -> str:
    at = [h["at"] for h in c.history if h["action"] == action]
    return at[-1] if at else "earlier"
