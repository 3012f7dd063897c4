"""The commit lock of a table on S3 (SeaweedFS) against confusion: a holder in another PID
namespace is not broken while it lives, nor one whose pid is alive; a holder released by hand
refuses to commit and leaves another's lock alone; a create retried after it landed holds the
lock; the lease is renewed while the lock is held."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import sys
import threading
import time

import pytest

from backfill_assets.lake import Lake, LakeError, commit_lock, s3_lock
from backfill_assets.storage.stores import split, storage_for
from backfill_assets_testkit.processes import kill_group, log_tail, start, subprocess_env
from backfill_assets_tests.lake.lake_support import THINGS, commit, content, wait_for

SCHEMA = "d date, id bigint, tag string"
D1 = dt.date(2024, 1, 1)
NO_UNSHARE = (
    "unshare is not installed: `apt-get install util-linux` ships it, and the test must run "
    "as root to make a PID namespace"
)
HOLD = """
import sys, time
from backfill_assets.lake import commit_lock
from backfill_assets.storage.stores import storage_for
table_dir, taken = sys.argv[1], sys.argv[2]
with commit_lock.held(table_dir, "held in another PID namespace"):
    body = storage_for(table_dir).read_text(commit_lock.lock_path(table_dir))
    with open(taken, "w") as out:
        out.write(body)
    time.sleep(600)
