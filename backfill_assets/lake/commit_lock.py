"""Every commit to a table, by either engine, holds the table's commit lock: one committer at a
time on every store.

A commit file must be created only if absent. Neither engine's log store guarantees that
against the other engine, or on S3 against another driver:

- on a local lake, Delta's ``HDFSLogStore`` checks that ``N.json`` is absent, then
  ``rename(2)``s its temporary file over it: a commit created in between (by delta-rs, which
  creates its own exclusively, or by another JVM) is silently replaced;
- on S3, Delta's ``S3SingleDriverLogStore`` writes a commit with a plain PUT: two drivers
  committing the same version both succeed, one overwriting the other's commit.

So every commit path of both engines (a write, publish and restore, vacuum, whose delta-rs
commits ``VACUUM START``/``END``, compaction, checkpoint, a change of table properties) runs
inside ``held(table_dir, what)``, which is re-entrant within a thread: a guard and the commit it
protects may hold it together (delta-spark's copying publish and restore, which Delta's writer
cannot pin to a base version). delta-rs takes it too, on S3 as well, where its own commits are
conditional PUTs: a lake written by delta-spark on S3 is still committed to by delta-rs
(``maintain`` without ``BACKFILL_LAKE_ENGINE``), and a delta-spark PUT would overwrite a commit
that delta-rs created between its check and its PUT.

On a local lake the lock is an ``flock`` of ``<table>/_commit.lock`` (created once, never
deleted: "_" keeps it out of VACUUM's reach), held through an open file of the Python process
that drives the commit, delta-rs's or delta-spark's through py4j. The kernel frees it when that
process dies, however it dies. A taker waits ``LOCAL_WAIT_SECONDS``, then is refused with a
LakeError naming the holder the file records (host, pid, since, what).

On S3 it is the object ``<table>/_commit.lock``, taken with a create-only PUT
(``If-None-Match: *``: of racing takers exactly one wins) and deleted after the commit. It
names its holder (host, pid, since, what). Another driver finding it held tries again for
``WAIT_SECONDS``, then is refused with a LakeError naming the table, the holder, and how to
clear a lock that a killed process left behind::

    .venv/bin/python -m backfill_assets.lake.commit_lock release s3://bucket/lake/<table>

(only once that process is surely gone). A lock whose holder ran on this host and is gone (no
such process, or a zombie: killed, not yet reaped) is broken by the next taker, so a re-run
after a kill converges on one machine without a hand: of racing breakers, the one that
creates ``<lock>.broken-<token>`` (create-only, and kept: who broke whose lock, and when)
deletes the lock, and only while it still carries that token. A holder on another host
cannot be seen from here: its lock waits for the hand release.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import random
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator

from backfill_assets.lake.keys import LakeError
from backfill_assets.lake.storage import storage_for

LOCK_NAME = "_commit.lock"  # at the table's root: "_" keeps it out of VACUUM's reach
WAIT_SECONDS = 120.0
# A local lock is held only by a live process (the kernel frees a dead one's): a taker waits out
# a long commit (a compaction rewrites files holding it) rather than failing.
LOCAL_WAIT_SECONDS = 1800.0
RELEASE = "python -m backfill_assets.lake.commit_lock release"


def lock_path(table_dir: str) -> str:
    return f"{table_dir}/{LOCK_NAME}"


_held = threading.local()  # per thread: table folder -> how deeply it holds its lock


@contextlib.contextmanager
def held(table_dir: str, what: str, wait_seconds: float | None = None) -> Iterator[None]:
    """Hold the table's commit lock while the block runs (see the module docstring); a thread
    that holds it already just runs the block."""
    depths: dict[str, int] = _held.__dict__.setdefault("depths", {})
    key = table_dir.rstrip("/")
    if depths.get(key):
        depths[key] += 1
        try:
            yield
        finally:
            depths[key] -= 1
        return
    local = storage_for(table_dir).is_local
    default = LOCAL_WAIT_SECONDS if local else WAIT_SECONDS
    wait = default if wait_seconds is None else wait_seconds
    take = _flocked if local else _put_lock
    with take(table_dir, what, wait):
        depths[key] = 1
        try:
            yield
        finally:
            depths.pop(key, None)


def _body(what: str, token: str = "") -> bytes:
    return json.dumps(
        {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "since": _now(),
            "what": what,
            "token": token,
        }
    ).encode()


@contextlib.contextmanager
def _flocked(table_dir: str, what: str, wait: float) -> Iterator[None]:
    """A local table's lock: an exclusive ``flock`` of its lock file, freed by the kernel when
    this process closes it or dies."""
    os.makedirs(table_dir, exist_ok=True)
    path = lock_path(table_dir)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + wait
        pause = 0.01
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LakeError(
                        f"{table_dir}: another process holds the commit lock "
                        f"({holder(table_dir)}); waited {wait:g} s"
                    ) from None
                time.sleep(pause * random.uniform(0.5, 1.5))
                pause = min(0.25, pause * 2)
        body = _body(what)
        os.ftruncate(fd, 0)
        os.pwrite(fd, body, 0)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _put_lock(table_dir: str, what: str, wait: float) -> Iterator[None]:
    """A table's lock on S3: an object created only if absent, deleted after the block."""
    storage = storage_for(table_dir)
    path = lock_path(table_dir)
    token = uuid.uuid4().hex
    body = _body(what, token)
    deadline = time.monotonic() + wait
    pause = 0.05
    while True:
        try:
            storage.put(path, body, create=True)  # type: ignore[union-attr]
            break
        except FileExistsError:
            if _break_if_gone(table_dir):
                continue
            if time.monotonic() >= deadline:
                raise LakeError(
                    f"{table_dir}: another driver holds the commit lock ({holder(table_dir)}); "
                    f"waited {wait:g} s. "
                    f"If that process is gone (killed), clear it: {RELEASE} {table_dir}"
                ) from None
            time.sleep(pause * random.uniform(0.5, 1.5))
            pause = min(1.0, pause * 2)
    try:
        yield
    finally:
        _release_own(table_dir, token)


