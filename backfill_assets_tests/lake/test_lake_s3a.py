"""delta-spark on a lake in S3 (SeaweedFS, ``demo/local_s3.py``): Hadoop's s3a jars work in the
session (a write, a rename, which hadoop-aws does as copies through the SDK's netty client, and
a read), and the table's commit lock keeps a second driver from committing meanwhile."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import subprocess
import sys
import time

import pytest

from backfill_assets.lake import Lake, LakeError, commit_lock
from backfill_assets.lake.manifests import file_ages_ms
from backfill_assets_testkit.processes import kill_group, start, subprocess_env
from backfill_assets_tests.lake.lake_support import THINGS, commit, content, wait_for

D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
SCHEMA = "d date, id bigint, tag string"


def keys(server, bucket: str, prefix: str) -> list[str]:
    pages = server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def test_s3a_writes_renames_and_reads_on_the_server(s3a_spark, s3_server, s3_bucket):
    """Spark's own Parquet writer and reader through s3a, and a rename of the folder."""
    from backfill_assets.settings import S3Settings
    from backfill_assets.spark import s3a

    spark = s3a_spark
    s3a.configure(spark, S3Settings.from_env())
    rows = [(i, f"tag-{i % 7}") for i in range(1000)]
    spark.createDataFrame(rows, "id bigint, tag string").repartition(3).write.parquet(
        f"s3://{s3_bucket}/first"
    )
    written = keys(s3_server, s3_bucket, "first/")
    assert "first/_SUCCESS" in written and sum(k.endswith(".parquet") for k in written) == 3
    jvm = spark._jvm
    source = jvm.org.apache.hadoop.fs.Path(f"s3://{s3_bucket}/first")
    filesystem = source.getFileSystem(spark._jsc.hadoopConfiguration())
    assert filesystem.getClass().getName() == s3a.S3A_FILESYSTEM
    assert filesystem.rename(source, jvm.org.apache.hadoop.fs.Path(f"s3://{s3_bucket}/second"))
    assert keys(s3_server, s3_bucket, "first/") == []
    assert keys(s3_server, s3_bucket, "second/") == [
        k.replace("first/", "second/", 1) for k in written
    ]
    back = spark.read.parquet(f"s3://{s3_bucket}/second").collect()
    assert sorted((r["id"], r["tag"]) for r in back) == rows


def test_s3a_copies_a_big_object_through_the_sdks_netty_client(s3a_spark, s3_server, s3_bucket):
    """hadoop-aws copies an object at or above its multipart threshold through the SDK's
    transfer manager, whose client (netty-nio-client) is built for netty 4.1 while pyspark
    ships 4.2: a rename of one such object (threshold lowered to 5 MiB for this bucket)."""
    from backfill_assets.settings import S3Settings
    from backfill_assets.spark import s3a

    spark = s3a_spark
    s3a.configure(spark, S3Settings.from_env())
    spark._jsc.hadoopConfiguration().set(f"fs.s3a.bucket.{s3_bucket}.multipart.threshold", "5M")
    frame = spark.range(120_000, numPartitions=1).selectExpr(
        "id", "sha2(cast(id as string), 256) AS h"
    )
    frame.write.option("compression", "none").parquet(f"s3://{s3_bucket}/big")
    client = s3_server.client()
    sizes = {o["Key"]: o["Size"] for o in client.list_objects_v2(Bucket=s3_bucket)["Contents"]}
    assert max(sizes.values()) > 5 * 1024 * 1024
    jvm = spark._jvm
    source = jvm.org.apache.hadoop.fs.Path(f"s3://{s3_bucket}/big")
    filesystem = source.getFileSystem(spark._jsc.hadoopConfiguration())
    assert filesystem.rename(source, jvm.org.apache.hadoop.fs.Path(f"s3://{s3_bucket}/moved"))
    moved = {o["Key"]: o["Size"] for o in client.list_objects_v2(Bucket=s3_bucket)["Contents"]}
    assert moved == {k.replace("big/", "moved/", 1): size for k, size in sizes.items()}
    assert _loaded(spark, "software.amazon.awssdk.http.nio.netty.NettyNioAsyncHttpClient")
    assert not _loaded(spark, "software.amazon.awssdk.http.nio.netty.NoSuchClient")
    back = spark.read.parquet(f"s3://{s3_bucket}/moved")
    assert back.count() == 120_000
    assert back.where("h = sha2(cast(id as string), 256)").count() == 120_000


