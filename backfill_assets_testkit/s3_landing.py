"""Landing files on the tests' S3 server: a local landing zone's files put at the same relative
paths under a prefix of a bucket (the reference implementation reads the local copy)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def upload(
    local: Path, server, bucket: str, prefix: str, paths: Iterable[Path] | None = None
) -> str:
    """Puts ``paths`` (by default every file under ``local``) under ``s3://bucket/prefix`` at
    their paths relative to ``local``; that location."""
    chosen = sorted(p for p in local.rglob("*") if p.is_file()) if paths is None else paths
    client = server.client()
    for path in chosen:
        key = f"{prefix}/{path.relative_to(local).as_posix()}"
        client.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
    return f"s3://{bucket}/{prefix}"