def holder(table_dir: str) -> str:
    """Who holds the lock, as its object says ("gone" when it was released meanwhile)."""
    try:
        found = json.loads(storage_for(table_dir).read_text(lock_path(table_dir)))
    except FileNotFoundError:
        return "released meanwhile"
    except (OSError, ValueError) as exc:
        return f"unreadable: {exc}"
    return _describe(found)


def _describe(found: dict) -> str:
    return (
        f"host {found.get('host')}, pid {found.get('pid')}, since {found.get('since')}, "
        f"for {found.get('what')}"
    )


def _gone(found: dict) -> bool:
    """Whether the lock's holder ran on this host and is no longer running."""
    pid = found.get("pid")
    if found.get("host") != socket.gethostname() or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # someone else's process, alive
    try:  # killed but not yet reaped by its parent: a zombie holds nothing
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def _break_if_gone(table_dir: str) -> bool:
    """Delete the lock when its holder is gone (``_gone``) and this caller wins the right to;
    whether to try taking it again at once."""
    storage = storage_for(table_dir)
    path = lock_path(table_dir)
    try:
        found = json.loads(storage.read_text(path))
    except FileNotFoundError:
        return True  # released meanwhile
    except (OSError, ValueError):
        return False
    token = found.get("token")
    if not isinstance(token, str) or not _gone(found):
        return False
    note = {**found, "broken_by_pid": os.getpid(), "broken_at": _now()}
    try:
        storage.put(f"{path}.broken-{token}", json.dumps(note).encode(), create=True)  # type: ignore[union-attr]
    except FileExistsError:
        return False  # another taker breaks it
    _release_own(table_dir, token)
    logging.getLogger(__name__).warning(
        "%s: broke the commit lock of a process that is gone (%s)", table_dir, _describe(found)
    )
    return True


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _release_own(table_dir: str, token: str) -> None:
    """Delete the lock if it is still this holder's (a hand release may have cleared it)."""
    storage = storage_for(table_dir)
    path = lock_path(table_dir)
    try:
        if json.loads(storage.read_text(path)).get("token") == token:
            storage.delete(path)
    except FileNotFoundError:
        pass


def release(table_dir: str) -> str:
    """Delete the lock on S3 whoever holds it (a crashed process's); what it said. A local lock
    is never deleted: the kernel frees it when its holder dies."""
    if storage_for(table_dir).is_local:
        return "nothing to release: a local lock frees itself when its process ends"
    who = holder(table_dir)
    if not storage_for(table_dir).delete(lock_path(table_dir)):
        return "there was no lock"
    return who


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "release":
        print(f"usage: {RELEASE} s3://bucket/lake/<table>", file=sys.stderr)
        return 2
    print(f"released {lock_path(args[1])}: {release(args[1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
