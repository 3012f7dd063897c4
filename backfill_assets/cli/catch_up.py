"""``backfill-assets catch-up``: the sensor's detection, run now and synchronously.

For operators (the sensor is off, or they will not wait for its next tick) and for tests.
It reads the sensor's cursor, detects what is new (counting every folder's files, see
``late_data/scan.py``), runs raw first, then staging + fact for every pending event day (its
own and any the sensor left waiting) whose raw runs succeeded, then the stale event days (whose
raw window was built after their last staging attempt, ``late_data/stale.py``), each as ranged
runs through Dagster in this process, then advances the cursor. A group whose raw run failed
stays pending in the cursor, and the next ``catch-up`` runs that raw request again first.

It refuses to run while ``late_data_sensor`` is running: the sensor's tick stores its own
cursor (pending groups included) whatever ``catch-up`` wrote meanwhile, and ``catch-up``
would overwrite the sensor's, so one of the two would drop the other's pending event days.
Stop the sensor, run ``catch-up``, start the sensor: it continues from the cursor left here.
(The daily schedule's event days are not its business: ``daily_refresh_follow_up`` requests
them.)
"""

from __future__ import annotations

import sys
import time

import dagster as dg

from backfill_assets.automation.stale_days import find_stale_days
from backfill_assets.automation.state import (
    detect_now,
    failed_raw_runs,
    group_ready,
    load_cursor,
    rerun_request,
    save_cursor,
    sensor_is_running,
)
from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import CLI_TAG, LATE_DATA_SENSOR, REQUEST_TAG, STEP_ASSETS, WHY_TAG
from backfill_assets.cli.instance import ensure_dagster_home
from backfill_assets.cli.outcome_table import report_outcomes
from backfill_assets.cli.runner import RunOutcome, execute
from backfill_assets.late_data import Detection, Request, release
from backfill_assets.late_data.stale import StaleDay, stale_requests
from backfill_assets.settings import AutomationSettings, Settings


def _explain(detection: Detection, reruns: list[Request], settle_seconds: float) -> None:
    files = [f for f in detection.findings if not f.path.endswith("/")]
    folders = [f for f in detection.findings if f.path.endswith("/")]
    print(
        f"catch-up: {len(files)} new file(s), {len(folders)} folder(s) to build whole; "
        f"{len(detection.cursor.pending)} group(s) of event days to rebuild"
    )
    if detection.settling:
        print(
            f"  {detection.settling} file(s) or folder(s) landed less than {settle_seconds:g} s "
            "ago (BACKFILL_LANDING_SETTLE_SECONDS) may still be filling: left for the next "
            "catch-up or the sensor"
        )
    for finding in detection.findings:
        print(f"  {finding.line()}")
    for group in detection.cursor.pending:
        if group is not detection.group:
            print(f"  left pending: {group.why}")
    for request in reruns:
        print(f"  raw run to run again: {request.why}")


def _explain_stale(stale: list[StaleDay]) -> None:
    held = sum(1 for s in stale if s.held)
    print(
        f"catch-up: {len(stale)} stale event day(s) ({held} held at their last attempt): "
        "raw of their window was built after their last staging attempt"
    )
    for request in stale_requests(stale):
        print(f"  {request.start}..{request.end}: {request.why}")


REFUSAL = (
    "catch-up: refusing: {sensor} is running. Each of its ticks stores its own cursor, so "
    "catch-up and the sensor would drop each other's pending event days. Stop it first, in the "
    "UI (Automation > {sensor} > toggle off) or with\n"
    "  dagster sensor stop {sensor} -w workspace.yaml\n"
    "then run catch-up, then start the sensor again (dagster sensor start {sensor} "
    "-w workspace.yaml): it continues from the cursor catch-up leaves."
)


def run_requests(
    instance: dg.DagsterInstance, requests: list[Request], command: str = "catch-up"
) -> list[RunOutcome]:
    """Each request as one ranged run, now, in order, tagged with ``command``."""
    outcomes, began = [], time.monotonic()
    for n, request in enumerate(requests, start=1):
        names = "+".join(k.to_user_string() for k in STEP_ASSETS[request.step])
        print(f"[{n}/{len(requests)}] {names} {request.start}..{request.end} ...", flush=True)
        plan = RunPlan(STEP_ASSETS[request.step], request.start, request.end)
        tags = {REQUEST_TAG: request.key, WHY_TAG: request.why, CLI_TAG: command}
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
    """Exit 0 when every rebuilt partition was published with passing checks, 1 otherwise (and
    1, having done nothing, while ``late_data_sensor`` is running)."""
    auto = auto or AutomationSettings.from_env()
    ensure_dagster_home()
    with dg.DagsterInstance.get() as instance:
        if sensor_is_running(instance, declared_running=auto.running):
            print(REFUSAL.format(sensor=LATE_DATA_SENSOR), file=sys.stderr)
            return 1
        # an operator's run: every folder's files are counted (recount_ns 0)
        detection = detect_now(settings, instance, load_cursor(instance), auto.settle_ns, 0)
        pending = detection.cursor.pending
        failed = {r.run_id: r for g in pending for r in failed_raw_runs(instance, g)}
        reruns = [r for r in map(rerun_request, failed.values()) if r is not None]
        _explain(detection, reruns, auto.settle_seconds)
        outcomes = run_requests(instance, detection.raw + reruns)
        # a group whose raw run never appeared (dropped by the daemon) is not waited for here
        released, cursor = release(
            detection.cursor,
            lambda group: group_ready(instance, group, time.time(), orphan_seconds=0.0),
        )
        outcomes += run_requests(instance, released)
        for group in cursor.pending:
            print(f"still pending (its raw run failed or has not ended): {group.why}")
        save_cursor(instance, cursor.dumps())
        waiting = {d for g in cursor.pending for d in g.days}
        stale = find_stale_days(instance, settings, skip=waiting)
        _explain_stale(stale)
        outcomes += run_requests(instance, stale_requests(stale))
    if not outcomes:
        print("nothing to rebuild")
        return 0
    return report_outcomes(outcomes)
