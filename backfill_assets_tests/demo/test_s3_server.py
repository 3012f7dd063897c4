"""The tests' S3 server (``demo/local_s3.py``): it enforces its credentials, and of racing
create-only puts of one key (``If-None-Match: *``) exactly one wins."""

from __future__ import annotations

import threading

import pytest
from botocore.exceptions import ClientError

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
