"""Small files written so that a crash or an I/O error leaves the old content or the new, never
half: the staged versions' manifests and the corrections' records. Each step passes the I/O
seam (``testing/iofault.py``). On local disk: a synced temporary file, then a rename, then a
sync of the folder (the rename is in the folder's entries; a new folder is synced into its
parent too); on S3 one PUT, which is atomic per object and durable once it succeeds
(``storage/stores.py``).

Also the syncs of what the lake writes beside them, on local disk (S3 needs none): each data file
with the folders it created (``parquet_writer.py``), and each commit file delta-rs writes for
the lake, with the log folder (``sync_commit``): delta-rs writes them without a sync, and a
power loss could otherwise leave a table whose newest commit is empty or torn."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator, Sequence

from backfill_assets import seam
from backfill_assets.lake.errors import LakeError
from backfill_assets.storage.stores import S3Storage, storage_for

TMP_SUFFIX = ".tmp"
LOCK_SUFFIX = ".lock"
_TEMPORARY = re.compile(rf".+\.[0-9a-f]{{32}}{re.escape(TMP_SUFFIX)}")  # write_atomically's


def write_atomically(
    path: str | os.PathLike,
    text: str,
    what: str,
    create: bool = False,
    if_match: str | None = None,
) -> None:
    """Write ``text`` to ``path`` through a synced temporary file and a rename. On an error the
    temporary file is removed; a killed writer's is left (``*.tmp``) until maintenance removes
    it (``remove_dead_temporaries``).

    ``create``: only when nothing is at ``path`` yet; FileExistsError otherwise, so that of two
    writers creating one file exactly one wins (a link of the temporary file in place on local
    disk, ``If-None-Match: *`` on S3). ``if_match`` (S3 only): only while the object there has
    that ETag (FileExistsError otherwise); on local disk the caller holds ``exclusive``."""
    path = os.fspath(path)
    storage = storage_for(path)
    if isinstance(storage, S3Storage):
        seam.io(f"{what}.write")
        storage.put(path, text.encode("utf-8"), create=create, if_match=if_match)
        return
    made = make_folders(os.path.dirname(path))
    tmp = f"{path}.{uuid.uuid4().hex}{TMP_SUFFIX}"
    try:
        seam.io(f"{what}.write")
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        seam.io(f"{what}.rename")
        if create:
            os.link(tmp, path)  # FileExistsError when taken; the temporary name goes below
        else:
            os.replace(tmp, path)
    finally:
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass
    sync_folders([os.path.dirname(path), *made])


def remove_dead_temporaries(folder: str, older_than_seconds: float) -> list[str]:
    """Delete the temporary files that writers killed between their write and their rename left
    in ``folder`` (``<name>.<32 hex digits>.tmp``), last changed more than ``older_than_seconds``
    ago: a live writer renames its own within moments. Their paths. Nothing on S3, where a
    write is one PUT and leaves none."""
    storage = storage_for(folder)
    if not storage.is_local:
        return []
    cutoff = time.time() - older_than_seconds
    removed = []
    for name in sorted(storage.list_names(folder)):
        path = os.path.join(folder, name)
        try:
            dead = _TEMPORARY.fullmatch(name) is not None and os.stat(path).st_mtime < cutoff
        except FileNotFoundError:
            continue
        if dead and remove(path, "temporary"):
            removed.append(path)
    return removed


def read_tagged(path: str | os.PathLike) -> tuple[str, str | None]:
    """The text at ``path`` and, on S3, the ETag of the object read: what a ``write_atomically``
    with ``if_match`` must replace, so that a compare-and-swap writes over exactly the version it
    compared (None on local disk, where the caller holds ``exclusive`` instead).
    FileNotFoundError when there is nothing at ``path``."""
    path = os.fspath(path)
    storage = storage_for(path)
    if isinstance(storage, S3Storage):
        data, tag = storage.read_tagged(path)
        return data.decode("utf-8"), tag
    return storage.read_text(path), None


def make_folders(folder: str) -> list[str]:
    """Make ``folder`` and its missing parents; the parents whose entries changed (each new
    folder's parent), to sync once what is in them is."""
    missing = []
    while folder and not os.path.isdir(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    if missing:
        os.makedirs(missing[0], exist_ok=True)
    return [os.path.dirname(f) for f in missing]


def sync_file(path: str) -> None:
    """Flush the file at ``path`` to the disk (local disk only)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_folders(folders: list[str]) -> None:
    """Flush the entries of ``folders`` (files created, renamed or removed in them), deepest
    first, each once (local disk only)."""
    for folder in sorted(set(folders), key=len, reverse=True):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def sync_commit(table_dir: str, version: int, data_files: Sequence[str] = ()) -> None:
    """Flush the commit file of ``version`` that delta-rs wrote, and the log folder (and, for
    version 0, the table's folder, which gained the log): delta-rs writes it without a sync.
    ``data_files`` (relative to the table): files it wrote itself for the commit (a compaction's),
    synced first, with their folders. Nothing to do on S3."""
    if not storage_for(table_dir).is_local:
        return
    for relative in data_files:
        sync_file(os.path.join(table_dir, relative))
    log_dir = os.path.join(table_dir, "_delta_log")
    sync_file(os.path.join(log_dir, f"{version:020d}.json"))
    folders = [log_dir, *(os.path.dirname(os.path.join(table_dir, p)) for p in data_files)]
    sync_folders(folders + ([table_dir] if version == 0 else []))


_held = threading.local()


@contextlib.contextmanager
def exclusive(path: str | os.PathLike, what: str, wait_seconds: float = 300.0) -> Iterator[None]:
    """Hold the lock of ``path`` (a ``<path>.lock`` file's ``flock``) while the block runs:
    processes on this machine that take it run their blocks one at a time. Reentrant in a
    thread. The kernel drops it when its holder dies, so a killed holder never leaves it taken;
    a holder still running is waited for up to ``wait_seconds``, then LakeError. Nothing is held
    on S3, which has no such lock: there a conditional PUT (``if_match``) is the guard."""
    path = os.fspath(path)
    held: dict[str, int] = _held.__dict__.setdefault("counts", {})
    if not storage_for(path).is_local or held.get(path):
        held[path] = held.get(path, 0) + 1
        try:
            yield
        finally:
            held[path] -= 1
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(f"{path}{LOCK_SUFFIX}", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LakeError(
                        f"the {what} {path} stayed locked by another process for "
                        f"{wait_seconds:.0f} s (a publish, discard or move of it still running); "
                        "try again once it is done"
                    ) from None
                time.sleep(0.05)
        held[path] = 1
        try:
            yield
        finally:
            held[path] = 0
    finally:
        os.close(fd)  # releases the flock


def remove(path: str | os.PathLike, what: str) -> bool:
    """Delete ``path``; False when it was already gone. On local disk the folder of a small file
    (not of a data ``file``, which comes back after a power loss as an orphan for vacuum) is
    synced: a manifest or record deleted before a power loss stays deleted."""
    seam.io(f"{what}.delete")
    path = os.fspath(path)
    storage = storage_for(path)
    deleted = storage.delete(path)
    if deleted and storage.is_local and what != "file":
        sync_folders([os.path.dirname(path)])
    return deleted
