"""bench/chaos.py, terminated during its live lane, stops every process it started."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

PROJECT = Path(__file__).resolve().parents[2]
START_SECONDS = 180  # the live lane's daemon, code server and backfill are up
STOP_SECONDS = 120  # the harness has stopped them and exited

pytestmark = pytest.mark.slow


def descendants(pid: int) -> set[psutil.Process]:
    try:
        return set(psutil.Process(pid).children(recursive=True))
    except psutil.NoSuchProcess:
        return set()


def command(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return ""


def live_lane_up(seen: set[psutil.Process]) -> bool:
    """The daemon, a code server it started and the backfill's CLI all run."""
    commands = [command(p) for p in seen if alive(p)]
    return all(
        any(part in c for c in commands)
        for part in ("dagster-daemon", "dagster api grpc", "backfill_assets.cli")
    )


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_sigterm_during_the_live_lane_stops_every_process_the_harness_started(tmp_path):
    with open(tmp_path / "chaos.out", "wb") as out:
        harness = subprocess.Popen(
            [
                sys.executable,
                str(PROJECT / "bench" / "chaos.py"),
                *("--kills", "0", "--fuzz-cases", "0", "--seed", "5"),
                *("--live-backfill-days", "2", "--live-days", "1", "--orders-per-day", "10"),
                *("--workdir", str(tmp_path / "chaos")),
            ],
            cwd=PROJECT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    seen: set[psutil.Process] = set()
    try:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline and harness.poll() is None and not live_lane_up(seen):
            seen |= descendants(harness.pid)
            time.sleep(0.2)
        output = (tmp_path / "chaos.out").read_text(errors="replace")
        assert live_lane_up(seen), output[-3000:]

        harness.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_SECONDS
        while time.monotonic() < deadline and harness.poll() is None:
            seen |= descendants(harness.pid)
            time.sleep(0.2)
        assert harness.poll() is not None, "the harness did not exit on SIGTERM"
        _, survivors = psutil.wait_procs([p for p in seen if alive(p)], timeout=5)
        assert not [command(p) for p in survivors if alive(p)]
    finally:  # whatever the outcome, nothing this test started outlives it
        if harness.poll() is None:
            seen |= descendants(harness.pid)
            os.killpg(harness.pid, signal.SIGKILL)
        for process in seen:
            try:
                process.kill()  # psutil checks it is still the process seen, not a reused pid
            except psutil.NoSuchProcess:
                pass
        harness.wait(timeout=10)
