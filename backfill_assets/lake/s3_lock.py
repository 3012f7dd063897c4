"""A table's commit lock on S3 (``commit_lock`` says who takes it and why): the object
``<table>/_commit.lock``, created only if absent (``If-None-Match: *``: of racing takers exactly
one wins) and deleted after the commit.

The object records its holder (``lock_holder.identity``: host, pid, PID namespace, boot, start
time), what it is for, a token of its own (a new uuid per take) and a lease, ``expires_at``,
which a thread of the holder renews every third of ``LEASE_SECONDS`` with a PUT conditional on
the ETag it last wrote. The token names a take rather than counting takes: no store-side check
could compare a count (Delta's commit PUT carries none), so the fencing is the holder's own
check that the object is still the one it wrote, by ETag. Its guarantees:

- A taker never enters while a live holder holds it. A taker finding it held waits; it breaks
  the lock only when ``lock_holder.gone`` proves the holder gone (same boot and PID namespace,
  pid absent, a zombie or reused): of racing breakers, the one that creates
  ``<lock>.broken-<token>`` (create-only, and kept: who broke whose lock, and when) deletes
  the lock, conditionally on the ETag it judged. Anything else, an expired lease included
  (a live holder can stall past it), waits for the hand release, ``commit_lock release``.
- A holder that finds its lock no longer its own refuses to commit. Its object's ETag changes
  only by its own renewals, so before each commit (``Held.confirm``, which every nested
  ``commit_lock.held`` calls) it reads the object and compares the ETag with the one it last
  wrote; a renewal refused (the object deleted or replaced) marks the lock lost at once. The
  check precedes the engine's call: a hand release during that call (a long Spark write, a
  compaction) cannot stop its commit, and is logged when the holder releases.
- Release deletes the object only while it has the holder's ETag (a conditional delete): a
  lock released by hand and taken by another process meanwhile is left to that process.
- A create-only PUT that boto3 retried after it landed finds the holder's own object: the taker
  recognises its token there and holds the lock, instead of waiting on itself.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import random
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import backfill_assets.lake.lock_holder as lock_holder
from backfill_assets.lake.errors import LakeError
from backfill_assets.storage.stores import S3Storage, storage_for

LEASE_SECONDS = 60.0
RELEASE = "python -m backfill_assets.lake.commit_lock release"
log = logging.getLogger(__name__)


class Held:
    """This process's hold of a table's lock: the ETag it last wrote, renewed by a thread."""

    def __init__(self, storage: S3Storage, table_dir: str, path: str, body: dict, etag: str):
        self.storage, self.table_dir, self.path = storage, table_dir, path
        self.body, self.etag = body, etag
        self.lost = ""  # why the lock is no longer this holder's, once that is known
        self._guard = threading.Lock()  # one renewal, check or release at a time
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew, daemon=True, name="lease " + path)

    def confirm(self, what: str) -> None:
        """LakeError unless the lock object is still exactly the one this holder last wrote."""
        with self._guard:
            if not self.lost:
                try:
                    _, etag = self.storage.read_tagged(self.path)
                except FileNotFoundError:
                    etag = ""
                if etag != self.etag:
                    self.lost = "it was released by hand or broken while this process held it"
            if self.lost:
                raise LakeError(
                    f"{self.table_dir}: this process no longer holds the commit lock ({self.lost};"
                    f" now: {holder(self.storage, self.path)}): refusing to commit {what}"
                )

    def _renew(self) -> None:
        while not self._stop.wait(LEASE_SECONDS / 3):
            with self._guard:
                if self.lost or self._stop.is_set():
                    return
                body = {**self.body, "expires_at": _after(LEASE_SECONDS)}
                try:
                    self.etag = self.storage.put(self.path, _encode(body), False, self.etag)
                    self.body = body
                except FileExistsError:
                    self.lost = "it was released by hand or broken while this process held it"
                    return
                except OSError as exc:  # unreachable for now: the next renewal tries again
                    log.warning("%s: could not renew the commit lock's lease: %s", self.path, exc)

    def release(self) -> None:
        """Stop renewing; delete the lock if it still has this holder's ETag."""
        self._stop.set()
        with self._guard:
            if not self.lost and self.storage.delete(self.path, if_match=self.etag):
                return
            log.error(
                "%s: the commit lock was no longer this process's when it released it (%s): "
                "another process may have committed while it held it; now: %s",
                self.table_dir,
                self.lost or "it was released by hand or broken",
                holder(self.storage, self.path),
            )


@contextlib.contextmanager
def taken(table_dir: str, path: str, what: str, wait: float) -> Iterator[Held]:
    """Hold the lock object at ``path`` of the table at ``table_dir`` (on S3) while the block
    runs; LakeError naming the holder after ``wait`` seconds."""
    storage = storage_for(table_dir)
    assert isinstance(storage, S3Storage), table_dir
    body = {
        **lock_holder.identity(),
        "since": _now(),
        "what": what,
        "token": uuid.uuid4().hex,
        "expires_at": _after(LEASE_SECONDS),
    }
    deadline = time.monotonic() + wait
    pause = 0.05
    while True:
        try:
            etag = storage.put(path, _encode(body), create=True)
            break
        except FileExistsError:
            try:
                data, etag = storage.read_tagged(path)
                found = json.loads(data)
            except FileNotFoundError:
                continue  # released meanwhile
            except (OSError, ValueError):
                found = {}
            if found.get("token") == body["token"]:
                break  # this PUT landed, then was retried
            if _break_if_gone(storage, path, found, etag):
                continue
            if time.monotonic() >= deadline:
                raise LakeError(
                    f"{table_dir}: another driver holds the commit lock "
                    f"({lock_holder.describe(found)}); waited {wait:g} s. "
                    f"If that process is gone (killed), clear it: {RELEASE} {table_dir}"
                ) from None
            time.sleep(pause * random.uniform(0.5, 1.5))
            pause = min(1.0, pause * 2)
    held = Held(storage, table_dir, path, body, etag)
    held._renewer.start()
    try:
        yield held
    finally:
        held.release()


def holder(storage: S3Storage, path: str) -> str:
    """Who holds the lock at ``path``, as its object says."""
    try:
        return lock_holder.describe(json.loads(storage.read_text(path)))
    except FileNotFoundError:
        return "no lock"
    except (OSError, ValueError) as exc:
        return f"unreadable: {exc}"


def _break_if_gone(storage: S3Storage, path: str, found: dict[str, Any], etag: str) -> bool:
    """Delete the lock when its holder is proven gone and this caller wins the right to;
    whether to try taking it again at once."""
    token = found.get("token")
    if not isinstance(token, str) or not lock_holder.gone(found):
        return False
    note = {**found, "broken_by": lock_holder.identity(), "broken_at": _now()}
    note["broken_by_pid"] = note["broken_by"]["pid"]
    try:
        storage.put(f"{path}.broken-{token}", _encode(note), create=True)
    except FileExistsError:
        return False  # another taker breaks it
    storage.delete(path, if_match=etag)
    log.warning("%s: broke the commit lock of a process that is gone (%s)", path, found)
    return True


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body).encode()


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _after(seconds: float) -> str:
    return (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)).isoformat(timespec="seconds")