"""


def free_pid() -> int:
    """A pid no process has in this namespace now."""
    return next(p for p in range(20_000, 32_000) if not os.path.exists(f"/proc/{p}"))


def lock_body(table_dir: str) -> dict:
    return json.loads(storage_for(table_dir).read_text(commit_lock.lock_path(table_dir)))


def test_a_holder_in_another_pid_namespace_is_not_broken_while_it_lives(s3_bucket, tmp_path):
    """Containers sharing a hostname, not a PID namespace: the holder's pid is absent here,
    yet the taker waits, and is refused naming the hand release; even once the holder is
    killed, nothing here can prove it, so only the hand release frees the lock."""
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.fail(NO_UNSHARE)
    table_dir = f"s3://{s3_bucket}/lake/t"
    taken = tmp_path / "taken"
    pid = free_pid()  # the holder's pid in its own namespace, which no process has here
    script = f'echo {pid - 1} > /proc/sys/kernel/ns_last_pid && "$@"; exit $?'
    namespaced = ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script, "sh"]
    child = start(
        [*namespaced, sys.executable, "-c", HOLD, table_dir, str(taken)],
        subprocess_env(),
        tmp_path / "holder.log",
    )
    try:
        wait_for(taken, [child], timeout=120)
        recorded = json.loads(taken.read_text())
        assert recorded["pid"] == pid and not os.path.exists(f"/proc/{pid}"), recorded
        with pytest.raises(LakeError, match=r"another driver holds.*commit_lock release"):
            with commit_lock.held(table_dir, "taker", wait_seconds=3):
                pass
        assert child.poll() is None, log_tail(tmp_path / "holder.log")
        assert lock_body(table_dir)["token"] == recorded["token"]
        assert commit_lock.main(["release", table_dir]) == 1  # its lease is current
        assert lock_body(table_dir)["token"] == recorded["token"]
        kill_group(child, signal.SIGKILL)
        with pytest.raises(LakeError, match="another driver holds"):
            with commit_lock.held(table_dir, "taker after the kill", wait_seconds=1):
                pass
        assert commit_lock.main(["release", "--force", table_dir]) == 0
        with commit_lock.held(table_dir, "after the hand release", wait_seconds=5):
            assert lock_body(table_dir)["what"] == "after the hand release"
    finally:
        kill_group(child)


def test_a_lock_whose_pid_is_alive_here_is_kept_unless_the_pid_was_reused(s3_bucket, tmp_path):
    """A lock naming a live process of this namespace and boot, with its start time: kept. The
    same pid with another start time (a later process reusing it): broken, with a note."""
    table_dir = f"s3://{s3_bucket}/lake/t"
    storage = storage_for(table_dir)
    path = commit_lock.lock_path(table_dir)
    child = start(["sleep", "600"], subprocess_env(), tmp_path / "sleep.log")
    try:
        with open(f"/proc/{child.pid}/stat") as stat:
            started = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/sys/kernel/random/boot_id") as boot:
            boot_id = boot.read().strip()
        holder = {
            "host": "any",
            "pid": child.pid,
            "pid_ns": os.readlink("/proc/self/ns/pid"),
            "boot_id": boot_id,
            "since": "2024-01-01T00:00:00+00:00",
            "what": "x",
        }
        storage.put(path, json.dumps({**holder, "started": started, "token": "a"}).encode(), True)
        with pytest.raises(LakeError, match=f"pid {child.pid}"):
            with commit_lock.held(table_dir, "taker", wait_seconds=1):
                pass
        storage.delete(path)
        reused = {**holder, "started": started - 1, "token": "b"}
        storage.put(path, json.dumps(reused).encode(), True)
        with commit_lock.held(table_dir, "taker", wait_seconds=5):
            assert lock_body(table_dir)["what"] == "taker"
        assert json.loads(storage.read_text(f"{path}.broken-b"))["started"] == started - 1
    finally:
        kill_group(child)


def test_a_holder_released_by_hand_refuses_to_commit(s3_bucket, spark):
    lake = Lake(f"s3://{s3_bucket}/lake", spark, engine="delta-rs")
    frame = spark.createDataFrame([(D1, 1, "a")], SCHEMA)
    lake.replace_partitions(THINGS, frame, "d", [D1], commit("first"))
    table_dir = lake.table_location(THINGS)
    with commit_lock.held(table_dir, "a long publish"):
        assert commit_lock.main(["release", "--force", table_dir]) == 0  # the holder alive
        again = spark.createDataFrame([(D1, 2, "b")], SCHEMA)
        with pytest.raises(LakeError, match="no longer holds the commit lock"):
            lake.replace_partitions(THINGS, again, "d", [D1], commit("second"))
    assert (lake.version(THINGS), content(lake)) == (0, [(D1, 1, "a")])


def test_a_release_leaves_alone_the_lock_another_process_took_meanwhile(s3_server, s3_bucket):
    """Between the holder's last look and its delete, its lock is released by hand and taken
    by another process (a hook on the delete's request): that process's lock stays."""
    table_dir = f"s3://{s3_bucket}/lake/t"
    storage = storage_for(table_dir)
    bucket, key = split(commit_lock.lock_path(table_dir))
    other = s3_server.client()  # another process's client: its requests pass no hook here
    theirs = json.dumps({"host": "elsewhere", "pid": 1, "token": "theirs"}).encode()

    def taken_meanwhile(params, **_):
        if params.get("Key") == key:
            other.delete_object(Bucket=bucket, Key=key)
            other.put_object(Bucket=bucket, Key=key, Body=theirs)

    events = storage.client.meta.events
    events.register("before-parameter-build.s3.DeleteObject", taken_meanwhile)
    try:
        with commit_lock.held(table_dir, "ours"):
            pass
    finally:
        events.unregister("before-parameter-build.s3.DeleteObject", taken_meanwhile)
    assert other.get_object(Bucket=bucket, Key=key)["Body"].read() == theirs


def test_a_create_that_boto3_retried_after_it_landed_holds_the_lock(s3_bucket):
    """botocore retries the lock's create-only PUT though it landed (as after a lost answer):
    the retry is refused, the object there is this taker's own, and it holds the lock."""
    table_dir = f"s3://{s3_bucket}/lake/t"
    storage = storage_for(table_dir)
    retried = []

    def retry_the_first_put(request_dict, **_):
        if not retried and request_dict["url_path"].endswith(commit_lock.LOCK_NAME):
            retried.append(request_dict["url_path"])
            return 0  # seconds to wait before retrying
        return None

    events = storage.client.meta.events
    events.register_first("needs-retry.s3.PutObject", retry_the_first_put)
    try:
        with commit_lock.held(table_dir, "taker", wait_seconds=2):
            assert lock_body(table_dir)["what"] == "taker"
    finally:
        events.unregister("needs-retry.s3.PutObject", retry_the_first_put)
    assert retried
    assert not storage.exists(commit_lock.lock_path(table_dir))


def test_the_lease_is_renewed_while_the_lock_is_held(s3_bucket, monkeypatch):
    monkeypatch.setattr(s3_lock, "LEASE_SECONDS", 3.0)
    table_dir = f"s3://{s3_bucket}/lake/t"
    leases = []
    with commit_lock.held(table_dir, "a long commit"):
        for _ in range(3):
            expires = dt.datetime.fromisoformat(lock_body(table_dir)["expires_at"])
            leases.append(expires)
            assert expires > dt.datetime.now(dt.UTC)
            time.sleep(2.5)
        with commit_lock.held(table_dir, "its commit"):  # renewed: still its own
            pass
    assert leases == sorted(leases) and leases[-1] - leases[0] >= dt.timedelta(seconds=4)
    deadline = time.monotonic() + 5
    while any(t.name.startswith("lease ") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the lease is still renewed after the release"
        time.sleep(0.05)
