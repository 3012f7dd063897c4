"""The release of runs whose worker process died (``publishing.run_workers``): the pid the worker
reports at its start, on the host its tag names or, beside the daemon, on this one."""

from __future__ import annotations

import subprocess
import sys
import time

import dagster as dg
import psutil
import pytest
from dagster._core.events import DagsterEvent, DagsterEventType, EngineEventData
from dagster._core.events.log import EventLogEntry

from backfill_assets.catalog import WORKER_TAG
from backfill_assets.publishing.run_workers import release_orphaned_runs, worker_identity

POOL = "spark"


@pytest.fixture
def instance(tmp_path):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.event_log_storage.set_concurrency_slots(POOL, 1)
        yield instance


@pytest.fixture
def sleeper():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait(timeout=10)


def started_run(instance: dg.DagsterInstance, tags: dict | None = None) -> dg.DagsterRun:
    """A started run holding the pool's slot."""
    run = instance.add_run(
        dg.DagsterRun(job_name="backfill_job", status=dg.DagsterRunStatus.STARTED, tags=tags or {})
    )
    assert instance.event_log_storage.claim_concurrency_slot(POOL, run.run_id, "raw").is_claimed
    return run


def report_worker(instance: dg.DagsterInstance, run: dg.DagsterRun, pid: int, at: float) -> None:
    """The engine event a launched run's worker stores as it starts, at time ``at``."""
    event = DagsterEvent(
        event_type_value=DagsterEventType.ENGINE_EVENT.value,
        job_name=run.job_name,
        message=f"Started process for run (pid: {pid}).",
        event_specific_data=EngineEventData.in_process(pid),
    )
    instance.store_event(
        EventLogEntry(
            error_info=None,
            level="DEBUG",
            user_message="",
            run_id=run.run_id,
            timestamp=at,
            dagster_event=event,
        )
    )


def holders(instance: dg.DagsterInstance) -> set[str]:
    return {s.run_id for s in instance.event_log_storage.get_concurrency_info(POOL).claimed_slots}


def status(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dg.DagsterRunStatus:
    stored = instance.get_run_by_id(run.run_id)
    assert stored is not None, f"no run {run.run_id}"
    return stored.status


def test_a_tagged_run_whose_process_died_is_failed_and_its_slot_freed(instance, sleeper):
    run = started_run(instance, {WORKER_TAG: worker_identity(sleeper.pid)})
    report_worker(instance, run, sleeper.pid, time.time())
    assert release_orphaned_runs(instance) == []
    sleeper.kill()
    sleeper.wait(timeout=10)
    assert release_orphaned_runs(instance) == [run.run_id]
    assert status(instance, run) == dg.DagsterRunStatus.FAILURE
    assert holders(instance) == set()


def test_beside_the_daemon_a_launched_run_is_judged_by_the_pid_its_worker_reported(
    instance, sleeper
):
    run = started_run(instance)
    report_worker(instance, run, sleeper.pid, time.time())
    assert release_orphaned_runs(instance, launched_here=True) == []  # the worker lives
    sleeper.kill()
    sleeper.wait(timeout=10)
    assert release_orphaned_runs(instance) == []  # the CLI judges only tagged runs
    assert release_orphaned_runs(instance, launched_here=True) == [run.run_id]
    assert status(instance, run) == dg.DagsterRunStatus.FAILURE
    assert holders(instance) == set()


def test_a_process_started_after_the_report_is_not_the_worker(instance, sleeper):
    """The pid was reused: the process with it started after the worker reported it."""
    run = started_run(instance)
    report_worker(instance, run, sleeper.pid, psutil.Process(sleeper.pid).create_time() - 60)
    assert release_orphaned_runs(instance, launched_here=True) == [run.run_id]
    assert holders(instance) == set()


def test_a_retry_is_not_released_for_the_dead_worker_named_by_the_tag_it_inherited(
    instance, sleeper
):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    inherited = worker_identity(dead.pid)
    dead.wait(timeout=10)
    run = started_run(instance, {WORKER_TAG: inherited})
    report_worker(instance, run, sleeper.pid, time.time())
    assert release_orphaned_runs(instance) == []
    assert release_orphaned_runs(instance, launched_here=True) == []
    assert holders(instance) == {run.run_id}


def test_a_worker_tagged_on_another_host_is_left_alone(instance, sleeper):
    run = started_run(instance, {WORKER_TAG: f"elsewhere:{sleeper.pid}:1.00"})
    report_worker(instance, run, sleeper.pid, time.time())
    sleeper.kill()
    sleeper.wait(timeout=10)
    assert release_orphaned_runs(instance, launched_here=True) == []


def test_a_run_with_no_worker_known_is_left_alone(instance, sleeper):
    """A tag alone is no worker: a launched run is tagged by its parent until its worker starts."""
    identity = worker_identity(sleeper.pid)
    sleeper.kill()
    sleeper.wait(timeout=10)
    run = started_run(instance, {WORKER_TAG: identity})
    assert release_orphaned_runs(instance, launched_here=True) == []
    assert status(instance, run) == dg.DagsterRunStatus.STARTED
    assert holders(instance) == {run.run_id}
