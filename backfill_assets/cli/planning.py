"""Which ranged runs a backfill makes, and ``backfill-assets plan``: what they would build, from
what, and how long they should take.

The plan is a dry run: it lists files and reads Delta logs, and changes nothing. Time is
estimated from the throughput of real runs on this machine, recorded under
``DAGSTER_HOME`` by every run the CLI executes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

import dagster as dg

from backfill_assets.backfill_plan import RunPlan, gone_raw_partitions, plan_backfill
from backfill_assets.catalog import (
    CUSTOMER_LTV_STEP,
    ENRICH_STEP,
    EVENT_DAYS_STEP,
    FCT_CUSTOMER_LTV,
    FCT_DAILY_REVENUE,
    FX_RATES_DATASET,
    MONTHLY_ASSETS,
    ORDERS_DATASET,
    RAW_FX_RATES,
    RAW_ORDERS,
    RPT_MONTHLY_REVENUE,
    STEP_ASSETS,
    STG_ORDERS,
)
from backfill_assets.cli.key_distribution import SkewReport, key_distribution, render_skew
from backfill_assets.days import (
    days_between,
    months_between,
    next_month,
    rate_dates,
    rate_partition,
)
from backfill_assets.defs.downstream.customer_ltv import first_stale, first_unpublished
from backfill_assets.defs.partitions import days_of_month, monthly_partitions
from backfill_assets.landing.layout import LandingFile, list_landing_files
from backfill_assets.publishing.publication import latest_materializations
from backfill_assets.settings import Settings, dagster_home

# Until a run has been measured on this machine: the time to start a run and its Spark session,
# then the throughput of landed JSON through all checks.
DEFAULT_RUN_OVERHEAD_S = 10.0
DEFAULT_BYTES_PER_S = 2_000_000.0


def downstream_plans(
    settings: Settings, start: date, end: date, instance: dg.DagsterInstance
) -> tuple[list[RunPlan], list[str]]:
    """What a backfill of the event days [start, end] makes stale, as one ranged run each, and
    why anything stale is left out (it could only be held):

    - customer LTV from the first day whose LTV is not current (``start`` at the latest) to the
      later of ``end`` and its latest published day (it is cumulative); left out while a staging
      day before ``start`` is not published;
    - every complete month the range touches whose other days have their fact published;
    - the enrichment of [start, end] (``stg_orders_enriched``), while the segment service is
      configured."""
    first = settings.start_date
    staging = latest_materializations(instance, STG_ORDERS)
    ltv = latest_materializations(instance, FCT_CUSTOMER_LTV)
    plans, notes = [], []
    missing = (
        first_unpublished(first, start - timedelta(days=1), staging) if start > first else None
    )
    if missing is None:
        stale = (
            first_stale(first, start - timedelta(days=1), staging, ltv) if start > first else None
        )
        plans.append(RunPlan(STEP_ASSETS[CUSTOMER_LTV_STEP], stale or start, max([end, *ltv])))
    else:
        notes.append(
            f"{FCT_CUSTOMER_LTV.to_user_string()} left out: {STG_ORDERS.to_user_string()} "
            f"{missing} is not published (backfill from {missing} to build it)"
        )
    last_month = monthly_partitions(settings).get_last_partition_key()
    fact = set(latest_materializations(instance, FCT_DAILY_REVENUE)) | set(days_between(start, end))
    months = []
    for month in months_between(start, end):
        if last_month is None or month > date.fromisoformat(last_month):
            continue
        absent = [d for d in days_of_month(month, settings) if d not in fact]
        if absent:
            notes.append(
                f"{RPT_MONTHLY_REVENUE.to_user_string()} {month:%Y-%m} left out: "
                f"{len(absent)} day(s) without a published fact, the first {absent[0]}"
            )
        else:
            months.append(month)
    for a, b in month_ranges(months):
        plans.append(RunPlan(MONTHLY_ASSETS, a, b))
    if settings.segments is not None:
        plans.append(RunPlan(STEP_ASSETS[ENRICH_STEP], start, end))
    else:
        notes.append(
            f"{STEP_ASSETS[ENRICH_STEP][0].to_user_string()} left out: the segment service "
            "is not configured (BACKFILL_SEGMENTS_URL)"
        )
    return plans, notes


def month_ranges(months: list[date]) -> list[tuple[date, date]]:
    """Consecutive months as (first, last) ranges."""
    ranges: list[tuple[date, date]] = []
    for m in months:
        if ranges and next_month(ranges[-1][1]) == m:
            ranges[-1] = (ranges[-1][0], m)
        else:
            ranges.append((m, m))
    return ranges


@dataclass
class LayerPlan:
    run: RunPlan
    input_files: int = 0
    input_bytes: int = 0
    missing_inputs: list[date] = field(default_factory=list)
    estimate_s: float = 0.0


@dataclass
class BackfillPlan:
    layers: list[LayerPlan]
    gone: dict[date, int]  # raw partitions with rows whose landing folder is now empty
    measured: bool
    skew: SkewReport | None = None  # the heavy stages' key distribution

    @property
    def estimate_s(self) -> float:
        return sum(layer.estimate_s for layer in self.layers)


def throughput_file() -> Path:
    return dagster_home() / "backfill_assets_throughput.json"


def record_throughput(input_bytes: int, seconds: float) -> None:
    path = throughput_file()
    data = (
        json.loads(path.read_text()) if path.exists() else {"bytes": 0, "seconds": 0.0, "runs": 0}
    )
    data = {
        "bytes": data["bytes"] + input_bytes,
        "seconds": data["seconds"] + seconds,
        "runs": data["runs"] + 1,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _rate() -> tuple[float, float, bool]:
    path = throughput_file()
    if path.exists():
        data = json.loads(path.read_text())
        work = data["seconds"] - DEFAULT_RUN_OVERHEAD_S * data["runs"]
        if data["bytes"] > 0 and work > 0:
            return DEFAULT_RUN_OVERHEAD_S, data["bytes"] / work, True
    return DEFAULT_RUN_OVERHEAD_S, DEFAULT_BYTES_PER_S, False


def reads_landing(run: RunPlan) -> bool:
    return run.assets == STEP_ASSETS[EVENT_DAYS_STEP] or run.assets[0] in (RAW_ORDERS, RAW_FX_RATES)


def input_files(settings: Settings, run: RunPlan) -> list[LandingFile]:
    """The landing files a run reads: its own dates for raw (and, for the rates' first
    partition, the rate window before it), the arrival window for staging, none for the tables
    downstream of the fact (they read the lake)."""
    if not reads_landing(run):
        return []
    if run.assets[0] == RAW_FX_RATES:
        dates = rate_dates(run.days, settings.start_date, settings.rate_max_age_days)
        return list_landing_files(settings.landing_dir, FX_RATES_DATASET, dates)
    if run.assets[0] == RAW_ORDERS:
        return list_landing_files(settings.landing_dir, ORDERS_DATASET, run.days)
    window = run.days + [run.end + timedelta(days=i + 1) for i in range(settings.max_lateness_days)]
    return list_landing_files(settings.landing_dir, ORDERS_DATASET, window)


def make_plan(settings: Settings, start: date, end: date) -> BackfillPlan:
    runs = plan_backfill(settings, start, end)
    overhead, rate, measured = _rate()
    layers = []
    for run in runs:
        files = input_files(settings, run)
        present = {rate_partition(f.partition, settings.start_date) for f in files}
        size = sum(f.size_bytes for f in files)
        missing = [d for d in run.days if d not in present] if reads_landing(run) else []
        layers.append(LayerPlan(run, len(files), size, missing, overhead + size / rate))
    return BackfillPlan(
        layers,
        gone_raw_partitions(settings, start, end),
        measured,
        key_distribution(settings, start, end),
    )


def render_plan(plan: BackfillPlan) -> str:
    lines = [f"{'layer':<34}{'partitions':<26}{'files':>7}{'MB':>9}{'no input':>10}{'est. s':>8}"]
    for layer in plan.layers:
        run = layer.run
        names = "+".join(k.to_user_string() for k in run.assets)
        lines.append(
            f"{names:<34}{f'{run.start}..{run.end} ({len(run.days)})':<26}{layer.input_files:>7}"
            f"{layer.input_bytes / 1e6:>9.2f}{len(layer.missing_inputs):>10}"
            f"{layer.estimate_s:>8.0f}"
        )
        if layer.missing_inputs:
            shown = ", ".join(d.isoformat() for d in layer.missing_inputs[:8])
            more = (
                f" (+{len(layer.missing_inputs) - 8} more)" if len(layer.missing_inputs) > 8 else ""
            )
            lines.append(f"{'':<34}without landing files: {shown}{more}")
    basis = "measured on this machine" if plan.measured else "default rate, no run measured yet"
    lines.append(f"estimated total: {plan.estimate_s:.0f} s ({basis})")
    if plan.skew is not None:
        lines += render_skew(plan.skew)
    for day, rows in sorted(plan.gone.items()):
        lines.append(
            f"WARNING raw_orders {day}: {rows} rows in the lake but its landing files are gone "
            "(backfill will not overwrite them with emptiness unless --allow-empty-overwrite)"
        )
    return "\n".join(lines)
