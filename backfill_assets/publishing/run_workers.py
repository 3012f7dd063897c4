"""The process executing a run, and the release of runs whose process died.

A run whose process is SIGKILLed (by an operator, or by the kernel when memory runs out)
stays "started" in Dagster for ever, and keeps its slot of the ``spark`` pool: every later
Spark step, of any run, waits for that slot in silence. Dagster's run monitoring would notice
only for launchers that can check a worker's health; the default launcher cannot, and the
CLI's runs execute in the CLI's own process.

So each run records the process executing it (tag ``WORKER_TAG``: host, pid and start time,
the last so that a reused pid is not taken for the same process): the CLI when it starts a
run, the first step of a run the daemon launched. Before starting runs the CLI releases
every unfinished run whose recorded process, on this host, is gone: the run is marked
failed and its pool slots are freed. Running the backfill again, or re-executing that run
from failure, then resumes the work; the lake never holds half of a write (see ``lake``).
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


def worker_identity(pid: int | None = None) -> str:
    """``host:pid:start`` of a process (default: this one)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{psutil.Process(pid).create_time():.2f}"


def worker_gone(identity: str) -> bool:
    """True when the process ``identity`` names ran on this host and no longer runs; False
    when it runs, or ran elsewhere (nothing here can tell)."""
    host, _, rest = identity.partition(":")
    pid_text, _, started = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        return f"{psutil.Process(int(pid_text)).create_time():.2f}" != started
    except psutil.NoSuchProcess:
        return True


def record_worker(context: dg.AssetExecutionContext | dg.OpExecutionContext) -> None:
    """Tag the run with this process, unless it already is (the CLI tags its runs at launch)."""
    me = worker_identity()
    if context.run.tags.get(WORKER_TAG) != me:
        context.instance.add_run_tags(context.run_id, {WORKER_TAG: me})


def release_orphaned_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed every unfinished run whose process is gone, and free its pool slots; the
    ids of the runs released."""
    released = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED)):
        identity = run.tags.get(WORKER_TAG)
        if identity is None or not worker_gone(identity):
            continue
        instance.report_run_failed(
            run,
            f"its process ({identity}) ended without finishing the run (killed?): released, "
            "its pool slots freed; run the backfill again or re-execute this run from failure",
        )
        if instance.event_log_storage.supports_global_concurrency_limits:
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        released.append(run.run_id)
    return released