def _loaded(spark, name: str) -> bool:
    """Whether the session's class loader (the one with spark.jars) has loaded ``name``."""
    jvm = spark._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    string = jvm.java.lang.Class.forName("java.lang.String")
    types = jvm.java.lang.reflect.Array.newInstance(
        jvm.java.lang.Class.forName("java.lang.Class"), 1
    )
    types[0] = string
    method = jvm.java.lang.Class.forName("java.lang.ClassLoader").getDeclaredMethod(
        "findLoadedClass", types
    )
    method.setAccessible(True)
    args = jvm.java.lang.reflect.Array.newInstance(
        jvm.java.lang.Class.forName("java.lang.Object"), 1
    )
    args[0] = name
    found = method.invoke(loader, args)
    while found is None and loader.getParent() is not None:
        loader = loader.getParent()
        found = method.invoke(loader, args)
    return found is not None


def test_every_commit_path_waits_for_the_lock_then_refuses(
    s3a_spark, s3_server, s3_bucket, monkeypatch
):
    """Each commit path, while another holder has the table's lock: refused after the wait,
    nothing committed; once the lock is cleared by hand, each goes through."""
    spark = s3a_spark
    lake = Lake(f"s3://{s3_bucket}/lake", spark, engine="delta-spark")
    first = spark.createDataFrame([(D1, 1, "a"), (D2, 2, "b")], SCHEMA)
    lake.replace_partitions(THINGS, first, "d", [D1, D2], commit("first"))
    lake.replace_partitions(
        THINGS, spark.createDataFrame([(D1, 3, "c")], SCHEMA), "d", [D1], commit("second")
    )
    staged = lake.staging.stage(
        THINGS, spark.createDataFrame([(D2, 9, "s")], SCHEMA), "d", [D2], commit("staged")
    )
    table_dir = lake.table_location(THINGS)
    staged_since = min([staged.created_ms, *file_ages_ms(table_dir, staged)])
    lock = commit_lock.lock_path(table_dir)
    holder = {"host": "elsewhere", "pid": 4242, "since": "2024-01-01T00:00:00+00:00", "what": "x"}
    lake.storage.put(lock, json.dumps({**holder, "token": "theirs"}).encode(), create=True)
    monkeypatch.setattr(commit_lock, "WAIT_SECONDS", 1.0)
    # (the call, the table's content after it went through, its version then)
    paths = {
        "replace": (
            lambda: lake.replace_partitions(
                THINGS, spark.createDataFrame([(D1, 5, "x")], SCHEMA), "d", [D1], commit("x")
            ),
            [(D1, 5, "x"), (D2, 2, "b")],
            2,
        ),
        "publish": (lambda: lake.staging.publish(staged), [(D1, 5, "x"), (D2, 9, "s")], 3),
        "restore": (
            lambda: lake.restore_partitions(THINGS, "d", [D1], 0, commit("r")),
            [(D1, 1, "a"), (D2, 9, "s")],
            4,
        ),
        "compact": (lambda: lake.compact(THINGS, "d", commit("c")), None, None),
        # a retention just past the staged version's age: the first replace's files, older,
        # are past its cutoff, so Lake.vacuum runs a VACUUM (under the lock); the staged files,
        # younger, are not
        "vacuum": (
            lambda: lake.vacuum(THINGS, (time.time() * 1000 - staged_since + 300) / 3.6e6),
            None,
            None,
        ),
        "checkpoint": (lambda: lake.checkpoint(THINGS), None, None),
    }
    for name, (call, _, _) in paths.items():
        started = time.monotonic()
        with pytest.raises(LakeError, match="commit lock") as refused:
            call()
        assert time.monotonic() - started >= 1.0, name
        assert "pid 4242" in str(refused.value) and "commit_lock release" in str(refused.value)
        assert lake.version(THINGS) == 1, name
    assert content(lake) == [(D1, 3, "c"), (D2, 2, "b")]
    assert not any("checkpoint" in k for k in keys(s3_server, s3_bucket, "lake/"))
    assert lake.storage.exists(lock)  # left to its holder
    assert commit_lock.main(["release", table_dir]) == 0
    for name, (call, rows, version) in paths.items():
        call()
        assert not lake.storage.exists(lock), name
        if rows is not None:
            assert (content(lake), lake.version(THINGS)) == (rows, version), name
    assert content(lake) == [(D1, 1, "a"), (D2, 9, "s")]  # compaction changed no row
    written = keys(s3_server, s3_bucket, "lake/")
    assert any(k.endswith(".checkpoint.parquet") for k in written)
    # The keys are in no object written, nor in the session's Spark conf.
    client, secret = s3_server.client(), s3_server.secret_key.encode()
    assert [
        k for k in written if secret in client.get_object(Bucket=s3_bucket, Key=k)["Body"].read()
    ] == []
    assert s3_server.secret_key not in repr(spark.sparkContext.getConf().getAll())
    assert s3_server.secret_key not in repr(spark.conf.getAll)


