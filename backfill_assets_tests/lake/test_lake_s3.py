"""A lake on S3 (SeaweedFS, ``demo/local_s3.py``): bad settings are one clear error naming the
setting before anything is written; create-only writes of manifests and records have one
winner; no credential is written into the lake or shown in an error."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from backfill_assets.corrections import registry
from backfill_assets.demo.local_s3 import free_ports, requests_between
from backfill_assets.lake import Lake, LakeError, durable
from backfill_assets.settings import S3Settings
from backfill_assets.storage.stores import S3Storage
from backfill_assets_tests.lake.lake_support import THINGS, commit, content

D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
SCHEMA = "d date, id bigint, tag string"
WRITERS = 8


def objects(server, bucket: str) -> dict[str, bytes]:
    client = server.client()
    keys = [
        o["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in page.get("Contents", [])
    ]
    return {k: client.get_object(Bucket=bucket, Key=k)["Body"].read() for k in keys}


BAD = {
    "wrong-endpoint": ({"AWS_ENDPOINT_URL": "http://127.0.0.1:{port}"}, "AWS_ENDPOINT_URL"),
    "unknown-key-id": ({"AWS_ACCESS_KEY_ID": "nobody"}, "fix AWS_ACCESS_KEY_ID"),
    "wrong-secret": ({"AWS_SECRET_ACCESS_KEY": "not-the-secret"}, "fix AWS_SECRET_ACCESS_KEY"),
    "no-keys": ({"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}, "AWS_SECRET_ACCESS_KEY"),
    "http-not-allowed": ({"AWS_ALLOW_HTTP": "false"}, "set AWS_ALLOW_HTTP=true"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_settings_are_one_clear_error_before_any_write(s3_server, s3_bucket, monkeypatch, case):
    overrides, setting = BAD[case]
    for name, value in overrides.items():
        monkeypatch.setenv(name, value.format(port=free_ports(1)[0]))
    with pytest.raises(LakeError) as refused:
        Lake(f"s3://{s3_bucket}/lake", None, engine="delta-rs")
    assert setting in str(refused.value)
    assert s3_server.secret_key not in str(refused.value)
    assert objects(s3_server, s3_bucket) == {}  # nothing written


def test_a_missing_bucket_is_named_with_the_setting_to_fix(s3_server, s3_bucket):
    with pytest.raises(LakeError, match=r"bucket 'no-such-bucket' .* does not exist") as refused:
        Lake("s3://no-such-bucket/lake", None, engine="delta-rs")
    assert "BACKFILL_LAKE_DIR" in str(refused.value)


def test_a_store_that_ignores_conditional_puts_is_refused(s3_server, s3_bucket, monkeypatch):
    """A store that overwrites despite ``If-None-Match: *`` (here: the header dropped)."""
    real = S3Storage.put

    def put_ignoring_the_condition(self, path, data, create):
        real(self, path, data, create=False)

    monkeypatch.setattr(S3Storage, "put", put_ignoring_the_condition)
    with pytest.raises(LakeError, match="does not support conditional puts"):
        Lake(f"s3://{s3_bucket}/other", None, engine="delta-rs")
    assert objects(s3_server, s3_bucket) == {}  # the probe is gone


def test_delta_spark_on_s3_without_the_s3a_jars_names_the_fix(s3_server, s3_bucket, spark):
    with pytest.raises(LakeError, match=r"no s3a jars.*delta_jars --s3a") as refused:
        Lake(f"s3://{s3_bucket}/lake", spark, engine="delta-spark")  # a session without them
    assert s3_server.secret_key not in str(refused.value)


@pytest.mark.parametrize("where", ["local", "s3"])
def test_of_racing_creators_of_one_record_exactly_one_wins(where, tmp_path, request):
    if where == "s3":
        root = f"s3://{request.getfixturevalue('s3_bucket')}/lake"
    else:
        root = str(tmp_path / "lake")
    path = registry.record_path(root, "c1")
    start = threading.Barrier(WRITERS)
    outcomes: list[str] = [""] * WRITERS

    def create(i: int) -> None:
        start.wait()
        try:
            durable.write_atomically(path, f"writer {i}", "record", create=True)
            outcomes[i] = "won"
        except FileExistsError:
            outcomes[i] = "lost"

    threads = [threading.Thread(target=create, args=(i,)) for i in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(outcomes) == ["lost"] * (WRITERS - 1) + ["won"]
    storage = Lake(root, None, engine="delta-rs").storage
    assert storage.read_text(path) == f"writer {outcomes.index('won')}"
    durable.write_atomically(path, "replaced", "record")  # a plain save replaces it
    assert storage.read_text(path) == "replaced"


def test_a_small_data_file_is_one_put_not_a_multipart_upload(s3_server, s3_bucket, spark):
    """The executors write each data file in one request: a multipart upload (its start, its
    part, its end: three requests, each a round trip) only for a file past a part's size."""
    lake = Lake(f"s3://{s3_bucket}/lake", spark, engine="delta-rs")
    before = s3_server.requests()
    frame = spark.createDataFrame([(D1, 1, "a"), (D2, 2, "b")], SCHEMA)
    lake.replace_partitions(THINGS, frame, "d", [D1, D2], commit("first"))
    answered = requests_between(before, s3_server.requests())
    assert content(lake) == [(D1, 1, "a"), (D2, 2, "b")]
    assert "POST" not in answered, answered  # CreateMultipartUpload, CompleteMultipartUpload
    assert answered["PUT"][0] >= 3, answered  # the two days' files and the commit


