"""Where late-data detection meets the Dagster instance: the cursor, what raw is built, which
pending groups may run, and the run requests.

The cursor is the sensor's own (its instigator state), so Dagster stores it atomically with
the runs a tick requests. ``catch-up`` reads and advances that same cursor. When the sensor
has no state yet (never switched on in this instance), ``catch-up`` keeps the cursor in the
instance's key-value store instead, and the sensor's first tick starts from it: whichever
runs first, the other continues where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date

import dagster as dg

from backfill_assets.asset_events.materializations import latest_materializations
from backfill_assets.catalog import (
    BACKFILL_JOB,
    CURSOR_KEY,
    LATE_DATA_SENSOR,
    RANGE_END,
    RANGE_START,
    RAW_ASSET_OF_DATASET,
    REQUEST_TAG,
    STEP_ASSETS,
    STEP_JOBS,
    WHY_TAG,
)
from backfill_assets.dagster_private import (
    AssetEventSummaryRecord,
    InstigatorState,
    InstigatorType,
    SensorInstigatorData,
)
from backfill_assets.days import days_between, last_partition
from backfill_assets.late_data import (
    Detection,
    LandingCursor,
    PendingGroup,
    Request,
    detect,
)
from backfill_assets.late_data.scan import clock_ns
from backfill_assets.settings import Settings

# A raw run that never appeared this long after its request (the daemon dropped it, the
# sensor was stopped mid-way) no longer holds its event days back: they are requested, and
# staging's window check holds any day whose raw partitions did not land.
ORPHAN_SECONDS = 3600.0


def _sensor_states(instance: dg.DagsterInstance) -> list:
    states = instance.all_instigator_state(instigator_type=InstigatorType.SENSOR)
    return [s for s in states if s.name == LATE_DATA_SENSOR]


def fallback_cursor(instance: dg.DagsterInstance) -> str | None:
    return instance.run_storage.get_cursor_values({CURSOR_KEY}).get(CURSOR_KEY)


def load_cursor(instance: dg.DagsterInstance) -> str | None:
    """The sensor's cursor, or the one ``catch-up`` kept while the sensor had none."""

    def last_tick(state: InstigatorState) -> float:
        data = state.instigator_data
        return (data.last_tick_timestamp or 0.0) if isinstance(data, SensorInstigatorData) else 0.0

    for state in sorted(_sensor_states(instance), key=last_tick, reverse=True):
        if state.instigator_data is not None and state.instigator_data.cursor:
            return state.instigator_data.cursor
    return fallback_cursor(instance)


def save_cursor(instance: dg.DagsterInstance, text: str) -> None:
    for state in _sensor_states(instance):
        data = state.instigator_data or SensorInstigatorData()
        instance.update_instigator_state(state.with_data(data._replace(cursor=text)))
    instance.run_storage.set_cursor_values({CURSOR_KEY: text})


def sensor_is_running(instance: dg.DagsterInstance, declared_running: bool = False) -> bool:
    """Whether ``late_data_sensor`` is on: as its stored state says (switched in the UI or the
    CLI, or ticked while declared running in code), or, with no state yet, as the code declares
    it (``declared_running``: ``BACKFILL_AUTOMATION=on``)."""
    states = _sensor_states(instance)
    if states:
        return any(s.is_running for s in states)
    return declared_running


def _build_starts(instance: dg.DagsterInstance, key: dg.AssetKey) -> dict[date, int]:
    storage = instance.event_log_storage
    ids = sorted(latest_materializations(instance, key).values())
    events: list[AssetEventSummaryRecord] = []
    for i in range(0, len(ids), 500):  # bounded IN lists
        events += storage.get_asset_event_summary_records(
            dg.DagsterEventType.ASSET_MATERIALIZATION, asset_key=key, storage_ids=ids[i : i + 500]
        )
    run_ids = sorted({e.run_id for e in events if e.run_id})
    records = instance.get_run_records(filters=dg.RunsFilter(run_ids=run_ids)) if run_ids else []
    started = {r.dagster_run.run_id: r.start_time for r in records}
    built = {}
    for event in events:
        if event.partition:
            run_start = started.get(event.run_id) if event.run_id else None
            start = run_start or event.timestamp  # a runless report: its time
            built[date.fromisoformat(event.partition)] = int(min(start, event.timestamp) * 1e9)
    return built


def built_partitions(instance: dg.DagsterInstance) -> Callable[[str], dict[date, int]]:
    """``built(dataset)``: per date whose raw partition is materialized, when the run that last
    materialized it started (ns); that run listed every file stamped before."""
    return lambda dataset: _build_starts(instance, RAW_ASSET_OF_DATASET[dataset])


def detect_now(
    settings: Settings,
    instance: dg.DagsterInstance,
    cursor_text: str | None,
    settle_ns: int,
    recount_ns: int,
) -> Detection:
    """One detection against the landing zone now, from ``cursor_text`` (or the fallback),
    counting every folder's files if the last full count is ``recount_ns`` old."""
    cursor = LandingCursor.loads(cursor_text) or LandingCursor.loads(fallback_cursor(instance))
    return detect(
        settings.landing_dir,
        settings.start_date,
        last_partition(),
        settings.max_lateness_days,
        settings.rate_max_age_days,
        cursor,
        built_partitions(instance),
        clock_ns(),
        settle_ns,
        recount_ns,
    )


