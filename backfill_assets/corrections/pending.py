"""The "correction pending" marker: which assets and partitions a correction not yet cut over
(staged, diffed, or rolled back) will change when it is.

A correction replaces days of staging and the fact; what is built from them changes with them:
the enriched orders of those days, customer LTV from the first of them on (it is cumulative),
and the months they fall in. The marker is shown twice:

- per asset, the ``correction_pending`` check (``defs/corrections/checks.py``): it passes while
  no such correction touches the asset, and otherwise warns, naming each pending correction
  and the partitions it will change, so the asset graph shows a warning on every asset whose
  numbers are about to change. Running the check from the UI evaluates it the same way;
- per partition, an observation with ``correction_pending`` in its metadata (the ids of the
  pending corrections that will change the partition, or ``none``), on each partition the
  correction changes: its days, its months, and customer LTV's materialized days from its
  first day on. A partition's Events page shows whether its numbers are about to change.

The lifecycle reports both after each of a correction's steps (``events.report_state``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass

import dagster as dg

from backfill_assets.asset_events.event_times import report_runless
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


def _day_keys(days: list[dt.date], materialized: Collection[str]) -> list[str]:
    return [d.isoformat() for d in days]


def _onward_keys(days: list[dt.date], materialized: Collection[str]) -> list[str]:
    """Cumulative: every day from the first on, of those built (the others hold nothing yet)."""
    return sorted(k for k in materialized if k >= days[0].isoformat())


def _month_keys(days: list[dt.date], materialized: Collection[str]) -> list[str]:
    return sorted({d.replace(day=1).isoformat() for d in days})


@dataclass(frozen=True)
class Marking:
    """How an asset names the partitions a correction of ``days`` changes (``names``), and
    their keys, given the asset's materialized partitions (``keys``)."""

    names: Callable[[list[dt.date]], str]
    keys: Callable[[list[dt.date], Collection[str]], list[str]]


MARKED: dict[dg.AssetKey, Marking] = {
    STG_ORDERS: Marking(_days, _day_keys),
    FCT_DAILY_REVENUE: Marking(_days, _day_keys),
    STG_ORDERS_ENRICHED: Marking(_days, _day_keys),
    FCT_CUSTOMER_LTV: Marking(_onward, _onward_keys),
    RPT_MONTHLY_REVENUE: Marking(_months, _month_keys),
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
                + "; ".join(marking.names(days_of(c)) for c in waiting)
            ),
            metadata={
                "pending_corrections": ", ".join(c.id for c in waiting) or "none",
                **{
                    f"correction {c.id}": f"{c.state}; {marking.names(days_of(c))}; {c.reason}"
                    for c in waiting
                },
            },
        )
        for asset, marking in MARKED.items()
    ]


def partition_marks(
    corrections: Iterable[Correction],
    changed: Correction,
    materialized: Mapping[dg.AssetKey, Collection[str]],
) -> list[dg.AssetObservation]:
    """The marker of each partition that ``changed`` changes, on each marked asset: the pending
    corrections (``changed`` among them or not, as its state says) that will change it, or
    none. ``materialized``: each asset's materialized partitions."""
    days = days_of(changed)
    if not days:
        return []
    waiting = pending(corrections)
    marks = []
    for asset, marking in MARKED.items():
        built = materialized.get(asset, ())
        touching = [(c, set(marking.keys(days_of(c), built))) for c in waiting]
        for key in marking.keys(days, built):
            here = [c for c, keys in touching if key in keys]
            marks.append(
                dg.AssetObservation(
                    asset_key=asset,
                    partition=key,
                    description=(
                        f"correction pending: {', '.join(c.id for c in here)} will change "
                        "this partition"
                        if here
                        else f"no correction pending ({changed.id} {changed.state})"
                    ),
                    metadata={
                        "correction_pending": ", ".join(c.id for c in here) or "none",
                        **{f"correction {c.id}": f"{c.state}; {c.reason}" for c in here},
                    },
                )
            )
    return marks


def report(instance: dg.DagsterInstance, lake_root: LakeRoot, changed: Correction) -> None:
    """Every marked asset's check as the lake's corrections make it now, and the marker of
    each partition ``changed`` changes."""
    corrections = all_corrections(lake_root)
    for evaluation in evaluations(corrections):
        report_runless(instance, evaluation)
    materialized = {FCT_CUSTOMER_LTV: instance.get_materialized_partitions(FCT_CUSTOMER_LTV)}
    for mark in partition_marks(corrections, changed, materialized):
        report_runless(instance, mark)
