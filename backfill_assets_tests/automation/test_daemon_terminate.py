"""With the real dagster-daemon, a ranged run stopped mid-job: Terminate (what the UI's Terminate
and a backfill's Cancel call, ``run_launcher.terminate``) ends it Canceled within 30 s, and the
daemon's own stop (SIGTERM to its process group) ends it failed; neither with a step retry or a
run retry, nor anything published, nor the run left STARTED."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from subprocess import Popen

import dagster as dg
import psutil
import pytest
from dagster._core.events import DagsterEventType

from backfill_assets.automation.state import load_cursor
from backfill_assets_tests.automation.landing_files import order, write_orders
from backfill_assets_tests.automation.test_daemon_dead_run import (
    LAUNCH_SECONDS,
    paused_daemon_env,
    stop_all,
    tree,
)
from backfill_assets_tests.automation.test_daemon_e2e import (
    start_daemon,
    wait_for,
)

pytestmark = pytest.mark.e2e

TERMINATE_SECONDS = 30  # Terminate to Canceled: the bound the runbook promises
RETRY_WATCH_SECONDS = 20  # long enough for the daemon's run-retry pass to have acted


@dataclass
class PausedRun:
    instance: dg.DagsterInstance
    daemon: Popen
    env: dict[str, str]
    log: Path
    run: dg.DagsterRun
    seen: set[psutil.Process]


@contextlib.contextmanager
def paused_daemon_run(root: Path, background: bool = False) -> Iterator[PausedRun]:
    """The daemon's sensor launches raw's run for a landed file; the run's Spark job waits in
    a task (its driver in a py4j call), as a long write would. Everything is stopped after.
    ``background``: the daemon is started as a background job is (``start_daemon``)."""
    env, pause = paused_daemon_env(root, "mid_files")
    log = root / "daemon.log"
    with dg.DagsterInstance.from_config(str(root / "home")) as instance, open(log, "wb") as out:
        daemon = start_daemon(env, out, background)
        seen: set[psutil.Process] = set()
        paused: PausedRun | None = None
        try:
            wait_for("the sensor's first tick", lambda: load_cursor(instance), daemon, log)
            write_orders(
                root / "landing",
                date(2024, 1, 3),
                "a.jsonl",
                [order("o1", "2024-01-03T08:00:00Z"), order("o2", "2024-01-03T09:00:00Z")],
            )
            wait_for(
                "raw's job paused mid-write",
                lambda: (pause / "mid_files.1.reached").exists(),
                daemon,
                log,
                LAUNCH_SECONDS,
            )
            [run] = instance.get_runs()
            assert run.status == dg.DagsterRunStatus.STARTED
            seen |= tree(daemon.pid)
            paused = PausedRun(instance, daemon, env, log, run, seen)
            yield paused
        finally:
            current = paused.daemon if paused is not None else daemon  # a test may restart it
            assert stop_all(current, seen) == []  # nothing it started outlived it


def wait_until_ended(paused: PausedRun, seconds: float) -> float:
    """Seconds until the run is finished (a test failure naming the status past ``seconds``)."""
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        run = paused.instance.get_run_by_id(paused.run.run_id)
        if run is not None and run.is_finished:
            return time.monotonic() - began
        time.sleep(0.5)
    run = paused.instance.get_run_by_id(paused.run.run_id)
    pytest.fail(
        f"the run is still {run.status if run else None} after {seconds} s; daemon log:\n"
        + paused.log.read_text(errors="replace")[-3000:]
    )


def assert_stopped_cleanly(paused: PausedRun, lake: Path) -> dg.DagsterRun:
    """No step retry, no run retry (after the retry pass had time to act), nothing published."""
    time.sleep(RETRY_WATCH_SECONDS)
    instance, run_id = paused.instance, paused.run.run_id
    retries = instance.get_records_for_run(run_id, of_type=DagsterEventType.STEP_UP_FOR_RETRY)
    assert retries.records == []
    assert [r.run_id for r in instance.get_runs()] == [run_id]
    assert sorted(lake.glob("*/*/_delta_log/*.json")) == []
    final = instance.get_run_by_id(run_id)
    assert final is not None
    return final


def test_terminate_cancels_a_running_step_without_retry(tmp_path):
    """Under a daemon started in the background (SIGINT ignored), as under `make ui`."""
    with paused_daemon_run(tmp_path, background=True) as paused:
        paused.instance.run_launcher.terminate(paused.run.run_id)
        took = wait_until_ended(paused, TERMINATE_SECONDS + 30)
        final = assert_stopped_cleanly(paused, tmp_path / "lake")
    assert final.status == dg.DagsterRunStatus.CANCELED
    assert took <= TERMINATE_SECONDS, took


def test_the_daemon_stopping_ends_its_runs_instead_of_leaving_them_started(tmp_path):
    """SIGTERM to the daemon's process group (Ctrl-C or a service manager stopping `make ui`):
    the run's step stops as on Terminate and the run ends failed, not STARTED; the daemon's next
    start does not retry it."""
    with paused_daemon_run(tmp_path) as paused:
        os.killpg(paused.daemon.pid, signal.SIGTERM)
        took = wait_until_ended(paused, TERMINATE_SECONDS + 30)
        paused.daemon.wait(timeout=60)
        restarted = time.time()
        with open(paused.log, "ab") as out:
            paused.daemon = start_daemon(paused.env, out)
        wait_for(
            "every daemon of the restarted process to beat",
            lambda: all(
                beat.timestamp > restarted
                for beat in paused.instance.get_daemon_heartbeats().values()
            ),
            paused.daemon,
            paused.log,
            LAUNCH_SECONDS,
        )
        final = assert_stopped_cleanly(paused, tmp_path / "lake")
    assert final.status == dg.DagsterRunStatus.FAILURE
    assert took <= TERMINATE_SECONDS, took
