"""The late-data sensor: fold late arrivals into exactly the days they change."""

from __future__ import annotations

import time
from dataclasses import dataclass

import dagster as dg

from backfill_assets.automation.stale_days import find_stale_days, requested_days
from backfill_assets.automation.state import (
    detect_now,
    failed_raw_runs,
    group_ready,
    run_request,
)
from backfill_assets.catalog import LATE_DATA_SENSOR
from backfill_assets.defs.automation.wiring import pipeline_sensor, sensor_status
from backfill_assets.late_data import Detection, LandingCursor, Request, release
from backfill_assets.late_data.stale import Windows, stale_requests
from backfill_assets.settings import AutomationSettings, Settings


@dataclass(frozen=True)
class Tick:
    """One evaluation: what was found, what to request (raw first), the cursor to store."""

    detection: Detection
    requests: list[Request]
    cursor: LandingCursor
    stale: list[Request]  # among ``requests``: the stale event days'


def evaluate(
    settings: Settings,
    auto: AutomationSettings,
    instance: dg.DagsterInstance,
    cursor_text: str | None,
) -> Tick:
    """Detect new files (phase 1); release the pending groups whose raw runs succeeded (phase 2);
    request the stale event days that no pending group, request or run in flight has in hand."""
    detection = detect_now(settings, instance, cursor_text, auto.settle_ns, auto.recount_ns)
    now = time.time()
    released, cursor = release(detection.cursor, lambda group: group_ready(instance, group, now))
    pending = {d for g in detection.cursor.pending for d in g.days}
    in_hand = pending | requested_days(Windows.of(settings), detection.raw + released)
    stale = stale_requests(find_stale_days(instance, settings, in_hand, now))
    return Tick(detection, detection.raw + released + stale, cursor, stale)


def build_late_data_sensor(settings: Settings, auto: AutomationSettings) -> dg.SensorDefinition:
    def late_data_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        """Watches the landing zone for new files, late folders included, and rebuilds what
        they change: raw of their arrival (or rate) date at once, then staging and fact of
        exactly the event days inside the lateness window that their records carry (for rate
        files: the days whose rate they set), once those raw runs have succeeded (a failed
        one holds its days until a re-execution succeeds or its raw partitions are rebuilt).
        It also rebuilds stale event days, whoever built their raw: a day whose raw window
        was built after its last staging attempt, if that attempt held it, or published it and
        the build was not this sensor's (a backfill of later days, the daily refresh without
        its follow-up). Contiguous days run as one ranged run; run keys make a re-evaluated
        tick request nothing twice."""
        tick = evaluate(settings, auto, context.instance, context.cursor)
        for finding in tick.detection.findings:
            context.log.info(finding.line())
        for request in tick.stale:
            context.log.info(f"{request.start}..{request.end}: {request.why}")
        cursor = tick.cursor.dumps()
        failed = sorted(
            {
                r.run_id[:8]
                for g in tick.cursor.pending
                for r in failed_raw_runs(context.instance, g)
            }
        )
        if failed:
            context.log.warning(
                f"raw run(s) {', '.join(failed)} failed: their event days stay pending until "
                "a re-execution succeeds or their raw partitions are rebuilt"
            )
        if not tick.requests:
            waiting = sum(len(g.days) for g in tick.cursor.pending)
            held = f" ({len(failed)} raw run(s) failed: re-execute them)" if failed else ""
            return dg.SensorResult(
                skip_reason=f"no new landed files; {waiting} event day(s) "
                f"waiting for their raw runs{held}",
                cursor=cursor,
            )
        return dg.SensorResult(run_requests=[run_request(r) for r in tick.requests], cursor=cursor)

    return pipeline_sensor(auto, late_data_sensor, LATE_DATA_SENSOR, sensor_status(auto))
