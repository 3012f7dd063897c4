"""What a built correction's commands do (diff, cutover, rollback, discard): one implementation
for the command line (``cli/corrections.py``) and the Dagster jobs (``defs/corrections``).

Each first recovers an operation of the correction left interrupted (``recovery.py``), then
applies the lifecycle with its guardrails (``lifecycle.py``), and records the commits of a
cutover or rollback in Dagster (``events.py``). A refusal is a ``CorrectionError`` saying why,
raised before anything is changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import dagster as dg

from backfill_assets.corrections import diff as diffing
from backfill_assets.corrections import events, lifecycle, recovery, registry
from backfill_assets.corrections import report as reporting
from backfill_assets.lake import Lake


@dataclass(frozen=True)
class Diffed:
    """A diff's result, its markdown report and where the report was written."""

    result: diffing.Diff
    markdown: str
    report_path: str


def recover(
    lake: Lake, instance: dg.DagsterInstance, correction_id: str
) -> recovery.Recovery | None:
    """Complete or undo what the correction left interrupted (``record_recovered``)."""
    found = recovery.recover(lake, correction_id)
    if found is not None:
        record_recovered(instance, lake.location, found)
    return found


def record_recovered(
    instance: dg.DagsterInstance, lake_root: registry.LakeRoot, found: recovery.Recovery
) -> None:
    """A recovery recorded in Dagster as the command itself would have recorded it: the
    correction's state, then the commits of a cutover or rollback it completed."""
    events.report_state(instance, lake_root, registry.get(lake_root, found.correction_id))
    if found.outcome is not None and found.action in ("cutover", "rollback"):
        events.report_commits(instance, found.outcome, found.action)


def diff(
    lake: Lake, instance: dg.DagsterInstance, correction_id: str, report_path: str | None = None
) -> Diffed:
    """The correction against production, per day and table, saved in its record (``diffed``),
    its report written (beside the record by default) and shown in Dagster."""
    result = diffing.compute(lake, registry.get(lake.location, correction_id))
    diffing.record(lake, result)
    markdown = reporting.render(result)
    path = report_path or registry.report_path(lake.location, correction_id)
    registry.save_report(path, markdown)
    events.report_diff(instance, result, markdown)
    events.report_state(instance, lake.location, registry.get(lake.location, correction_id))
    return Diffed(result, markdown, path)


def cutover(
    lake: Lake,
    instance: dg.DagsterInstance,
    correction_id: str,
    max_pct: float = lifecycle.DEFAULT_MAX_REVENUE_CHANGE_PCT,
    force: bool = False,
    skip_rebuilt: bool = False,
    found: recovery.Recovery | None = None,
) -> lifecycle.Outcome:
    """Publish the diffed correction (or what the recovery ``found`` already completed)."""
    return _committed(
        lake,
        instance,
        found,
        "cutover",
        lambda: lifecycle.cutover(lake, correction_id, max_pct, force, skip_rebuilt),
    )


def rollback(
    lake: Lake,
    instance: dg.DagsterInstance,
    correction_id: str,
    found: recovery.Recovery | None = None,
) -> lifecycle.Outcome:
    """Put the cut-over partitions back as they were."""
    return _committed(
        lake, instance, found, "rollback", lambda: lifecycle.rollback(lake, correction_id)
    )


def _committed(
    lake: Lake,
    instance: dg.DagsterInstance,
    found: recovery.Recovery | None,
    action: str,
    commit: Callable[[], lifecycle.Outcome],
) -> lifecycle.Outcome:
    """What the recovery ``found`` completed of ``action``, else ``commit``'s outcome with its
    commits recorded; the correction's state observed either way, first, so that a committed
    partition's latest event is its materialization, with the figures."""
    outcome = recovery.completed(found, action)
    committed = outcome is None
    if outcome is None:
        outcome = commit()
    events.report_state(instance, lake.location, outcome.correction)
    if committed:
        events.report_commits(instance, outcome, action)
    return outcome


def discard(
    lake: Lake,
    instance: dg.DagsterInstance,
    correction_id: str,
    found: recovery.Recovery | None = None,
) -> int:
    """Drop the correction's staged files; how many were deleted."""
    outcome = recovery.completed(found, "discard")
    deleted = outcome.deleted if outcome is not None else lifecycle.discard(lake, correction_id)
    events.report_state(instance, lake.location, registry.get(lake.location, correction_id))
    return deleted


def decommission(lake: Lake, instance: dg.DagsterInstance, retention_days: float) -> list[str]:
    """Close the corrections older than the retention (``lifecycle.decommission``); their ids."""
    closed = lifecycle.decommission(lake, retention_days)
    for cid in closed:
        events.report_state(instance, lake.location, registry.get(lake.location, cid))
    return closed


def cutover_summary(correction_id: str, outcome: lifecycle.Outcome, action: str) -> str:
    """One line: what a cutover or rollback committed."""
    tables = ", ".join(f"{t} v{w.version}" for t, w in outcome.writes.items())
    return f"correction {correction_id} {action}: {len(outcome.days)} day(s), {tables}"
