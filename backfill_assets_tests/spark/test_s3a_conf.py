"""The s3a properties a lake in S3 puts in the session's Hadoop configuration (``spark/s3a.py``)."""

from __future__ import annotations

import pytest

from backfill_assets.settings import S3Settings
from backfill_assets.spark.s3a import hadoop_settings

KEYS = {"fs.s3a.access.key": "id", "fs.s3a.secret.key": "secret"}


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        (
            "http://127.0.0.1:8333",
            {
                "fs.s3a.endpoint": "http://127.0.0.1:8333",
                "fs.s3a.path.style.access": "true",
                "fs.s3a.connection.ssl.enabled": "false",
            },
        ),
        (
            "https://minio.example:9000",
            {
                "fs.s3a.endpoint": "https://minio.example:9000",
                "fs.s3a.path.style.access": "true",
                "fs.s3a.connection.ssl.enabled": "true",
            },
        ),
        (None, {"fs.s3a.connection.ssl.enabled": "true"}),  # AWS's own: TLS, bucket DNS names
    ],
)
def test_the_aws_variables_become_s3a_properties(endpoint, expected):
    settings = S3Settings(endpoint, "id", "secret", "eu-west-3", allow_http=True)
    assert hadoop_settings(settings) == {
        **expected,
        "fs.s3a.endpoint.region": "eu-west-3",
        **KEYS,
    }


def test_without_keys_none_are_set():
    assert not set(KEYS) & set(hadoop_settings(S3Settings("http://h:1", None, None)))
