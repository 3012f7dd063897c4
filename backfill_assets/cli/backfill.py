"""A backfill of an event-date range: its runs, in layer order, with progress on the terminal."""

from __future__ import annotations

import sys
import time
from datetime import date
from signal import SIGINT
from typing import TYPE_CHECKING

from backfill_assets import signals
from backfill_assets.catalog import (
    CLI_TAG,
    PLAN_TAG,
)
from backfill_assets.cli.instance import ensure_dagster_home
from backfill_assets.settings import Settings

if TYPE_CHECKING:
    from dagster import DagsterInstance

    from backfill_assets.backfill_plan import RunPlan
    from backfill_assets.cli.runner import RunOutcome


class PlanStopped(Exception):
    """A SIGINT or SIGTERM stopped a backfill's plan: no later run of it was started."""

    def __init__(self, signum: int, plans: list[RunPlan], outcomes: list[RunOutcome]) -> None:
        self.signum, self.plans, self.outcomes = signum, plans, outcomes
        super().__init__(stop_summary(signum, plans, outcomes))


def stop_summary(signum: int, plans: list[RunPlan], outcomes: list[RunOutcome]) -> str:
    """One line: the partitions the plan's runs published before the stop, those they did
    not, and how to resume."""
    from backfill_assets.late_data import day_ranges

    published: dict[str, set[date]] = {}
    for outcome in outcomes:
        for key, days in outcome.published.items():
            published.setdefault(key.to_user_string(), set()).update(days)
    left: dict[str, set[date]] = {}
    for plan in plans:
        for key in plan.assets:
            name = key.to_user_string()
            left.setdefault(name, set()).update(set(plan.days) - published.get(name, set()))

    def spans(by_asset: dict[str, set[date]]) -> str:
        parts = [
            f"{name} " + ",".join(str(a) if a == b else f"{a}..{b}" for a, b in day_ranges(days))
            for name, days in by_asset.items()
            if days
        ]
        return "; ".join(parts) or "none"

    return (
        f"stopped by {signals.signal_name(signum)}, no later run started. "
        f"Published before the stop: {spans(published)}. Not published: {spans(left)}. "
        "To resume, run the same command again: a published day is rebuilt to the same rows."
    )


def run_backfill(
    settings: Settings, start: date, end: date, allow_empty_overwrite: bool = False
) -> int:
    """Every run of a backfill of [start, end]; ValueError, with no run launched, while the runs
    would lack what they need (``preflight.py``)."""
    from backfill_assets.backfill_plan import check_range
    from backfill_assets.cli.outcome_table import report_outcomes
    from backfill_assets.cli.preflight import check_run_needs

    check_range(settings, start, end)
    check_run_needs(settings)
    outcomes = run_plans(settings, start, end, allow_empty_overwrite, tags={CLI_TAG: "backfill"})
    if outcomes is None:
        return 1
    report_left_for_late_data_lane(settings)
    return report_outcomes(outcomes)


def report_left_for_late_data_lane(settings: Settings) -> None:
    """Names the event days outside the range whose raw window the backfill (or another run)
    built after their last staging attempt: the late-data lane rebuilds them, not the backfill,
    which stays within the days it was asked for (its exit code speaks for those)."""
    import dagster as dg

    from backfill_assets.automation.stale_days import find_stale_days
    from backfill_assets.late_data import day_ranges

    with dg.DagsterInstance.get() as instance:
        stale = find_stale_days(instance, settings)
    if stale:
        spans = ", ".join(
            str(a) if a == b else f"{a}..{b}" for a, b in day_ranges(s.day for s in stale)
        )
        print(
            f"{len(stale)} event day(s) read raw partitions built after their last staging "
            f"attempt, and are left for the late-data lane: {spans} (late_data_sensor rebuilds "
            "them; while it is off, run `backfill-assets catch-up`)",
            flush=True,
        )