def test_reading_a_file_asks_the_store_for_its_footer_and_columns_alone(
    s3_server, s3_bucket, spark
):
    """A read takes each file's size from the log: the executors ask the server for its
    footer and its columns, not first for its size (the server counts a HEAD as a GET)."""
    lake = Lake(f"s3://{s3_bucket}/lake", spark, engine="delta-rs")
    days = [D1 + dt.timedelta(days=i) for i in range(6)]
    rows = [(day, i, "a") for i, day in enumerate(days)]
    lake.replace_partitions(THINGS, spark.createDataFrame(rows, SCHEMA), "d", days, commit("a"))

    def gets(partitions: list[dt.date]) -> tuple[float, list]:
        before = s3_server.requests()
        frame, _ = lake.read_partitions(THINGS, "d", partitions)
        read = sorted(tuple(r) for r in frame.collect())
        return requests_between(before, s3_server.requests()).get("GET", (0.0, 0.0))[0], read

    log_only, nothing = gets([D1 - dt.timedelta(days=1)])  # no file: the log's reads alone
    every_file, read = gets(days)
    assert nothing == [] and read == rows
    assert every_file - log_only <= 2 * len(days), (every_file, log_only)


def test_no_credential_is_written_into_the_lake_or_shown(s3_server, s3_bucket, spark):
    lake = Lake(f"s3://{s3_bucket}/lake", spark, engine="delta-rs")
    frame = spark.createDataFrame([(D1, 1, "a"), (D2, 2, "b")], SCHEMA)
    lake.replace_partitions(THINGS, frame, "d", [D1, D2], commit("first"))
    staged = lake.staging.stage(
        THINGS, spark.createDataFrame([(D1, 10, "n")], SCHEMA), "d", [D1], commit("n")
    )
    lake.staging.publish(staged)
    assert content(lake) == [(D1, 10, "n"), (D2, 2, "b")]
    written = objects(s3_server, s3_bucket)
    assert any(k.endswith(".json") and "_staged" in k for k in written)  # the manifest is there
    leaked = [k for k, body in written.items() if s3_server.secret_key.encode() in body]
    assert leaked == []
    assert s3_server.secret_key not in repr(lake.storage) + repr(S3Settings.from_env())
    assert s3_server.secret_key not in str(lake.history(THINGS))


PUBLISHER = """
import json, os, sys, time
from backfill_assets.lake import Lake, LakeConflict
root, stage_id, go = sys.argv[1], sys.argv[2], float(sys.argv[3])
lake = Lake(root, None, engine="delta-rs")
staged = lake.staging.version("staging/things", stage_id)
time.sleep(max(0.0, go - time.time()))
try:
    result = lake.staging.publish(staged)
    print(json.dumps({"version": result.version, "attempts": result.attempts}))
except LakeConflict as exc:
    print(json.dumps({"conflict": str(exc)}))
sys.stdout.flush()
os._exit(0)  # deltalake readers can abort the interpreter at exit (delta-rs#2184)
"""


def publish_at_once(root: str, stage_ids: list[str]) -> list[dict]:
    """Each staged version published by a process of its own, all at one moment."""
    import json
    import subprocess
    import sys
    import time

    from backfill_assets_testkit.processes import subprocess_env

    go = time.time() + 8  # every child has imported and opened the lake by then
    children = [
        subprocess.Popen(
            [sys.executable, "-c", PUBLISHER, root, sid, str(go)],
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for sid in stage_ids
    ]
    outcomes = []
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err[-2000:]
        outcomes.append(json.loads(out.strip().splitlines()[-1]))
    return outcomes


@pytest.mark.slow
def test_two_processes_publishing_at_once_on_s3_both_land_or_one_conflicts(s3_bucket, spark):
    """delta-rs commits to S3 with a conditional put: of two commits of one version one lands;
    the other retries from the new snapshot (disjoint days: it lands next) or is refused as a
    conflict (the same day: the table keeps the winner's rows, never a mix)."""
    root = f"s3://{s3_bucket}/lake"
    lake = Lake(root, spark, engine="delta-rs")
    rows = [(D1, 1, "old"), (D2, 2, "old")]
    lake.replace_partitions(THINGS, spark.createDataFrame(rows, SCHEMA), "d", [D1, D2], commit("o"))

    def stage(sid: str, day: dt.date, tag: str) -> None:
        frame = spark.createDataFrame([(day, 9, tag)], SCHEMA)
        lake.staging.stage(THINGS, frame, "d", [day], commit(sid), stage_id=sid)

    stage("one", D1, "one")
    stage("two", D2, "two")
    disjoint = publish_at_once(root, ["one", "two"])
    assert sorted(o["version"] for o in disjoint) == [1, 2]
    assert content(lake) == [(D1, 9, "one"), (D2, 9, "two")]

    stage("left", D1, "left")
    stage("right", D1, "right")
    same_day = publish_at_once(root, ["left", "right"])
    won = [o for o in same_day if "version" in o]
    assert len(won) == 1 and won[0]["version"] == 3
    assert ["2024-01-01" in o["conflict"] for o in same_day if "conflict" in o] == [True]
    winner = ["left", "right"][same_day.index(won[0])]
    assert content(lake) == [(D1, 9, winner), (D2, 9, "two")]