# Every status of a run that has not ended: queued (a run retry waits here), submitted,
# starting, in progress, being canceled.
NOT_ENDED = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.MANAGED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.SUSPENDED,
    dg.DagsterRunStatus.CANCELING,
]


ENDED_WITHOUT_SUCCESS = (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


def _days(run: dg.DagsterRun) -> list[str]:
    start, end = run.tags.get(RANGE_START), run.tags.get(RANGE_END)
    if not (start and end):
        return []
    first, last = date.fromisoformat(start), date.fromisoformat(end)
    return [d.isoformat() for d in days_between(first, last)]


def rebuilt_since(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    """Whether every partition the ended ``run`` was to build was materialized after it ended,
    by some other run (a backfill, the daily refresh, another detection)."""
    days = _days(run)
    record = instance.get_run_record_by_id(run.run_id)
    if not days or not run.asset_selection or record is None:
        return False
    # without an end time, the update time, stored to the second: the next second, to be safe
    ended = record.end_time or record.update_timestamp.timestamp() + 1.0
    for key in run.asset_selection:
        seen: set[str | None] = set()  # None only for an unpartitioned report, never in days
        cursor = None
        while True:
            page = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, asset_partitions=days, after_timestamp=ended),
                limit=500,
                cursor=cursor,
            )
            seen |= {r.partition_key for r in page.records}
            if not page.has_more:
                break
            cursor = page.cursor
        if not seen.issuperset(days):
            return False
    return True


def _failed_unrepaired(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    """``run`` ended without success and no other run has rebuilt its partitions since."""
    return run.status in ENDED_WITHOUT_SUCCESS and not rebuilt_since(instance, run)


def _latest(instance: dg.DagsterInstance, key: str) -> dg.DagsterRun | None:
    runs = instance.get_runs(filters=dg.RunsFilter(tags={REQUEST_TAG: key}), limit=1)
    return runs[0] if runs else None


def failed_raw_runs(instance: dg.DagsterInstance, group: PendingGroup) -> list[dg.DagsterRun]:
    """The latest run of each raw request the group awaits whose latest run ended without
    success and whose partitions no other run has rebuilt since: what holds the group."""
    latest = [_latest(instance, key) for key in group.awaits]
    return [run for run in latest if run is not None and _failed_unrepaired(instance, run)]


AGAIN = "again after failed run"


def rerun_request(run: dg.DagsterRun) -> Request | None:
    """The raw request a failed ``run`` was made for, to run again under the same key (so the
    groups awaiting that key see its outcome)."""
    days = _days(run)
    assets = set(run.asset_selection or ())
    step = next((name for name, keys in STEP_ASSETS.items() if set(keys) == assets), None)
    if not days or step is None or REQUEST_TAG not in run.tags:
        return None
    why = run.tags.get(WHY_TAG, "")
    if why.startswith(AGAIN):  # failed before: say why it was first requested, once
        why = why.split(": ", 1)[-1]
    why = f"{AGAIN} {run.run_id[:8]}: {why}"
    first, last = date.fromisoformat(days[0]), date.fromisoformat(days[-1])
    return Request(step, first, last, run.tags[REQUEST_TAG], why)


def group_ready(
    instance: dg.DagsterInstance,
    group: PendingGroup,
    now: float,
    orphan_seconds: float = ORPHAN_SECONDS,
) -> bool:
    """True once each raw run the group awaits has succeeded: no run with its request tag is
    queued, starting or in progress (a crashed run is ended while its retry, which keeps its
    tags, is still queued), and the latest one succeeded. A failed one holds the group until a
    re-execution (same tags) succeeds, or until other runs rebuilt its partitions since."""
    for key in group.awaits:
        latest = _latest(instance, key)
        if latest is None:
            if now - group.since < orphan_seconds:
                return False
            continue
        unended = dg.RunsFilter(tags={REQUEST_TAG: key}, statuses=NOT_ENDED)
        if instance.get_runs(filters=unended, limit=1) or _failed_unrepaired(instance, latest):
            return False
    return True


def tags_for(request: Request) -> dict[str, str]:
    return {
        RANGE_START: request.start.isoformat(),
        RANGE_END: request.end.isoformat(),
        REQUEST_TAG: request.key,
        WHY_TAG: request.why,
    }


def run_request(request: Request) -> dg.RunRequest:
    """A ranged run of the step's job (``backfill_job`` but for the monthly report) over the
    request's partitions (one run, not one per partition)."""
    return dg.RunRequest(
        run_key=request.key,
        job_name=STEP_JOBS.get(request.step, BACKFILL_JOB),
        asset_selection=list(STEP_ASSETS[request.step]),
        tags=tags_for(request),
    )