HOLDER = """
import json, sys, time
from backfill_assets.lake import commit_lock
table_dir, hold, wait, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
try:
    with commit_lock.held(table_dir, "test", wait_seconds=wait):
        entered = time.time()
        time.sleep(hold)
        left = time.time()
    result = {"entered": entered, "left": left}
except Exception as exc:
    result = {"refused": f"{type(exc).__name__}: {exc}"}
with open(out, "w") as handle:
    json.dump(result, handle)
"""


def holding(table_dir: str, hold: float, wait: float, out) -> subprocess.Popen:
    """A process that takes the lock (waiting up to ``wait`` s), holds it ``hold`` s and writes
    when it entered and left, or why it was refused, to ``out``."""
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, table_dir, str(hold), str(wait), str(out)],
        env=subprocess_env(),
    )


def outcome(child: subprocess.Popen, out) -> dict:
    assert child.wait(timeout=120) == 0
    return json.loads(out.read_text())


def test_two_processes_never_hold_one_tables_lock_at_once(s3_bucket, tmp_path):
    root = f"s3://{s3_bucket}/lake"
    lake = Lake(root, None, engine="delta-rs")
    table_dir = lake.table_location(THINGS)
    outs = [tmp_path / f"out{i}.json" for i in range(3)]
    children = [holding(table_dir, 1.5, 60.0, out) for out in outs]
    spans = sorted(
        (o["entered"], o["left"])
        for o in (outcome(c, out) for c, out in zip(children, outs, strict=True))
    )
    assert len(spans) == 3
    for (_, left), (entered, _) in itertools.pairwise(spans):
        assert entered >= left  # serialised: each entered after the one before had left
    assert not lake.storage.exists(commit_lock.lock_path(table_dir))
    # While one holds it, one that may wait only a second is refused, naming the holder.
    first = holding(table_dir, 5.0, 0.0, tmp_path / "holder.json")
    deadline = time.monotonic() + 60
    while not lake.storage.exists(commit_lock.lock_path(table_dir)):
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    second = holding(table_dir, 0.0, 1.0, tmp_path / "refused.json")
    refused = outcome(second, tmp_path / "refused.json")["refused"]
    held = outcome(first, tmp_path / "holder.json")
    assert held["left"] - held["entered"] >= 5.0
    assert refused.startswith("LakeError") and f"pid {first.pid}" in refused
    assert f"commit_lock release {table_dir}" in refused


