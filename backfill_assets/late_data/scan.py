"""What is new in the landing zone since the cursor: ``os.scandir`` and ``stat``, no Spark.

The clock used is each entry's change time (``st_ctime_ns``), not its modification time:
the kernel sets it when a file is created or renamed into place, and no copy tool can
preserve or back-date it (``cp -p`` and ``rsync -t`` do that to ``st_mtime``). So:

- a complete file (no ``_``/``.`` prefix) is new when its change time is at or after the
  cursor's high-water mark; renaming an in-flight ``_x.jsonl`` to ``x.jsonl`` makes it new then;
- a folder whose own change time is before the mark gained no entries since the last look,
  and is not listed at all: a warm tick over three years costs one ``stat`` per folder;
- except on a *full count* (``recount``): then every folder is listed and its count of
  complete files compared with the cursor's, whatever its change time. Clock skew with a file
  server, or a network share's attribute cache (30-60 s), can stamp a new file and its folder
  before the mark: only the count shows such a file. The sensor counts every folder every
  ``BACKFILL_LANDING_RECOUNT_MINUTES`` (default 10), ``catch-up`` on every run;
- a folder not in the cursor is new as a whole, whatever its files' times: a delivery that
  moves a finished folder into place keeps the files' older change times.

The high-water mark is the scan's start time, read from the clock the kernel stamps files
with (``CLOCK_REALTIME_COARSE`` on Linux, which lags the precise clock by a few
milliseconds), minus a settle margin for clock skew with a file server. Only files stamped
before it are taken; younger ones wait for the next tick. A file created during the scan is
therefore stamped at or after the mark, and the next tick takes it. Where the times do
not explain a folder's new count of files (clock skew on a network share, a folder
replaced by a move), every file of the folder is taken as new: rebuilding too much is
safe, missing a file is not.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from backfill_assets.landing.layout import Dataset, dataset, folder_day, is_complete, leads_outside

_CLOCK_REALTIME_COARSE = 5  # <linux/time.h>; Python does not name it


@dataclass(frozen=True)
class LandedFile:
    """A complete landed file: its path relative to the landing root and its change time."""

    path: str
    stamp_ns: int


@dataclass(frozen=True)
class FolderScan:
    """A partition folder with something to take into account.

    ``how`` is ``first look`` (no cursor yet), ``new folder``, ``new files`` or
    ``unexplained change`` (every file is taken as new, see the module docstring).
    """

    dataset: str
    day: date
    files: tuple[LandedFile, ...]
    new: tuple[LandedFile, ...]
    how: str
    stamp_ns: int = 0  # the folder's own change time


@dataclass(frozen=True)
class DatasetScan:
    changed: list[FolderScan]
    counts: dict[date, int]


def clock_ns() -> int:
    """Now, on the clock files are stamped with: a file created after this call is stamped at
    or after it (the precise clock runs ahead of the kernel's coarse file timestamps)."""
    if sys.platform.startswith("linux"):
        return time.clock_gettime_ns(_CLOCK_REALTIME_COARSE)
    return time.time_ns()


def complete_files(root: str | Path, relative: str, ds: Dataset) -> list[LandedFile]:
    """The complete files of the folder ``relative`` to the landing root, by name; in-flight
    ``_``/``.`` files are not there yet, links leading outside the root are not there at all."""
    found = []
    folder = Path(root) / relative
    if leads_outside(folder, root):
        return []
    with os.scandir(folder) as entries:
        for entry in entries:
            if (
                is_complete(entry.name, ds)
                and entry.is_file()
                and not leads_outside(entry.path, root)
            ):
                found.append(LandedFile(f"{relative}/{entry.name}", entry.stat().st_ctime_ns))
    return sorted(found, key=lambda f: f.path)


def _changes(
    known: int | None, files: list[LandedFile], hw_old: int, hw_new: int, cold: bool
) -> tuple[int, list[LandedFile], str]:
    """(count to remember, new files, how) for a folder that was listed."""
    if cold:
        return len(files), files, "first look"
    if known is None:
        return len(files), files, "new folder"
    settled = [f for f in files if f.stamp_ns < hw_new]
    fresh = [f for f in settled if f.stamp_ns >= hw_old]
    if len(settled) - known > len(fresh):
        return len(settled), settled, "unexplained change"
    return len(settled), fresh, "new files"


def scan_dataset(
    root: str | Path,
    name: str,
    first: date,
    last: date,
    previous: dict[date, int] | None,
    hw_old: int,
    hw_new: int,
    recount: bool = False,
) -> DatasetScan:
    """Folders of dataset ``name`` dated ``first .. last`` with new files, and every folder's count.

    ``previous`` is the cursor's counts (None on a cold start: every folder is a first look).
    Folders after ``last`` are not partitions yet and stay unknown until they are. With
    ``recount``, known folders are listed and counted whatever their change time.
    """
    ds = dataset(name)
    counts: dict[date, int] = {}
    changed: list[FolderScan] = []
    try:
        listing = os.scandir(Path(root) / ds.name)
    except FileNotFoundError:
        return DatasetScan([], {})
    with listing:
        for entry in listing:
            day = folder_day(entry.name, ds)
            if (
                day is None
                or not first <= day <= last
                or not entry.is_dir()
                or leads_outside(entry.path, root)
            ):
                continue
            stamp = entry.stat().st_ctime_ns
            known = previous.get(day) if previous is not None else None
            if known is not None and stamp < hw_old and not recount:
                counts[day] = known
                continue
            if known is None and stamp >= hw_new:
                continue  # still settling: taken as a whole by a later tick
            files = complete_files(root, f"{ds.name}/{entry.name}", ds)
            counts[day], new, how = _changes(known, files, hw_old, hw_new, previous is None)
            if new or how in ("first look", "new folder"):  # an empty folder is a landed day too
                changed.append(FolderScan(ds.name, day, tuple(files), tuple(new), how, stamp))
    return DatasetScan(sorted(changed, key=lambda c: c.day), counts)
