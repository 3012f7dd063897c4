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

On S3 it is the object ``<table>/_commit.lock``, created only if absent and deleted after the
commit, with a lease and a token that its holder checks before each commit (``s3_lock``). A
taker finding it held waits ``WAIT_SECONDS``, then is refused with a LakeError naming the table,
the holder, and how to clear a lock that a killed process left behind::

    .venv/bin/python -m backfill_assets.lake.commit_lock release s3://bucket/lake/<table>

(only once that process is surely gone; while the lock's lease is current, its holder renewing
it, only with ``--force``). A lock whose holder is proven gone (``lock_holder``:
same boot and PID namespace, its pid absent, a zombie or reused) is broken by the next taker,
so a re-run after a kill converges on one machine without a hand; any doubt (another host,
container or boot) waits for the hand release. A holder released by hand while it holds the
lock refuses to commit: a commit that enters ``held`` inside another hold of its thread (its
guard's) first confirms that the lock is still its own; an outermost hold has just taken it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import random
import sys
import threading
import time
from collections.abc import Iterator

import backfill_assets.lake.lock_holder as lock_holder
import backfill_assets.lake.s3_lock as s3_lock
from backfill_assets.lake.errors import LakeError
from backfill_assets.storage.stores import S3Storage, storage_for

LOCK_NAME = "_commit.lock"  # at the table's root: "_" keeps it out of VACUUM's reach
WAIT_SECONDS = 120.0
# A local lock is held only by a live process (the kernel frees a dead one's): a taker waits out
# a long commit (a compaction rewrites files holding it) rather than failing.
LOCAL_WAIT_SECONDS = 1800.0
# A local waiter tries again every few milliseconds, never backing off further: a writer whose
# commits follow each other (delta-spark's write holds the lock from its files to its commit)
# leaves gaps of milliseconds between them, and a waiter sleeping longer would starve.
LOCAL_POLL_SECONDS = 0.005
RELEASE = s3_lock.RELEASE


def lock_path(table_dir: str) -> str:
    return f"{table_dir}/{LOCK_NAME}"


_held = threading.local()  # per thread: table folder -> its S3 hold (None: a local flock)


@contextlib.contextmanager
def held(table_dir: str, what: str, wait_seconds: float | None = None) -> Iterator[None]:
    """Hold the table's commit lock while the block runs (see the module docstring). A thread
    that holds it already runs the block once it has confirmed that the lock is still its own
    (``s3_lock.Held.confirm``: LakeError when it was released by hand meanwhile)."""
    holding: dict[str, s3_lock.Held | None] = _held.__dict__.setdefault("holding", {})
    key = table_dir.rstrip("/")
    if key in holding:
        hold = holding[key]
        if hold is not None:
            hold.confirm(what)
        yield
        return
    if storage_for(table_dir).is_local:
        wait = LOCAL_WAIT_SECONDS if wait_seconds is None else wait_seconds
        with _flocked(table_dir, what, wait):
            holding[key] = None
            try:
                yield
            finally:
                holding.pop(key, None)
        return
    wait = WAIT_SECONDS if wait_seconds is None else wait_seconds
    with s3_lock.taken(table_dir, lock_path(table_dir), what, wait) as hold:
        holding[key] = hold
        try:
            yield
        finally:
            holding.pop(key, None)


def _body(what: str) -> bytes:
    return json.dumps({**lock_holder.identity(), "since": _now(), "what": what}).encode()


@contextlib.contextmanager
def _flocked(table_dir: str, what: str, wait: float) -> Iterator[None]:
    """A local table's lock: an exclusive ``flock`` of its lock file, freed by the kernel when
    this process closes it or dies."""
    os.makedirs(table_dir, exist_ok=True)
    path = lock_path(table_dir)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + wait
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
                time.sleep(LOCAL_POLL_SECONDS * random.uniform(0.5, 1.5))
        body = _body(what)
        os.ftruncate(fd, 0)
        os.pwrite(fd, body, 0)
        yield
    finally:
        os.close(fd)


def holder(table_dir: str) -> str:
    """Who holds the lock, as its object says ("gone" when it was released meanwhile)."""
    try:
        found = json.loads(storage_for(table_dir).read_text(lock_path(table_dir)))
    except FileNotFoundError:
        return "released meanwhile"
    except (OSError, ValueError) as exc:
        return f"unreadable: {exc}"
    return lock_holder.describe(found)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def release(table_dir: str, force: bool = False) -> str:
    """Delete the lock on S3 whoever holds it (a crashed process's); what it said. LakeError,
    the lock left, while its lease is current (its holder renews it: probably alive) unless
    ``force``, or when it changed between the look and the delete. A local lock is never
    deleted: the kernel frees it when its holder dies."""
    storage = storage_for(table_dir)
    if storage.is_local:
        return "nothing to release: a local lock frees itself when its process ends"
    assert isinstance(storage, S3Storage), table_dir
    path = lock_path(table_dir)
    try:
        data, etag = storage.read_tagged(path)
    except FileNotFoundError:
        return "there was no lock"
    try:
        found = json.loads(data)
    except ValueError:
        found = {}
    who = lock_holder.describe(found)
    left = lock_holder.lease_left(found)
    if left is not None and left > 0 and not force:
        raise LakeError(
            f"{table_dir}: the commit lock's lease is current ({who}): its holder renews it, "
            f"so it is probably alive. Once it is surely gone: {RELEASE} --force {table_dir}"
        )
    if not storage.delete(path, if_match=etag):
        raise LakeError(f"{table_dir}: the commit lock changed meanwhile (renewed or taken): kept")
    return who


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    force = "--force" in args
    args = [a for a in args if a != "--force"]
    if len(args) != 2 or args[0] != "release":
        print(f"usage: {RELEASE} [--force] s3://bucket/lake/<table>", file=sys.stderr)
        return 2
    try:
        print(f"released {lock_path(args[1])}: {release(args[1], force)}")
    except LakeError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