def test_a_lock_left_by_a_killed_process_is_broken_by_the_next_takers_one_at_a_time(
    s3_bucket, tmp_path
):
    """A holder on this host killed (and not yet reaped: a zombie) leaves its lock; the next
    takers do not wait for a hand release: one breaks it, saying whose it was, and the three
    still hold the lock one at a time."""
    lake = Lake(f"s3://{s3_bucket}/lake", None, engine="delta-rs")
    table_dir = lake.table_location(THINGS)
    lock = commit_lock.lock_path(table_dir)
    killed = holding(table_dir, 600.0, 0.0, tmp_path / "killed.json")
    deadline = time.monotonic() + 60
    while not lake.storage.exists(lock):
        assert killed.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    killed.kill()
    time.sleep(0.5)  # not reaped: a zombie until wait() below
    outs = [tmp_path / f"out{i}.json" for i in range(3)]
    takers = [holding(table_dir, 1.0, 30.0, out) for out in outs]
    spans = sorted(
        (o["entered"], o["left"])
        for o in (outcome(c, out) for c, out in zip(takers, outs, strict=True))
    )
    assert killed.wait(timeout=10) == -9
    assert len(spans) == 3
    for (_, left), (entered, _) in itertools.pairwise(spans):
        assert entered >= left
    assert not lake.storage.exists(lock)
    [broken] = [k for k in lake.storage.list_names(table_dir) if k.startswith("_commit.lock.")]
    note = json.loads(lake.storage.read_text(f"{table_dir}/{broken}"))
    assert note["pid"] == killed.pid and note["broken_by_pid"] in {t.pid for t in takers}


def test_a_delta_spark_writer_killed_holding_the_lock_leaves_the_old_version_and_a_rerun_lands(
    s3a_spark, s3_bucket, tmp_path, monkeypatch
):
    """A delta-spark writer on S3 SIGKILLed in the middle of its write, the table's lock held:
    the table stays at its old version, and the same write run again (another driver on this
    host) breaks the dead writer's lock and lands, with no hand release."""
    spark = s3a_spark
    root = f"s3://{s3_bucket}/lake"
    lake = Lake(root, spark, engine="delta-spark")
    old = [(D1, 1, "old"), (D2, 2, "old")]
    lake.replace_partitions(
        THINGS, spark.createDataFrame(old, SCHEMA), "d", [D1, D2], commit("old")
    )
    new = [["2024-01-01", 10, "new"], ["2024-01-02", 20, "new"]]
    spec, pause = tmp_path / "spec.json", tmp_path / "pause"
    pause.mkdir()
    job = {"table": THINGS, "partitions": ["2024-01-01", "2024-01-02"], "rows": new}
    spec.write_text(
        json.dumps(
            {
                "root": root,
                "results": str(tmp_path / "out"),
                "engine": "delta-spark",
                "jobs": [{**job, "run_id": "killed"}],
            }
        )
    )
    env = subprocess_env(
        BACKFILL_LAKE_PAUSE_DIR=str(pause),
        BACKFILL_LAKE_PAUSE_AT="before_commit",
        BACKFILL_LAKE_DIR=root,  # the worker's session gets the s3a jars
    )
    writer = start(
        [sys.executable, "-m", "backfill_assets_tests.lake.lake_worker", str(spec)],
        env,
        tmp_path / "writer.log",
    )
    try:
        wait_for(pause / "before_commit.1.reached", [writer], 300)
        table_dir = lake.table_location(THINGS)
        assert str(writer.pid) in commit_lock.holder(table_dir)
    finally:
        kill_group(writer)
    assert (content(lake), lake.version(THINGS)) == (old, 0)
    monkeypatch.setattr(commit_lock, "WAIT_SECONDS", 5.0)  # no hand release: broken at once
    rows = [(dt.date.fromisoformat(d), i, tag) for d, i, tag in new]
    lake.replace_partitions(
        THINGS, spark.createDataFrame(rows, SCHEMA), "d", [D1, D2], commit("again")
    )
    assert (content(lake), lake.version(THINGS)) == (rows, 1)
    assert not lake.storage.exists(commit_lock.lock_path(table_dir))
