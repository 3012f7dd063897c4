"""Stale event days in the Dagster instance: the storage ids ``late_data.stale`` compares, and the
days it must leave alone because a run not yet ended has them in hand.

Read from the event log: per partition, the latest planned materialization of stg_orders (one
per partition and run, stored when the run is created: a queued run is an attempt already) and
the latest materializations of stg_orders and the raw assets. A raw materialization counts as
the late-data lane's when its run carries a raw request key of the lane (``late_data_sensor``
and ``catch-up`` tag their raw runs so, re-executions keep the tag).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime

import dagster as dg

from backfill_assets.asset_events.materializations import latest_materializations
from backfill_assets.automation.state import NOT_ENDED, ORPHAN_SECONDS
from backfill_assets.catalog import (
    EVENT_DAYS_STEP,
    EVENT_DAYS_TAG,
    FOLLOW_UP_TAG,
    FOLLOWED_BY_PLAN,
    PLAN_TAG,
    RANGE_END,
    RANGE_START,
    RAW_ASSET_OF_DATASET,
    RAW_STEP_OF_DATASET,
    REQUEST_TAG,
    STEP_ASSETS,
    STG_ORDERS,
)
from backfill_assets.dagster_private import PARTITION_NAME_TAG, WILL_RETRY_TAG
from backfill_assets.days import days_between, last_partition
from backfill_assets.late_data import Request
from backfill_assets.late_data.stale import (
    EventDayLog,
    StaleDay,
    Windows,
    since_attempt,
    stale_days,
)
from backfill_assets.settings import Settings

BATCH = 500  # bounded IN lists and pages
ENDED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
LANE_PREFIXES = tuple(f"{step}:" for step in RAW_STEP_OF_DATASET.values())


def follow_up_key(run_id: str, first: date, last: date) -> str:
    """The run key of ``daily_refresh_follow_up``'s staging + fact run after raw run ``run_id``."""
    return f"{EVENT_DAYS_STEP}:{first}..{last}:after:{run_id[:12]}"


def _planned(instance: dg.DagsterInstance) -> dict[date, int]:
    storage = instance.event_log_storage
    if storage.supports_partition_subset_in_asset_materialization_planned_events:
        # Dagster then stores one planned event per ranged run, without its partitions.
        raise RuntimeError(
            "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS is set: staging attempts are not "
            "stored per partition, so stale event days cannot be found; unset it"
        )
    latest = storage.get_latest_storage_id_by_partition(
        STG_ORDERS, dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED
    )
    return {date.fromisoformat(p): i for p, i in latest.items()}


def _lane_runs(instance: dg.DagsterInstance, run_ids: Iterable[str]) -> set[str]:
    ids, lane = sorted(set(run_ids)), set()
    for i in range(0, len(ids), BATCH):
        for record in instance.get_run_records(filters=dg.RunsFilter(run_ids=ids[i : i + BATCH])):
            if record.dagster_run.tags.get(REQUEST_TAG, "").startswith(LANE_PREFIXES):
                lane.add(record.dagster_run.run_id)
    return lane


def _built_outside_lane(
    instance: dg.DagsterInstance, since: dict[str, dict[date, int]]
) -> dict[str, dict[date, int]]:
    """Per dataset and raw partition of ``since`` (partition -> an attempt id), the latest
    materialization after that attempt by a run outside the late-data lane."""
    found: dict[str, dict[date, int]] = {}
    for dataset, partitions in since.items():
        key, keys = RAW_ASSET_OF_DATASET[dataset], sorted(p.isoformat() for p in partitions)
        records: list[dg.EventLogRecord] = []
        for i in range(0, len(keys), BATCH):
            cursor = None
            while True:
                page = instance.fetch_materializations(
                    dg.AssetRecordsFilter(
                        key,
                        asset_partitions=keys[i : i + BATCH],
                        after_storage_id=min(partitions.values()),
                    ),
                    limit=BATCH,
                    cursor=cursor,
                )
                records += page.records
                if not page.has_more:
                    break
                cursor = page.cursor
        lane = _lane_runs(instance, {r.run_id for r in records if r.run_id})
        for record in records:
            if not record.partition_key or record.run_id in lane:
                continue
            partition = date.fromisoformat(record.partition_key)
            if record.storage_id > partitions[partition]:
                mine = found.setdefault(dataset, {})
                mine[partition] = max(mine.get(partition, -1), record.storage_id)
    return found


