"""Which ranged runs a backfill of an event-day range makes, in layer order: raw for the
arrival dates the range reaches, rates for its window, then staging and fact (``plan_backfill``);
and the tags that tie a backfill's raw runs to its staging run (``raw_run_tags``).

The command line's backfill and ``correct`` run these plans (``cli/backfill.py``), and so does
the sensor that runs a correction requested from the UI (``defs/corrections/ui_requests.py``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, timedelta

import dagster as dg

from backfill_assets.catalog import (
    EVENT_DAYS_STEP,
    EVENT_DAYS_TAG,
    FOLLOW_UP_TAG,
    FOLLOWED_BY_PLAN,
    MONTHLY_ASSETS,
    ORDERS_DATASET,
    PLAN_TAG,
    RAW_ASSET_OF_DATASET,
    RAW_FX_RATES,
    RAW_ORDERS,
    RAW_ORDERS_TABLE,
    STEP_ASSETS,
)
from backfill_assets.days import days_between, last_partition, months_between
from backfill_assets.lake import Lake
from backfill_assets.landing.layout import landed_partitions, list_landing_files
from backfill_assets.late_data import day_ranges
from backfill_assets.late_data.stale import Windows
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
