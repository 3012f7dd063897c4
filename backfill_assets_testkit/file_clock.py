"""Waiting on the clock landed files are stamped with (``late_data.scan.clock_ns``), not for a
fixed pause: a test that needs a file stamped before a detection's mark, or after another file
or mark, waits until the clock reads past the stamps already there, with a deadline."""

from __future__ import annotations

import os
import time
from pathlib import Path

from backfill_assets.late_data.scan import clock_ns

DEADLINE_S = 5.0  # the file clock ticks every few milliseconds


def clock_after(stamp_ns: int, deadline_s: float = DEADLINE_S) -> int:
    """The file clock's first reading after ``stamp_ns``, once it reads so: a file created from
    then on is stamped after ``stamp_ns``, and a detection marked then takes what was."""
    give_up = time.monotonic() + deadline_s
    while (now := clock_ns()) <= stamp_ns:
        assert time.monotonic() < give_up, f"the file clock stayed at {now} <= {stamp_ns}"
        time.sleep(0.001)
    return now


def newest_stamp(root: Path) -> int:
    """The latest change time of ``root`` and of every folder and file under it."""
    newest = os.lstat(root).st_ctime_ns
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            newest = max(newest, os.lstat(os.path.join(folder, name)).st_ctime_ns)
    return newest


def past_stamps(root: Path, deadline_s: float = DEADLINE_S) -> int:
    """Wait until the file clock reads after the change time of everything under ``root``; that
    reading."""
    return clock_after(newest_stamp(root), deadline_s)
