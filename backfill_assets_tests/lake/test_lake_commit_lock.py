"""The commit lock of a local table: one holder across processes, re-entrant within a thread,
freed when its holder is killed, refused after the wait naming the holder, and kept by vacuum."""

from __future__ import annotations

import signal
import sys

import pytest

from backfill_assets.lake import LakeError, commit_lock
from backfill_assets_testkit.processes import kill_group, start, subprocess_env
from backfill_assets_tests.lake.lake_support import THINGS, commit, wait_for
from backfill_assets_tests.lake.test_lake_staged import D1, frame

HOLD = """
import sys, time
from backfill_assets.lake import commit_lock
with commit_lock.held(sys.argv[1], "held by the test's child"):
    open(sys.argv[2], "w").close()
    time.sleep(600)
"""


def test_a_killed_holder_frees_the_lock_and_a_waiter_is_told_who_holds_it(tmp_path):
    table_dir = str(tmp_path / "t")
    taken = tmp_path / "taken"
    child = start(
        [sys.executable, "-c", HOLD, table_dir, str(taken)], subprocess_env(), tmp_path / "log"
    )
    try:
        wait_for(taken, [child], timeout=120)
        with pytest.raises(LakeError, match=rf"pid {child.pid}.*held by the test's child"):
            with commit_lock.held(table_dir, "waiter", wait_seconds=0.5):
                pass
        kill_group(child, signal.SIGKILL)
        with commit_lock.held(table_dir, "after the kill", wait_seconds=5):
            with commit_lock.held(table_dir, "again, in the same thread", wait_seconds=0):
                pass
    finally:
        kill_group(child)


def test_vacuum_keeps_the_lock_file(lake):
    lake.replace_partitions(THINGS, frame(lake, [(D1, 1, "a")]), "d", [D1], commit("a"))
    lake.replace_partitions(THINGS, frame(lake, [(D1, 2, "b")]), "d", [D1], commit("b"))
    lock = lake.path(THINGS) / commit_lock.LOCK_NAME
    assert lock.is_file()
    lake.vacuum(THINGS, retention_hours=0)
    assert lock.is_file()
