"""The daily schedule's second half: staging and fact of the event days its raw run reaches.

A tick cannot order two runs, and one run cannot build a raw range and a different event-day range
(see ``schedules.py``). So the schedule requests the raw run, tagged with its event days, and this
sensor requests staging + fact for those days once that run has ended, whether it succeeded or held
some days (staging's ``window_complete`` then holds the event days whose raw did not land). A failed
run that Dagster will retry is skipped: its retry carries the same tags and is followed up when it
ends. It is on by default and independent of ``late_data_sensor``: with the late-data sensor
stopped, the schedule still rebuilds every layer. It only ever acts on runs the schedule started, so
it does nothing while the schedule is stopped."""

from __future__ import annotations

import json
import time
from datetime import UTC, date, datetime

import dagster as dg

from backfill_assets.automation.stale_days import follow_up_key
from backfill_assets.automation.state import run_request
from backfill_assets.catalog import (
    EVENT_DAYS_STEP,
    EVENT_DAYS_TAG,
    FOLLOW_UP_SENSOR,
    FOLLOW_UP_TAG,
    WHY_TAG,
)
from backfill_assets.dagster_private import WILL_RETRY_TAG
from backfill_assets.defs.automation.wiring import pipeline_sensor
from backfill_assets.late_data import Request
from backfill_assets.settings import AutomationSettings

FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
# A first tick follows up the schedule's raw runs that ended in the last day, no further back.
FOLLOW_BACK_SECONDS = 86_400.0


def load_mark(cursor: str | None, now: float) -> float:
    """The update time (epoch s) of the last raw run followed up; a day ago on a first tick."""
    if not cursor:
        return now - FOLLOW_BACK_SECONDS
    return float(json.loads(cursor)["followed_until"])


def dump_mark(mark: float) -> str:
    return json.dumps({"followed_until": round(mark, 6)})


def follow_ups(instance: dg.DagsterInstance, mark: float) -> tuple[list[Request], float]:
    """Staging + fact for the event days of each of the schedule's raw runs that ended after
    ``mark`` (oldest first, one ranged run each: the tag holds one contiguous span), and the
    new mark."""
    records = instance.get_run_records(
        filters=dg.RunsFilter(
            tags={FOLLOW_UP_TAG: EVENT_DAYS_STEP},
            statuses=FINISHED,
            updated_after=datetime.fromtimestamp(mark, tz=UTC),
        ),
        limit=100,
        ascending=True,
    )
    requests, new_mark = [], mark
    for record in records:
        run, updated = record.dagster_run, record.update_timestamp.timestamp()
        if updated <= mark or EVENT_DAYS_TAG not in run.tags:
            continue
        new_mark = max(new_mark, updated)
        if run.tags.get(WILL_RETRY_TAG) == "true":
            continue  # its retry keeps these tags: that run's end is followed up instead
        first, last = (date.fromisoformat(d) for d in run.tags[EVENT_DAYS_TAG].split(".."))
        why = f"after raw run {run.run_id[:8]} ({run.tags.get(WHY_TAG, 'daily')})"
        requests.append(
            Request(EVENT_DAYS_STEP, first, last, follow_up_key(run.run_id, first, last), why)
        )
    return requests, new_mark


def build_follow_up_sensor(auto: AutomationSettings) -> dg.SensorDefinition:
    def daily_refresh_follow_up(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        """Once a raw run of the daily_refresh schedule has ended (succeeded or not), requests
        staging and fact of the event days it reaches, so the schedule rebuilds every layer
        even while late_data_sensor is stopped. On by default: it acts only on the schedule's
        runs. Run keys make a re-evaluated tick request nothing twice."""
        requests, mark = follow_ups(context.instance, load_mark(context.cursor, time.time()))
        if not requests:
            return dg.SensorResult(
                skip_reason="no daily_refresh raw run ended since the last tick",
                cursor=dump_mark(mark),
            )
        return dg.SensorResult(
            run_requests=[run_request(r) for r in requests], cursor=dump_mark(mark)
        )

    return pipeline_sensor(
        auto, daily_refresh_follow_up, FOLLOW_UP_SENSOR, dg.DefaultSensorStatus.RUNNING
    )
