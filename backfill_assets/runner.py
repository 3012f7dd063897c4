"""Turn a requested event-date range into ranged Dagster runs, execute them, read back the outcome.

The CLI, the benchmarks and the tests go through here, so every run they start is
a real run of the code location's job in the instance at ``DAGSTER_HOME``: it shows
in the UI and can be re-executed from there.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
from dagster._core.events import DagsterEventType

from backfill_assets.defs.fact.checks import FCT_DAILY_REVENUE
from backfill_assets.defs.raw.checks import RAW_FX_RATES, RAW_ORDERS
from backfill_assets.defs.staging.checks import STG_ORDERS
from backfill_assets.landing import landed_partitions
from backfill_assets.settings import Settings

LAYERS = (RAW_ORDERS, RAW_FX_RATES, STG_ORDERS, FCT_DAILY_REVENUE)
# The full event log is in the instance (and the UI); the terminal shows warnings and errors.
QUIET = {"loggers": {"console": {"config": {"log_level": os.environ.get("BACKFILL_LOG_LEVEL", "WARNING")}}}}
RANGE_START, RANGE_END = "dagster/asset_partition_range_start", "dagster/asset_partition_range_end"


@dataclass(frozen=True)
class RunPlan:
    """One ranged run: some assets over one contiguous partition range."""

    assets: tuple[dg.AssetKey, ...]
    start: date
    end: date

    @property
    def days(self) -> list[date]:
        return [self.start + timedelta(days=i) for i in range((self.end - self.start).days + 1)]


@dataclass
class RunOutcome:
    plan: RunPlan
    run_id: str
    success: bool
    published: dict[dg.AssetKey, dict[date, int]] = field(default_factory=dict)  # day -> rows
    failed_checks: dict[dg.AssetKey, dict[date, list[str]]] = field(default_factory=dict)
    error: str | None = None



def last_partition() -> date:
    """Daily partitions end with yesterday (UTC): today is not complete yet."""
    return datetime.now(UTC).date() - timedelta(days=1)


def contiguous(days: list[date]) -> list[tuple[date, date]]:
    ranges: list[tuple[date, date]] = []
    for day in sorted(days):
        if ranges and day == ranges[-1][1] + timedelta(days=1):
            ranges[-1] = (ranges[-1][0], day)
        else:
            ranges.append((day, day))
    return ranges


def plan_backfill(settings: Settings, start: date, end: date) -> list[RunPlan]:
    """Raw for every landed arrival date in [start, end + lateness], rates for
    [start - 7, end], then staging and fact for [start, end]."""
    first, last = settings.start_date, last_partition()
    if start > end:
        raise ValueError(f"--start {start} is after --end {end}")
    if start < first or end > last:
        raise ValueError(f"the range must lie within the partitions {first} .. {last}")
    arrival_end = min(end + timedelta(days=settings.max_lateness_days), last)
    landed = [d for d in landed_partitions(settings.landing_dir, "orders") if start <= d <= arrival_end]
    plans = [RunPlan((RAW_ORDERS,), a, b) for a, b in contiguous(landed)]
    plans.append(RunPlan((RAW_FX_RATES,), max(start - timedelta(days=7), first), end))
    plans.append(RunPlan((STG_ORDERS, FCT_DAILY_REVENUE), start, end))
    return plans


def ensure_dagster_home(project_dir: Path | None = None) -> Path:
    """DAGSTER_HOME, defaulting to ./.dagster_home with the project's dagster.yaml in it (and
    Dagster's storage on PostgreSQL when BACKFILL_DAGSTER_PG_URL is set)."""
    from backfill_assets.dagster_instance import prepare_instance_yaml

    home = Path(os.environ.setdefault("DAGSTER_HOME", str(Path(".dagster_home").resolve())))
    prepare_instance_yaml(home, (project_dir or Path.cwd()) / "dagster.yaml")
    return home


def execute(plan: RunPlan, instance: dg.DagsterInstance, tags: dict[str, str] | None = None) -> RunOutcome:
    from backfill_assets.definitions import backfill_job

    run_tags = {RANGE_START: plan.start.isoformat(), RANGE_END: plan.end.isoformat(), **(tags or {})}
    with dg.execute_job(
        dg.reconstructable(backfill_job),
        instance=instance,
        asset_selection=list(plan.assets),
        tags=run_tags,
        run_config=QUIET,
        raise_on_error=False,
    ) as result:
        return outcome_of_run(instance, plan, result.run_id, result.success)


def reexecute_from_failure(instance: dg.DagsterInstance, run_id: str) -> RunOutcome:
    """Re-execute a failed ranged run's failed steps; its published days are kept, the held redone."""
    from backfill_assets.definitions import backfill_job

    parent = instance.get_run_by_id(run_id)
    if parent is None:
        raise ValueError(f"no run {run_id!r} in this Dagster instance")
    start, end = parent.tags.get(RANGE_START), parent.tags.get(RANGE_END)
    if not (start and end):
        raise ValueError(f"run {run_id} is not a ranged backfill run")
    plan = RunPlan(tuple(sorted(parent.asset_selection or (), key=str)), date.fromisoformat(start), date.fromisoformat(end))
    with dg.execute_job(
        dg.reconstructable(backfill_job),
        instance=instance,
        reexecution_options=dg.ReexecutionOptions.from_failure(run_id, instance),
        run_config=QUIET,
        tags={k: v for k, v in parent.tags.items() if not k.startswith("dagster/") or k in (RANGE_START, RANGE_END)},
        raise_on_error=False,
    ) as result:
        return outcome_of_run(instance, plan, result.run_id, result.success)


def outcome_of_run(instance: dg.DagsterInstance, plan: RunPlan, run_id: str, success: bool) -> RunOutcome:
    outcome = RunOutcome(plan, run_id, success)
    published: dict = defaultdict(dict)
    failed: dict = defaultdict(lambda: defaultdict(list))
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        if event.event_type == DagsterEventType.ASSET_MATERIALIZATION:
            mat = event.step_materialization_data.materialization
            rows = mat.metadata.get("dagster/row_count")
            published[mat.asset_key][date.fromisoformat(mat.partition)] = rows.value if rows else 0
        elif event.event_type == DagsterEventType.ASSET_CHECK_EVALUATION:
            ev = event.asset_check_evaluation_data
            if not ev.passed and ev.partition:
                failed[ev.asset_key][date.fromisoformat(ev.partition)].append(ev.check_name)
        elif event.event_type == DagsterEventType.STEP_FAILURE and outcome.error is None:
            outcome.error = event.step_failure_data.error.message.strip() if event.step_failure_data.error else None
    outcome.published = dict(published)
    outcome.failed_checks = {k: dict(v) for k, v in failed.items()}
    return outcome
