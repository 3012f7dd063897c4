"""The tests' S3 server (``demo/local_s3.py``): it enforces its credentials, of racing
create-only puts of one key (``If-None-Match: *``) exactly one wins, and once stopped it leaves
no unix socket behind."""

from __future__ import annotations

import threading

import pytest
from botocore.exceptions import ClientError

from backfill_assets.demo.local_s3 import SOCKETS_DIR, S3Server

WRITERS = 8


def test_racing_create_only_puts_of_one_key_have_exactly_one_winner(s3_server, s3_bucket):
    start = threading.Barrier(WRITERS)
    outcomes: list[object] = [None] * WRITERS

    def put(i: int) -> None:
        client = s3_server.client()
        start.wait()
        try:
            client.put_object(Bucket=s3_bucket, Key="race", Body=f"{i}".encode(), IfNoneMatch="*")
            outcomes[i] = "won"
        except ClientError as exc:
            outcomes[i] = exc.response["ResponseMetadata"]["HTTPStatusCode"]

    threads = [threading.Thread(target=put, args=(i,)) for i in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(outcomes, key=str) == [412] * (WRITERS - 1) + ["won"]
    body = s3_server.client().get_object(Bucket=s3_bucket, Key="race")["Body"].read()
    assert body == str(outcomes.index("won")).encode()  # the winner's bytes, no other's


def test_the_server_refuses_a_wrong_secret(s3_server, s3_bucket):
    with pytest.raises(ClientError) as refused:
        s3_server.client(secret_key="not-the-secret").list_objects_v2(Bucket=s3_bucket)
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"


def test_a_stopped_server_leaves_none_of_its_unix_sockets(tmp_path):
    server = S3Server.start(tmp_path / "s3")
    try:
        made = server.sockets()
        # weed makes a socket for some of its servers' ports (its filer's and S3's at least)
        assert len(made) >= 2, sorted(SOCKETS_DIR.glob("seaweedfs-*.sock"))
    finally:
        server.stop()
    assert [p for p in made if p.exists()] == []
