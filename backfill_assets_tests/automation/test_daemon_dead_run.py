"""With the real dagster-daemon: a run it launched is SIGKILLed while holding the ``spark``
pool's slot; the daemon alone marks the run failed and frees the slot, and its retry takes it."""

from __future__ import annotations

import os
import signal
import subprocess
from datetime import date
from pathlib import Path

import dagster as dg
import psutil
import pytest
import yaml
from dagster._core.events import DagsterEventType

from backfill_assets.automation.state import load_cursor
from backfill_assets.cli.instance import prepare_instance_yaml
from backfill_assets_tests.automation.landing_files import order, write_orders
from backfill_assets_tests.automation.test_daemon_e2e import (
    PROJECT,
    daemon_env,
    start_daemon,
    stop,
    wait_for,
)

POOL = "spark"
# Bounds: Spark's start in the run worker, then the release (a sensor tick, a monitoring pass).
LAUNCH_SECONDS = 240
RELEASE_SECONDS = 90


def holders(instance: dg.DagsterInstance) -> set[str]:
    """The runs holding a slot of the ``spark`` pool."""
    info = instance.event_log_storage.get_concurrency_info(POOL)
    return {slot.run_id for slot in info.claimed_slots}


def reported_pid(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The pid of the run's worker, as the worker itself reported it at its start."""
    for record in instance.get_records_for_run(
        run_id, of_type=DagsterEventType.ENGINE_EVENT, limit=50
    ).records:
        pid = record.event_log_entry.get_dagster_event().engine_event_data.metadata.get("pid")
        if pid is not None:
            return int(str(pid.value))  # Dagster reports it as text
    return None


def paused_worker(pause: Path) -> int | None:
    """The pid of the process paused at ``staged`` (raw's step, between stage and publish)."""
    marker = pause / "staged.1.reached"
    text = marker.read_text() if marker.exists() else ""
    return int(text) if text.isdigit() else None


def tree(pid: int) -> set[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return {root, *root.children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def stop_all(daemon: subprocess.Popen, seen: set[psutil.Process]) -> list[psutil.Process]:
    """Stops the daemon's process group, then whatever of ``seen`` outlived it; what survived."""
    seen |= tree(daemon.pid)
    stop(daemon)
    _, alive = psutil.wait_procs(list(seen), timeout=10)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    return psutil.wait_procs(alive, timeout=10)[1]


def paused_daemon_env(
    root: Path, pause_at: str, **run_monitoring: float
) -> tuple[dict[str, str], Path]:
    """A daemon's home under ``root`` (the project's instance settings, the monitoring daemon's
    pass every 5 s instead of 30, and ``run_monitoring``'s other settings), an empty landing,
    and its environment with the lake's pause point ``pause_at`` armed; and the pause folder."""
    (root / "home").mkdir()
    config = yaml.safe_load((PROJECT / "dagster.yaml").read_text())
    config["run_monitoring"].update(poll_interval_seconds=5, **run_monitoring)
    (root / "home" / "dagster.yaml").write_text(yaml.safe_dump(config))
    prepare_instance_yaml(root / "home", PROJECT / "dagster.yaml")  # its storage section
    (root / "landing" / "orders").mkdir(parents=True)
    pause = root / "pause"
    pause.mkdir()
    env = {
        **daemon_env(root),
        "BACKFILL_LAKE_PAUSE_DIR": str(pause),
        "BACKFILL_LAKE_PAUSE_AT": pause_at,
    }
    return env, pause


@pytest.mark.e2e
def test_daemon_releases_the_slot_of_a_killed_run(tmp_path):
    env, pause = paused_daemon_env(tmp_path, "staged", free_slots_after_run_end_seconds=5)
    log, seen = tmp_path / "daemon.log", set()
    with dg.DagsterInstance.from_config(str(tmp_path / "home")) as instance, open(log, "wb") as out:
        daemon = start_daemon(env, out)
        try:
            wait_for("the sensor's first tick", lambda: load_cursor(instance), daemon, log)
            write_orders(
                tmp_path / "landing",
                date(2024, 1, 3),
                "a.jsonl",
                [order("o1", "2024-01-03T08:00:00Z")],
            )
            worker = wait_for(
                "a run paused while holding the slot",
                lambda: paused_worker(pause),
                daemon,
                log,
                LAUNCH_SECONDS,
            )
            [run] = instance.get_runs()
            assert reported_pid(instance, run.run_id) == worker  # the run's own process
            assert holders(instance) == {run.run_id}
            seen |= tree(worker) | tree(daemon.pid)
            os.kill(worker, signal.SIGKILL)
            (pause / "staged.1.reached").unlink()

            released = wait_for(
                "the killed run's release",
                lambda: (
                    instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
                    and run.run_id not in holders(instance)
                ),
                daemon,
                log,
                RELEASE_SECONDS,
            )
            assert released
            # Dagster retries a run that crashed: the retry gets the freed slot and pauses again.
            retry = wait_for(
                "the retry to take the slot", lambda: paused_worker(pause), daemon, log
            )
            seen |= tree(retry)
            assert retry != worker
            assert len(holders(instance) - {run.run_id}) == 1
        finally:
            survivors = stop_all(daemon, seen)
    assert not survivors, survivors
