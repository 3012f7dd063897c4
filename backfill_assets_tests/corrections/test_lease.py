"""An intent carries a lease: recovery from another host (or container) leaves a cutover under
way alone while its lease is live, recovers it once the lease expired, and a recovery that took
an intent over stops the stalled operation at its next renewal, each commit made once."""

from __future__ import annotations

import datetime as dt
import os
import socket
import time
from pathlib import Path

import pytest

import backfill_assets.lake.lock_holder as lock_holder
from backfill_assets.corrections import lease, lifecycle, recovery, registry
from backfill_assets.corrections.registry import CorrectionError, State
from backfill_assets.lake import Lake
from backfill_assets_testkit.small_lake import (
    CID,
    FIXED,
    TABLES,
    after_cutover,
    copy,
    production_rows,
    rows,
    start_cutover,
)


def as_another_host(monkeypatch, later: dt.timedelta = dt.timedelta(0)) -> None:
    """This process as one on another machine (another host name, boot and PID namespace), its
    clock ``later`` ahead."""
    real = lease.clock
    monkeypatch.setattr(socket, "gethostname", lambda: "another-host")
    here = lock_holder.identity()
    monkeypatch.setattr(
        lock_holder, "identity", lambda: {**here, "boot_id": "another-boot", "pid_ns": "pid:[1]"}
    )
    monkeypatch.setattr(lease, "clock", lambda: real() + later)


class PausedCutover:
    """``cutover`` in a child process, stopped at the first visit of a pause point."""

    def __init__(self, root: Path, pause: Path, point: str) -> None:
        self.pause, self.point = pause, point
        env = {**os.environ, "BACKFILL_LAKE_PAUSE_DIR": str(pause), "BACKFILL_LAKE_PAUSE_AT": point}
        self.child = start_cutover(root, env)
        for n in range(2, 6):  # later visits go on at once
            (pause / f"{point}.{n}.resume").touch()
        reached = pause / f"{point}.1.reached"
        for _ in range(3000):
            if reached.exists() or self.child.poll() is not None:
                break
            time.sleep(0.02)
        if not reached.exists():
            self.child.kill()
            raise AssertionError(f"the cutover never reached {point}: {self.child.communicate()}")

    def resume(self) -> tuple[int, str]:
        (self.pause / f"{self.point}.1.resume").touch()
        _, err = self.child.communicate(timeout=120)
        return self.child.returncode, err

    def stop(self) -> None:
        if self.child.poll() is None:
            self.child.kill()
            self.child.wait()


@pytest.fixture
def pause(tmp_path) -> Path:
    folder = tmp_path / "pause"
    folder.mkdir()
    return folder


def cutover_commits(lake: Lake, table: str) -> int:
    return sum(
        e["metadata"].get("extra", {}).get("action") == "cutover" for e in lake.history(table)
    )


def test_maintain_on_another_host_leaves_a_live_cutover_alone(
    template, tmp_path, pause, monkeypatch
):
    lake = copy(template, tmp_path / "lake")
    running = PausedCutover(lake.root, pause, "publish_read")  # its lease renewed, no commit yet
    try:
        with monkeypatch.context() as patch:
            as_another_host(patch)
            pending = registry.get(lake.root, CID).pending
            found = recovery.recover_all(lake)
            assert [(f.correction_id, f.action, f.result) for f in found] == [
                (CID, "cutover", "in progress")
            ]
            with pytest.raises(CorrectionError, match="under way"):
                lifecycle.rollback(lake, CID)
            assert registry.get(lake.root, CID).pending == pending
        code, err = running.resume()
    finally:
        running.stop()
    assert code == 0, err[-3000:]
    c = registry.get(lake.root, CID)
    assert c.state == State.CUT_OVER and c.pending == {}
    for table in TABLES:
        assert rows(lake.root, table) == after_cutover(table)


def foreign_intent(lake: Lake, expires: dt.datetime) -> dict:
    """A cutover's intent saved by a process on another machine, nothing of it committed."""
    c = registry.get(lake.root, CID)
    c.pending = {
        "action": "cutover",
        "at": registry.now(),
        "by": "someone",
        "host": "another-host",
        "boot_id": "another-boot",
        "pid_ns": "pid:[1]",
        "pid": 1,
        "started": 1,
        "heartbeat": registry.now(),
        "expires": expires.isoformat(timespec="seconds"),
        "days": [d.isoformat() for d in FIXED],
        "tables": {t: {"write_id": f"w{i}", "from": 0} for i, t in enumerate(TABLES)},
        "since": dict.fromkeys(TABLES, 0),
    }
    registry.save(lake.root, c)
    return c.pending


def test_an_intent_from_another_host_is_left_alone_until_its_lease_expires(template, tmp_path):
    lake = copy(template, tmp_path / "lake")
    pending = foreign_intent(lake, lease.clock() + dt.timedelta(minutes=5))
    found = recovery.recover(lake, CID)
    assert found is not None and found.result == "in progress"
    assert "another-host" in found.detail
    assert registry.get(lake.root, CID).pending == pending
    foreign_intent(lake, lease.clock() - dt.timedelta(seconds=1))
    found = recovery.recover(lake, CID)
    assert found is not None and found.result == "abandoned"
    c = registry.get(lake.root, CID)
    assert c.pending == {} and c.state == State.DIFFED
    for table in TABLES:
        assert rows(lake.root, table) == production_rows(table)


def test_a_recovery_past_the_lease_takes_over_and_stops_the_stalled_cutover(
    template, tmp_path, pause, monkeypatch
):
    lake = copy(template, tmp_path / "lake")
    stalled = PausedCutover(lake.root, pause, "after_commit")  # staging's commit landed
    try:
        with monkeypatch.context() as patch:
            as_another_host(patch, later=lease.LEASE + dt.timedelta(minutes=1))
            found = recovery.recover(lake, CID)
            assert found is not None and (found.action, found.result) == ("cutover", "completed")
        code, err = stalled.resume()
    finally:
        stalled.stop()
    assert code != 0 and "saved again" in err, err[-3000:]  # its renewal found it taken over
    c = registry.get(lake.root, CID)
    assert c.state == State.CUT_OVER and c.pending == {}
    for table in TABLES:
        assert rows(lake.root, table) == after_cutover(table)
        assert cutover_commits(lake, table) == 1, table
