"""The process executing a run, and the release of runs whose process died.

A run whose process is SIGKILLed (by an operator, or by the kernel when memory runs out)
stays "started" in Dagster for ever, and keeps its slot of the ``spark`` pool: every later
Spark step, of any run, waits for that slot in silence. Dagster's run monitoring notices a
dead worker only for launchers that can check a worker's health; the default launcher cannot
(dagster.yaml enables monitoring for what it can do: fail runs stuck starting, free the slots
of ended runs), and the CLI's runs execute in the CLI's own process.

So the process executing a run is known: Dagster stores its pid in an engine event before any
step takes a slot (a reused pid is told apart by the process's start time, later than that
event), and the run's tag ``WORKER_TAG`` (host, pid and start time) says on which host it runs:
the CLI tags its runs when it starts them, the first step of a run the daemon launched tags it.
Every unfinished run whose process, on this host, is gone is released: it is marked failed and
its pool slots are freed. The CLI does so before starting runs, the
daemon's ``release_dead_runs`` sensor on every tick. Running the backfill again, re-executing
that run from failure, or Dagster's own retry of a crashed run then resumes the work; the lake
never holds half of a write (see ``lake``).
"""

from __future__ import annotations

import os
import socket

import dagster as dg
import psutil

from backfill_assets.catalog import WORKER_TAG

UNFINISHED = [
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
# The worker's pid is in one of a run's first engine events ("Started process for run").
WORKER_EVENTS = 50
# psutil's start times come from the boot time, in whole seconds: a process that reported its
# pid can look started up to a second after the report.
CLOCK_SLACK_SECONDS = 1.0


def worker_identity(pid: int | None = None) -> str:
    """``host:pid:start`` of a process (default: this one)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{psutil.Process(pid).create_time():.2f}"


def reported_worker(instance: dg.DagsterInstance, run: dg.DagsterRun) -> tuple[int, float] | None:
    """The pid of the process executing ``run`` and when it said so: Dagster's first engine
    event of the run that carries a pid (the launched worker's "Started process for run", the
    in-process executor's "Executing steps in process"), stored before any step takes a slot."""
    records = instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT, limit=WORKER_EVENTS
    ).records
    for record in records:
        event = record.event_log_entry.dagster_event
        pid = event.engine_event_data.metadata.get("pid") if event else None
        text = str(pid.value) if pid is not None else ""
        if text.isdigit():
            return int(text), record.event_log_entry.timestamp
    return None


def process_gone(pid: int, reported_at: float) -> bool:
    """True when the process that reported ``pid`` at ``reported_at`` no longer runs: none has
    that pid, or the one that has it started after the report (the pid was reused)."""
    try:
        return psutil.Process(pid).create_time() > reported_at + CLOCK_SLACK_SECONDS
    except psutil.NoSuchProcess:
        return True


def gone_worker(
    instance: dg.DagsterInstance, run: dg.DagsterRun, launched_here: bool
) -> str | None:
    """The worker of ``run``, named, if it ran on this host and is gone; None otherwise. The
    run's tag says the worker's host, when it names the reported process (a re-execution
    inherits its parent's tag until its own first step records itself). Without it, the worker
    is taken to be local only ``launched_here``."""
    reported = reported_worker(instance, run)
    if reported is None:
        return None
    pid, at = reported
    host, _, rest = run.tags.get(WORKER_TAG, "").partition(":")
    tagged = rest.partition(":")[0] == str(pid)
    if (host == socket.gethostname() if tagged else launched_here) and process_gone(pid, at):
        return f"its process ({run.tags[WORKER_TAG] if tagged else f'pid {pid}'})"
    return None


def record_worker(context: dg.AssetExecutionContext | dg.OpExecutionContext) -> None:
    """Tag the run with this process, unless it already is (the CLI tags its runs at launch)."""
    me = worker_identity()
    if context.run.tags.get(WORKER_TAG) != me:
        context.instance.add_run_tags(context.run_id, {WORKER_TAG: me})


def release_orphaned_runs(instance: dg.DagsterInstance, launched_here: bool = False) -> list[str]:
    """Mark failed every unfinished run whose process is gone, and free its pool slots; the
    ids of the runs released. ``launched_here``: the caller runs beside the daemon that
    launches runs, so a run whose worker has not tagged it yet is judged too (``gone_worker``)."""
    released = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED)):
        who = gone_worker(instance, run, launched_here)
        if who is None:
            continue
        instance.report_run_failed(
            run,
            f"{who} ended without finishing the run (killed?): released, its pool slots "
            "freed; run the backfill again or re-execute this run from failure",
        )
        if instance.event_log_storage.supports_global_concurrency_limits:
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        released.append(run.run_id)
    return released
