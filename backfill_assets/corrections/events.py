"""What Dagster records of a correction, so the UI agrees with the lake.

- ``diff``: an observation of the fact per day (revenue before and after, and the change in %:
  the asset's Plots tab draws them per day) and one with the whole report as markdown.
- ``cutover`` / ``rollback``: a materialization of exactly the partitions committed, per
  asset, with the Delta version, so Dagster's partition status follows the lake; and with the
  table's described columns, as a production write records them, since the asset page shows
  the columns of its latest materialization.
- after each of a correction's steps (built, diffed, cut over, rolled back, discarded,
  decommissioned): an observation of its partition of the ``corrections`` asset (one dynamic
  partition per id), with its state, who made it, when, why, its range and its diff's report,
  so the asset's partitions list every correction with its latest state; and the
  ``correction_pending`` check of each asset a correction changes, and the marker of each
  partition this one changes (``pending.py``).
"""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import dagster as dg

from backfill_assets.asset_events.event_times import report_runless
from backfill_assets.asset_events.fact_metadata import fact_metadata
from backfill_assets.asset_events.lineage import write_metadata
from backfill_assets.catalog import (
    ASSET_TABLES,
    CORRECTIONS,
    CORRECTIONS_PARTITIONS,
    FACT_TABLE,
    FCT_DAILY_REVENUE,
)
from backfill_assets.corrections import pending
from backfill_assets.corrections.diff import Diff
from backfill_assets.corrections.lifecycle import Outcome
from backfill_assets.corrections.registry import Correction, LakeRoot, load_report
from backfill_assets.transforms.columns import DESCRIPTIONS

ASSET_OF_TABLE = {tables[0].path: key for key, tables in ASSET_TABLES.items()}


def report_diff(instance: dg.DagsterInstance, diff: Diff, markdown: str) -> None:
    cid = diff.correction.id
    for d in diff.days:
        report_runless(
            instance,
            dg.AssetObservation(
                asset_key=FCT_DAILY_REVENUE,
                partition=d.day.isoformat(),
                metadata={
                    "correction": cid,
                    "revenue_usd_before": float(d.fact_before["revenue_usd"]),
                    "revenue_usd_after": float(d.fact_after["revenue_usd"]),
                    "revenue_change_pct": dg.MetadataValue.float(
                        d.revenue_pct if d.revenue_pct is not None else float("nan")
                    ),
                    "orders_before": d.fact_before["orders"],
                    "orders_after": d.fact_after["orders"],
                },
            ),
        )
    report_runless(
        instance,
        dg.AssetObservation(
            asset_key=FCT_DAILY_REVENUE,
            metadata={"correction": cid, "correction_report": dg.MetadataValue.md(markdown)},
        ),
    )


def report_commits(instance: dg.DagsterInstance, outcome: Outcome, action: str) -> None:
    c, fact = outcome.correction, FACT_TABLE.path
    for table, write in outcome.writes.items():
        for day in outcome.days:
            report_runless(
                instance,
                dg.AssetMaterialization(
                    asset_key=ASSET_OF_TABLE[table],
                    partition=day.isoformat(),
                    metadata={
                        **write_metadata(write, day, {}, DESCRIPTIONS[table][0]),
                        **(fact_figures(c, action, day, write.version) if table == fact else {}),
                        "correction": c.id,
                        "correction_action": action,
                        "reason": c.reason,
                    },
                ),
            )


def fact_figures(c: Correction, action: str, day: date, version: int) -> dict:
    """The fact's figures of ``day`` as a cutover or rollback at ``version`` left them, and their
    change against the version it replaced, as a production write of the fact records them (the
    asset's page and Plots tab): a cutover publishes what the diff saw after, a rollback puts back
    what it saw before (both refuse when production changed since)."""
    seen = c.diff.get("days", {}).get(day.isoformat()) if c.diff else None
    if seen is None or "orders_after" not in seen:  # diffed before the record kept them
        return {}
    now, then = ("after", "before") if action == "cutover" else ("before", "after")

    def totals(side: str) -> dict:
        return {
            "orders": seen[f"orders_{side}"],
            "paid_orders": seen[f"paid_orders_{side}"],
            "revenue_usd": Decimal(seen[f"revenue_{side}"]),
        }

    return fact_metadata(totals(now), totals(then), version - 1)


def report_state(instance: dg.DagsterInstance, lake_root: LakeRoot, c: Correction) -> None:
    """The correction's partition of the ``corrections`` asset, observed with its record now;
    then the ``correction_pending`` check of every asset a correction changes, and the marker
    of each partition this one changes."""
    if not instance.has_dynamic_partition(CORRECTIONS_PARTITIONS, c.id):
        instance.add_dynamic_partitions(CORRECTIONS_PARTITIONS, [c.id])
    last = c.history[-1] if c.history else {}
    ready = {d for t in c.tables.values() for d in t.ready_days()}
    held = sorted({d for t in c.tables.values() for d in t.held})
    report_runless(
        instance,
        dg.AssetObservation(
            asset_key=CORRECTIONS,
            partition=c.id,
            metadata={
                "state": c.state,
                "reason": c.reason,
                "created_by": c.created_by,
                "created_at": c.created_at,
                "range": f"{c.start}..{c.end}",
                "code_version": c.code_version,
                "staged_days": len(ready),
                "held_days": ", ".join(held) or "none",
                "last_action": f"{last.get('action', '')} {last.get('at', '')}".strip(),
                "interrupted": c.pending.get("action", "") if c.pending else "",
                # the diff's report, so that it opens from the correction itself
                "report": dg.MetadataValue.md(
                    load_report(lake_root, c.id) or "No diff yet: run correction_diff_job."
                ),
            },
        ),
    )
    pending.report(instance, lake_root, c)
