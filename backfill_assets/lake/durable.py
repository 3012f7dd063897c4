"""Small files written so that a crash or an I/O error leaves the old content or the new, never
half: the staged versions' manifests and the corrections' records. Each step passes the I/O
seam (``testing/iofault.py``). On local disk: a synced temporary file, then a rename; on S3 one
PUT, which is atomic per object (``storage.py``)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
import uuid
from collections.abc import Iterator

from backfill_assets.lake.keys import LakeError
from backfill_assets.lake.storage import S3Storage, storage_for
from backfill_assets.testing.iofault import io_step

TMP_SUFFIX = ".tmp"
LOCK_SUFFIX = ".lock"


def write_atomically(
    path: str | os.PathLike,
    text: str,
    what: str,
    create: bool = False,
    if_match: str | None = None,
) -> None:
    """Write ``text`` to ``path`` through a synced temporary file and a rename. On an error the
    temporary file is removed; a killed writer's is left (``*.tmp``), for ``stale_tmp_files``.

    ``create``: only when nothing is at ``path`` yet; FileExistsError otherwise, so that of two
    writers creating one file exactly one wins (a link of the temporary file in place on local
    disk, ``If-None-Match: *`` on S3). ``if_match`` (S3 only): only while the object there has
    that ETag (FileExistsError otherwise); on local disk the caller holds ``exclusive``."""
    path = os.fspath(path)
    storage = storage_for(path)
    if isinstance(storage, S3Storage):
        io_step(f"{what}.write")
        storage.put(path, text.encode("utf-8"), create=create, if_match=if_match)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{uuid.uuid4().hex}{TMP_SUFFIX}"
    try:
        io_step(f"{what}.write")
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        io_step(f"{what}.rename")
        if create:
            os.link(tmp, path)  # FileExistsError when taken; the temporary name goes below
        else:
            os.replace(tmp, path)
    finally:
        try:
            os.remove(tmp)
        except FileNotFoundError:
            pass


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
    """Delete ``path``; False when it was already gone."""
    io_step(f"{what}.delete")
    return storage_for(path).delete(os.fspath(path))


def stale_tmp_files(folder: str | os.PathLike, older_than_s: float) -> list[str]:
    """The temporary files of killed writers in ``folder``, older than ``older_than_s`` (local
    disk only: a PUT to S3 leaves none)."""
    import time

    if not os.path.isdir(folder):
        return []
    cutoff = time.time() - older_than_s
    found = []
    for name in os.listdir(folder):
        full = os.path.join(folder, name)
        if name.endswith(TMP_SUFFIX) and os.stat(full).st_mtime < cutoff:
            found.append(full)
    return sorted(found)
