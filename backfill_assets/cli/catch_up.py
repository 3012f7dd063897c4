"""``backfill-assets catch-up``: the sensor's detection, run now and synchronously.

For operators (the sensor is off, or they will not wait for its next tick) and for tests.
It reads the sensor's cursor, detects what is new (counting every folder's files, see
``late_data/scan.py``), runs raw first and then staging + fact
for every pending event day (its own and any the sensor left waiting), each as ranged runs
through Dagster in this process, then advances the cursor. Run it while the sensor is
stopped: both advancing one cursor at the same moment would race. (The daily schedule's
event days are not its business: ``daily_refresh_follow_up`` requests them.)
"""

from __future__ import annotations

import time

import dagster as dg

from backfill_assets.catalog import CLI_TAG, REQUEST_TAG, STEP_ASSETS, WHY_TAG
from backfill_assets.cli.instance import ensure_dagster_home
from backfill_assets.cli.planning import RunPlan
from backfill_assets.cli.report import report_outcomes
from backfill_assets.cli.runner import RunOutcome, execute
from backfill_assets.defs.automation.settings import AutomationSettings
from backfill_assets.defs.automation.state import (
    detect_now,
    load_cursor,
    save_cursor,
    sensor_is_running,
)
from backfill_assets.late_data import Detection, Request, event_day_requests
from backfill_assets.settings import Settings


def _explain(detection: Detection, requests: list[Request]) -> None:
    files = [f for f in detection.findings if not f.path.endswith("/")]
    folders = [f for f in detection.findings if f.path.endswith("/")]
    print(
        f"catch-up: {len(files)} new file(s), {len(folders)} folder(s) to build whole; "
        f"{len(detection.cursor.pending)} group(s) of event days to rebuild"
    )
    for finding in detection.findings:
        print(f"  {finding.line()}")
    for group in detection.cursor.pending:
        if group is not detection.group:
            print(f"  left pending by the sensor: {group.why}")
    if not requests:
        print("nothing to rebuild")


def run_requests(instance: dg.DagsterInstance, requests: list[Request]) -> list[RunOutcome]:
    outcomes, began = [], time.monotonic()
    for n, request in enumerate(requests, start=1):
        names = "+".join(k.to_user_string() for k in STEP_ASSETS[request.step])
        print(f"[{n}/{len(requests)}] {names} {request.start}..{request.end} ...", flush=True)
        plan = RunPlan(STEP_ASSETS[request.step], request.start, request.end)
        tags = {REQUEST_TAG: request.key, WHY_TAG: request.why, CLI_TAG: "catch-up"}
        outcome = execute(plan, instance, tags=tags)
        outcomes.append(outcome)
        print(
            f"[{n}/{len(requests)}] {names}: run {outcome.run_id[:8]} "
            f"{'succeeded' if outcome.success else 'FAILED'}; "
            f"elapsed {time.monotonic() - began:.0f}s",
            flush=True,
        )
    return outcomes


def run_catch_up(settings: Settings, auto: AutomationSettings | None = None) -> int:
    """Exit 0 when every rebuilt partition was published with passing checks, 1 otherwise."""
    auto = auto or AutomationSettings.from_env()
    ensure_dagster_home()
    with dg.DagsterInstance.get() as instance:
        if sensor_is_running(instance):
            print(
                "catch-up: warning: late_data_sensor is running; stop it first to avoid "
                "two detections racing on one cursor"
            )
        # an operator's run: every folder's files are counted (recount_ns 0)
        detection = detect_now(settings, instance, load_cursor(instance), auto.settle_ns, 0)
        requests = detection.raw + event_day_requests(detection.cursor.pending)
        _explain(detection, requests)
        outcomes = run_requests(instance, requests)
        save_cursor(instance, detection.cursor.with_pending([]).dumps())
    if not outcomes:
        return 0
    return report_outcomes(outcomes)
