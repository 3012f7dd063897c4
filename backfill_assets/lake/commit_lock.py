"""One committing delta-spark driver per table on S3: a lock object taken around every commit.

Delta's log store for S3 (``S3SingleDriverLogStore``) writes a commit file with a plain PUT:
two drivers committing the same version at once would both succeed, one overwriting the
other's commit. So on S3 every delta-spark commit path (a write, publish and restore, vacuum,
compaction, checkpoint) runs holding ``<table>/_commit.lock``, taken with a create-only PUT
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
cannot be seen from here: its lock waits for the hand release. A local lake needs none:
Delta's local log store
creates each commit file exclusively. delta-rs commits with conditional PUTs of its own and
does not take this lock; it is the delta-spark engine's, so one lake should not be written
by both engines on S3 at once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import random
import socket
import sys
import time
import uuid
from collections.abc import Iterator

from backfill_assets.lake.keys import LakeError
from backfill_assets.lake.storage import storage_for

LOCK_NAME = "_commit.lock"  # at the table's root: "_" keeps it out of VACUUM's reach
WAIT_SECONDS = 120.0
RELEASE = "python -m backfill_assets.lake.commit_lock release"


def lock_path(table_dir: str) -> str:
    return f"{table_dir}/{LOCK_NAME}"


@contextlib.contextmanager
def held(table_dir: str, what: str, wait_seconds: float | None = None) -> Iterator[None]:
    """Hold the table's commit lock while the block runs (nothing to hold on a local lake)."""
    storage = storage_for(table_dir)
    if storage.is_local:
        yield
        return
    path = lock_path(table_dir)
    token = uuid.uuid4().hex
    body = json.dumps(
        {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "since": _now(),
            "what": what,
            "token": token,
        }
    ).encode()
    deadline = time.monotonic() + (WAIT_SECONDS if wait_seconds is None else wait_seconds)
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
                    f"waited {wait_seconds if wait_seconds is not None else WAIT_SECONDS:g} s. "
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
    """Delete the lock whoever holds it (a crashed process's); what it said."""
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
