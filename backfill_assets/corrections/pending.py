"""The "correction pending" marker: which assets and partitions a correction not yet cut over
(staged, diffed, or rolled back) will change when it is.

A correction replaces days of staging and the fact; what is built from them changes with them:
the enriched orders of those days, customer LTV from the first of them on (it is cumulative),
and the months they fall in. Each of these assets has a ``correction_pending`` check
(``defs/corrections/checks.py``). It passes while no such correction touches the asset, and
otherwise warns, naming each pending correction and the partitions it will change, so the
asset graph shows a warning on every asset whose numbers are about to change. The lifecycle
reports it after each of a correction's steps (``events.report_state``). Running the check
from the UI evaluates it the same way.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable

import dagster as dg

from backfill_assets.catalog import (
    FCT_CUSTOMER_LTV,
    FCT_DAILY_REVENUE,
    RPT_MONTHLY_REVENUE,
    STG_ORDERS,
    STG_ORDERS_ENRICHED,
)
from backfill_assets.corrections.registry import Correction, LakeRoot, State, all_corrections

CHECK = "correction_pending"
PENDING_STATES = (State.STAGED, State.DIFFED, State.ROLLED_BACK)


def _days(days: list[dt.date]) -> str:
    """Days as runs of consecutive days: ``2024-01-02..2024-01-04, 2024-01-09``."""
    spans: list[list[dt.date]] = []
    for d in days:
        if spans and d - spans[-1][1] == dt.timedelta(days=1):
            spans[-1][1] = d
        else:
            spans.append([d, d])
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in spans)


def _onward(days: list[dt.date]) -> str:
    return f"{days[0]} onward"


def _months(days: list[dt.date]) -> str:
    return ", ".join(sorted({f"{d:%Y-%m}" for d in days}))


# Each marked asset, and how it names the partitions a correction of ``days`` changes.
MARKED: dict[dg.AssetKey, Callable[[list[dt.date]], str]] = {
    STG_ORDERS: _days,
    FCT_DAILY_REVENUE: _days,
    STG_ORDERS_ENRICHED: _days,
    FCT_CUSTOMER_LTV: _onward,
    RPT_MONTHLY_REVENUE: _months,
}
CHECK_KEYS = tuple(dg.AssetCheckKey(asset, CHECK) for asset in MARKED)


def days_of(c: Correction) -> list[dt.date]:
    """The days a cutover of ``c`` would publish: staged and passing every check."""
    return sorted({d for t in c.tables.values() for d in t.ready_days()})


def pending(corrections: Iterable[Correction]) -> list[Correction]:
    return [c for c in corrections if c.state in PENDING_STATES and days_of(c)]


def evaluations(corrections: Iterable[Correction]) -> list[dg.AssetCheckEvaluation]:
    """Each marked asset's check: passed, or a warning naming each pending correction."""
    waiting = pending(corrections)
    return [
        dg.AssetCheckEvaluation(
            asset_key=asset,
            check_name=CHECK,
            passed=not waiting,
            severity=dg.AssetCheckSeverity.WARN,
            description=(
                "no correction pending"
                if not waiting
                else f"correction pending: {', '.join(c.id for c in waiting)} will change "
                + "; ".join(partitions(days_of(c)) for c in waiting)
            ),
            metadata={
                "pending_corrections": ", ".join(c.id for c in waiting) or "none",
                **{
                    f"correction {c.id}": f"{c.state}; {partitions(days_of(c))}; {c.reason}"
                    for c in waiting
                },
            },
        )
        for asset, partitions in MARKED.items()
    ]


def report(instance: dg.DagsterInstance, lake_root: LakeRoot) -> None:
    """Every marked asset's check as the lake's corrections make it now."""
    for evaluation in evaluations(all_corrections(lake_root)):
        instance.report_runless_asset_event(evaluation)