def event_day_log(instance: dg.DagsterInstance, windows: Windows) -> EventDayLog:
    built = {ds: latest_materializations(instance, k) for ds, k in RAW_ASSET_OF_DATASET.items()}
    log = EventDayLog(_planned(instance), latest_materializations(instance, STG_ORDERS), built, {})
    outside = _built_outside_lane(instance, since_attempt(log, windows))
    return EventDayLog(log.attempted, log.published, log.built, outside)


def _run_range(tags: Mapping[str, str]) -> tuple[date, date] | None:
    start, end = tags.get(RANGE_START), tags.get(RANGE_END)
    if start and end:
        return date.fromisoformat(start), date.fromisoformat(end)
    single = tags.get(PARTITION_NAME_TAG)
    if single:
        return date.fromisoformat(single), date.fromisoformat(single)
    return None  # unpartitioned (maintenance) or not a daily partition


def event_days_in_hand(
    windows: Windows, assets: Iterable[dg.AssetKey], start: date, end: date
) -> set[date]:
    """The event days a run of ``assets`` over ``start .. end`` builds, or whose window it
    rebuilds: they are that run's to settle (its follow-up or pending group releases them)."""
    days: set[date] = set()
    assets = set(assets)
    for dataset, key in RAW_ASSET_OF_DATASET.items():
        if key in assets:
            days.update(days_between(*windows.readers(dataset, start, end)))
    if assets & set(STEP_ASSETS[EVENT_DAYS_STEP]):
        days.update(days_between(start, end))
    return days


def requested_days(windows: Windows, requests: Iterable[Request]) -> set[date]:
    """The event days in hand of requests about to become runs (``event_days_in_hand``)."""
    days: set[date] = set()
    for r in requests:
        days |= event_days_in_hand(windows, STEP_ASSETS[r.step], r.start, r.end)
    return days


def _followed(instance: dg.DagsterInstance, run: dg.DagsterRun, first: date, last: date) -> bool:
    """Whether the run that settles the event days of the ended raw ``run`` is on record."""
    if run.tags[FOLLOW_UP_TAG] == FOLLOWED_BY_PLAN:
        plan = run.tags.get(PLAN_TAG)
        mine = instance.get_runs(filters=dg.RunsFilter(tags={PLAN_TAG: plan})) if plan else []
        return not plan or any(STG_ORDERS in (r.asset_selection or ()) for r in mine)
    key = follow_up_key(run.run_id, first, last)
    return bool(instance.get_runs(filters=dg.RunsFilter(tags={REQUEST_TAG: key}), limit=1))


def busy_event_days(instance: dg.DagsterInstance, windows: Windows, now: float) -> set[date]:
    """Event days in hand of a run not yet ended, and of ended raw runs whose successor is not
    on record yet: the daily refresh's (its follow-up run) and a CLI backfill's (its staging
    run), until ``ORPHAN_SECONDS`` have passed (a stopped follow-up sensor, a killed backfill
    does not hold them for ever)."""
    busy: set[date] = set()
    all_assets = [k for keys in STEP_ASSETS.values() for k in keys]
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=NOT_ENDED)):
        span = _run_range(run.tags)
        if span is not None:
            busy |= event_days_in_hand(windows, run.asset_selection or all_assets, *span)
    since = datetime.fromtimestamp(now - ORPHAN_SECONDS, tz=UTC)
    followed = instance.get_runs(
        filters=dg.RunsFilter(
            tags={FOLLOW_UP_TAG: [EVENT_DAYS_STEP, FOLLOWED_BY_PLAN]},
            statuses=ENDED,
            updated_after=since,
        )
    )
    for run in followed:
        if run.tags.get(WILL_RETRY_TAG) == "true" or EVENT_DAYS_TAG not in run.tags:
            continue  # its retry, queued, is in hand already
        first, last = (date.fromisoformat(d) for d in run.tags[EVENT_DAYS_TAG].split(".."))
        if not _followed(instance, run, first, last):
            busy.update(days_between(first, last))
    return busy


def find_stale_days(
    instance: dg.DagsterInstance,
    settings: Settings,
    skip: Iterable[date] = (),
    now: float | None = None,
) -> list[StaleDay]:
    """The stale event days (``late_data.stale``) but ``skip`` and the days a run in flight has
    in hand."""
    windows = Windows.of(settings)
    busy = busy_event_days(instance, windows, time.time() if now is None else now)
    return stale_days(event_day_log(instance, windows), windows, last_partition(), busy | set(skip))
