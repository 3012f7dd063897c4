"""Small files written so that a crash or an I/O error leaves the old content or the new, never
half: the staged versions' manifests and the corrections' records. Each step passes the I/O
seam (``testing/iofault.py``). On local disk: a synced temporary file, then a rename; on S3 one
PUT, which is atomic per object (``storage.py``)."""

from __future__ import annotations

import os
import uuid

from backfill_assets.lake.storage import S3Storage, storage_for
from backfill_assets.testing.iofault import io_step

TMP_SUFFIX = ".tmp"


def write_atomically(path: str | os.PathLike, text: str, what: str, create: bool = False) -> None:
    """Write ``text`` to ``path`` through a synced temporary file and a rename. On an error the
    temporary file is removed; a killed writer's is left (``*.tmp``), for ``stale_tmp_files``.

    ``create``: only when nothing is at ``path`` yet; FileExistsError otherwise, so that of two
    writers creating one file exactly one wins (a link of the temporary file in place on local
    disk, ``If-None-Match: *`` on S3)."""
    path = os.fspath(path)
    storage = storage_for(path)
    if isinstance(storage, S3Storage):
        io_step(f"{what}.write")
        storage.put(path, text.encode("utf-8"), create=create)
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
