"""What is new in the landing zone since the cursor: ``os.scandir`` and ``stat``, no Spark (on
S3 a listing of the dataset's objects: see ``_scan_s3``).

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

from backfill_assets.landing.layout import (
    Dataset,
    Root,
    dataset,
    folder_day,
    is_complete,
    join,
    leads_outside,
)
from backfill_assets.storage.stores import S3Storage, storage_for

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
    settling: int = 0  # new folders and files stamped at or after the mark: a later look's


def clock_ns() -> int:
    """Now, on the clock files are stamped with: a file created after this call is stamped at
    or after it (the precise clock runs ahead of the kernel's coarse file timestamps)."""
    if sys.platform.startswith("linux"):
        return time.clock_gettime_ns(_CLOCK_REALTIME_COARSE)
    return time.time_ns()


def complete_files(root: Root, relative: str, ds: Dataset) -> list[LandedFile]:
    """The complete files of the folder ``relative`` to the landing root, by name (none when it
    does not exist); in-flight ``_``/``.`` files are not there yet, links leading outside the
    root are not there at all."""
    storage = storage_for(root)
    if isinstance(storage, S3Storage):
        listed = storage.list_folder(join(root, relative))[1]
        return _complete([(f"{relative}/{o.name}", o.modified_ns) for o in listed], ds)
    found = []
    folder = Path(root) / relative
    if not folder.is_dir() or leads_outside(folder, root):
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
) -> tuple[int, list[LandedFile], str, int]:
    """(count to remember, new files, how, files left for a later look) for a folder that was
    listed."""
    if cold:
        return len(files), files, "first look", 0
    if known is None:
        return len(files), files, "new folder", 0
    settled = [f for f in files if f.stamp_ns < hw_new]
    fresh = [f for f in settled if f.stamp_ns >= hw_old]
    later = len(files) - len(settled)
    if len(settled) - known > len(fresh):
        return len(settled), settled, "unexplained change", later
    return len(settled), fresh, "new files", later


def scan_dataset(
    root: Root,
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
    storage = storage_for(root)
    if isinstance(storage, S3Storage):
        return _scan_s3(storage, root, ds, first, last, previous, hw_old, hw_new)
    counts: dict[date, int] = {}
    changed: list[FolderScan] = []
    settling = 0
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
                settling += 1
                continue  # still settling: taken as a whole by a later tick
            files = complete_files(root, f"{ds.name}/{entry.name}", ds)
            counts[day], new, how, later = _changes(known, files, hw_old, hw_new, previous is None)
            settling += later
            if new or how in ("first look", "new folder"):  # an empty folder is a landed day too
                changed.append(FolderScan(ds.name, day, tuple(files), tuple(new), how, stamp))
    return DatasetScan(sorted(changed, key=lambda c: c.day), counts, settling)


def _complete(objects: list[tuple[str, int]], ds: Dataset) -> list[LandedFile]:
    """The complete files among (path relative to the root, stamp) objects, by path."""
    found = [
        LandedFile(path, stamp)
        for path, stamp in objects
        if is_complete(path.rsplit("/", 1)[-1], ds)
    ]
    return sorted(found, key=lambda f: f.path)


def _scan_s3(
    storage: S3Storage,
    root: Root,
    ds: Dataset,
    first: date,
    last: date,
    previous: dict[date, int] | None,
    hw_old: int,
    hw_new: int,
) -> DatasetScan:
    """``scan_dataset`` on S3, where a folder is a key prefix with no time of its own: one
    listing of the dataset's every object, which is a full count on every tick. A file's stamp
    is its ``LastModified``, set by the server when its upload completed (an upload lands whole
    or not at all, so no file is in flight on S3 but those named ``_``/``.``). A folder's stamp
    is its newest object's; a folder is there once one object is under it."""
    by_folder: dict[str, list[tuple[str, int]]] = {}
    for obj in storage.list_tree(join(root, ds.name)):
        folder, _, rest = obj.name.partition("/")
        day = folder_day(folder, ds)
        if day is None or not first <= day <= last:
            continue
        objects = by_folder.setdefault(folder, [])
        if rest and "/" not in rest:  # a file of the folder; not a deeper one, not a marker
            objects.append((f"{ds.name}/{obj.name}", obj.modified_ns))
        else:
            objects.append(("", obj.modified_ns))  # stamps the folder only
    counts: dict[date, int] = {}
    changed: list[FolderScan] = []
    settling = 0
    for folder, objects in sorted(by_folder.items()):
        day = folder_day(folder, ds)
        assert day is not None
        stamp = max(s for _, s in objects)
        known = previous.get(day) if previous is not None else None
        if known is None and stamp >= hw_new:
            settling += 1
            continue  # still settling: taken as a whole by a later tick
        files = _complete([(p, s) for p, s in objects if p], ds)
        counts[day], new, how, later = _changes(known, files, hw_old, hw_new, previous is None)
        settling += later
        if new or how in ("first look", "new folder"):
            changed.append(FolderScan(ds.name, day, tuple(files), tuple(new), how, stamp))
    return DatasetScan(changed, counts, settling)