def run_plans(
    settings: Settings,
    start: date,
    end: date,
    allow_empty_overwrite: bool,
    tags: dict[str, str],
    correction_tags: dict[str, str] | None = None,
) -> list[RunOutcome] | None:
    """Every run of a backfill of [start, end], in layer order, then the runs of what it makes
    stale downstream; the event days' run builds a correction instead when ``correction_tags``
    are given (and nothing downstream runs). None when refused."""
    import dagster as dg

    from backfill_assets.backfill_plan import (
        downstream_plans,
        gone_raw_partitions,
        plan_backfill,
        raw_run_tags,
        would_wipe,
    )

    ensure_dagster_home()
    plans = plan_backfill(settings, start, end)
    wiped = would_wipe(plans, gone_raw_partitions(settings, start, end))
    if wiped and not allow_empty_overwrite:
        print(
            "refusing: these raw_orders partitions hold rows but their landing files are gone, and "
            "rebuilding them would publish emptiness: "
            + ", ".join(d.isoformat() for d in wiped)
            + "\n(restore the files, or pass --allow-empty-overwrite if the deletion is intended)",
            file=sys.stderr,
        )
        return None
    plan_id, plan_tags = raw_run_tags(settings, plans)
    with dg.DagsterInstance.get() as instance:
        if correction_tags is None:
            downstream, notes = downstream_plans(settings, start, end, instance)
            plans += downstream
            for note in notes:
                print(note, flush=True)
        progress = _Progress(sum(len(p.days) * len(p.assets) for p in plans))
        outcomes: list[RunOutcome] = []
        try:
            for plan in plans:
                if (signum := signals.received()) is not None:
                    raise PlanStopped(signum, plans, outcomes)
                correcting = correction_tags is not None and plan is plans[-1]
                run_tags = {**tags, **plan_tags.get(plan, {PLAN_TAG: plan_id})}
                if correcting:
                    run_tags |= correction_tags or {}
                outcomes.append(_run(settings, instance, plan, run_tags, correcting, progress))
        except KeyboardInterrupt:  # between two runs (``signals.watch_signals``)
            raise PlanStopped(signals.received() or SIGINT, plans, outcomes) from None
    if (signum := signals.received()) is not None:  # it stopped the last run
        raise PlanStopped(signum, plans, outcomes)
    return outcomes


class _Progress:
    """The plan's progress on the terminal: partitions done of the total, time left."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.began = total, 0, time.monotonic()

    def starting(self, plan: RunPlan) -> None:
        print(f"[{self.done}/{self.total}] {_names(plan)} {plan.start}..{plan.end} ...", flush=True)

    def ended(self, plan: RunPlan, outcome: RunOutcome) -> None:
        self.done += len(plan.days) * len(plan.assets)
        rows = sum(sum(by_day.values()) for by_day in outcome.published.values())
        elapsed = time.monotonic() - self.began
        remaining = elapsed / self.done * (self.total - self.done) if self.done else 0
        print(
            f"[{self.done}/{self.total}] {_names(plan)}: run {outcome.run_id[:8]} "
            f"{'succeeded' if outcome.success else 'FAILED'}; {rows:,} rows published; "
            f"elapsed {elapsed:.0f}s, ~{remaining:.0f}s remaining",
            flush=True,
        )


def _names(plan: RunPlan) -> str:
    return "+".join(k.to_user_string() for k in plan.assets)


def _run(
    settings: Settings,
    instance: DagsterInstance,
    plan: RunPlan,
    tags: dict[str, str],
    correcting: bool,
    progress: _Progress,
) -> RunOutcome:
    """One run of the plan, its progress shown, and the landing's read throughput recorded
    for the next plans' estimates."""
    from backfill_assets.backfill_plan import input_files, reads_landing
    from backfill_assets.cli.plan_report import record_throughput
    from backfill_assets.cli.runner import execute

    progress.starting(plan)
    began = time.monotonic()
    outcome = execute(plan, instance, tags=tags, correction=correcting)
    if outcome.success and reads_landing(plan):
        record_throughput(
            sum(f.size_bytes for f in input_files(settings, plan)), time.monotonic() - began
        )
    progress.ended(plan, outcome)
    return outcome
