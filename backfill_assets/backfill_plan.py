"""Which ranged runs a backfill of an event-day range makes, in layer order: raw for the
arrival dates the range reaches, rates for its window, then staging and fact (``plan_backfill``),
then what they make stale downstream: customer LTV, complete months, the enrichment
(``downstream_plans``); the landing files each run reads (``input_files``); and the tags that tie
a backfill's raw runs to its staging run (``raw_run_tags``).

The command line's backfill and ``correct`` run these plans (``cli/backfill.py``), and so does
the sensor that runs a correction requested from the UI (``defs/corrections/ui_requests.py``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, timedelta

import dagster as dg

from backfill_assets.asset_events.materializations import latest_materializations
from backfill_assets.catalog import (
    CUSTOMER_LTV_STEP,
    ENRICH_STEP,
    EVENT_DAYS_STEP,
    EVENT_DAYS_TAG,
    FCT_CUSTOMER_LTV,
    FCT_DAILY_REVENUE,
    FOLLOW_UP_TAG,
    FOLLOWED_BY_PLAN,
    FX_RATES_DATASET,
    MONTHLY_ASSETS,
    ORDERS_DATASET,
    PLAN_TAG,
    RAW_ASSET_OF_DATASET,
    RAW_FX_RATES,
    RAW_ORDERS,
    RAW_ORDERS_TABLE,
    RPT_MONTHLY_REVENUE,
    STEP_ASSETS,
    STG_ORDERS,
)
from backfill_assets.days import (
    days_between,
    days_of_month,
    last_complete_month,
    last_partition,
    months_between,
    next_month,
    rate_dates,
)
from backfill_assets.lake import Lake
from backfill_assets.landing.layout import LandingFile, landed_partitions, list_landing_files
from backfill_assets.late_data import day_ranges
from backfill_assets.late_data.stale import Windows, first_stale, first_unpublished
from backfill_assets.settings import Settings


@dataclass(frozen=True)
class RunPlan:
    """One ranged run: some assets over one contiguous partition range."""

    assets: tuple[dg.AssetKey, ...]
    start: date
    end: date

    @property
    def days(self) -> list[date]:
        """The run's partitions: days, or the months' first days for the monthly report."""
        if self.assets == MONTHLY_ASSETS:
            return months_between(self.start, self.end)
        return days_between(self.start, self.end)


def check_range(settings: Settings, start: date, end: date) -> None:
    """ValueError unless [start, end] is a range of the daily partitions."""
    first, last = settings.start_date, last_partition()
    if start > end:
        raise ValueError(f"--start {start} is after --end {end}")
    if start < first or end > last:
        raise ValueError(f"the range must lie within the partitions {first} .. {last}")


def plan_backfill(settings: Settings, start: date, end: date) -> list[RunPlan]:
    """Raw for every landed arrival date in [start, end + lateness], rates for
    [start - rate window, end], then staging and fact for [start, end]. What sits downstream
    of them follows: ``downstream_plans``."""
    check_range(settings, start, end)
    first, last = settings.start_date, last_partition()
    arrival_end = min(end + timedelta(days=settings.max_lateness_days), last)
    landed = [
        d
        for d in landed_partitions(settings.landing_dir, ORDERS_DATASET)
        if start <= d <= arrival_end
    ]
    plans = [RunPlan((RAW_ORDERS,), a, b) for a, b in day_ranges(landed)]
    rates_start = max(start - timedelta(days=settings.rate_max_age_days), first)
    plans.append(RunPlan((RAW_FX_RATES,), rates_start, end))
    plans.append(RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], start, end))
    return plans


def gone_raw_partitions(settings: Settings, start: date, end: date) -> dict[date, int]:
    """Raw partitions of arrivals [start, end + lateness] that hold rows but whose landing
    files are gone: rebuilding one would replace real rows with emptiness."""
    lake = Lake(settings.lake_dir, None, engine="delta-rs")
    if not lake.exists(RAW_ORDERS_TABLE.path):
        return {}
    last = end + timedelta(days=settings.max_lateness_days)
    rows = {
        p.partition: p.rows
        for p in lake.partitions(RAW_ORDERS_TABLE.path, RAW_ORDERS_TABLE.partition_column)
        if start <= p.partition <= last and p.rows > 0
    }
    files = {
        f.partition for f in list_landing_files(settings.landing_dir, ORDERS_DATASET, sorted(rows))
    }
    return {d: n for d, n in rows.items() if d not in files}


def would_wipe(runs: list[RunPlan], gone: dict[date, int]) -> list[date]:
    """Gone partitions that a raw run of the plan would rebuild (their folder exists, empty)."""
    raw_days = {d for r in runs if r.assets[0] == RAW_ORDERS for d in r.days}
    return sorted(d for d in gone if d in raw_days)


def raw_run_tags(
    settings: Settings, plans: list[RunPlan], plan_id: str | None = None
) -> tuple[str, dict[RunPlan, dict]]:
    """(an id for this backfill, the tags of its raw runs): every run carries the id; a raw run
    also the event days its raw reaches, which the late-data lane leaves to this backfill until
    its staging run is on record (``automation/stale_days.py``), rather than rebuild them between
    two of its runs."""
    plan_id = plan_id or uuid.uuid4().hex[:12]
    windows = Windows.of(settings)
    datasets = {key: dataset for dataset, key in RAW_ASSET_OF_DATASET.items()}
    spans = [
        windows.readers(datasets[p.assets[0]], p.start, p.end)
        for p in plans
        if p.assets[0] in datasets
    ]
    if not spans:
        return plan_id, {}
    reach = f"{min(a for a, _ in spans)}..{min(max(b for _, b in spans), last_partition())}"
    raw_tags = {PLAN_TAG: plan_id, FOLLOW_UP_TAG: FOLLOWED_BY_PLAN, EVENT_DAYS_TAG: reach}
    return plan_id, {p: raw_tags for p in plans if p.assets[0] in datasets}


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
    last_month = last_complete_month()
    fact = set(latest_materializations(instance, FCT_DAILY_REVENUE)) | set(days_between(start, end))
    months = []
    for month in months_between(start, end):
        if month > last_month:
            continue
        absent = [d for d in days_of_month(month, first) if d not in fact]
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
