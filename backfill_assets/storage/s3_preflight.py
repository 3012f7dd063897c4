"""The check a lake on S3 passes when it is opened, before anything is written: one clear error,
naming the setting to fix, for a wrong endpoint, bad credentials, a missing bucket or a store
that ignores conditional puts (on which two writers of one manifest could both win)."""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from backfill_assets.settings import S3Settings
from backfill_assets.storage import StorageError

PROBE_FOLDER = "_probe"  # under the lake's prefix; Delta readers skip names starting with "_"
_passed: set[tuple[object, str]] = set()  # (settings, bucket) checked in this process


class Store(Protocol):
    """What the check uses of ``storage.S3Storage``."""

    @property
    def settings(self) -> S3Settings: ...

    @property
    def client(self) -> Any: ...

    def put(self, path: str, data: bytes, create: bool) -> str: ...

    def delete(self, path: str) -> bool: ...


def check_s3(storage: Store, location: str, bucket: str, prefix: str) -> None:
    """StorageError unless the lake at ``location`` (``bucket``, key ``prefix``) can be listed and
    written create-only."""
    settings = storage.settings
    if (settings, bucket) in _passed:
        return
    where = settings.endpoint or f"AWS S3 in {settings.region}"
    if not (settings.access_key_id and settings.secret_access_key):
        raise StorageError(
            f"the lake {location} is on S3 but AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are "
            "not both set: set them to the keys of the bucket's user"
        )
    if (settings.endpoint or "").startswith("http://") and not settings.allow_http:
        raise StorageError(
            f"AWS_ENDPOINT_URL is {settings.endpoint}, plain http, which AWS_ALLOW_HTTP does not "
            "allow: set AWS_ALLOW_HTTP=true (a local server) or use its https:// address"
        )
    try:
        storage.client.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except Exception as exc:
        raise StorageError(_listing_error(exc, location, bucket, where)) from None
    _check_conditional_put(storage, location, where)
    _passed.add((settings, bucket))


def _listing_error(exc: Exception, location: str, bucket: str, where: str) -> str:
    from botocore.exceptions import ClientError

    if not isinstance(exc, ClientError):  # no answer: connection refused, DNS, timeout
        return (
            f"cannot reach S3 at {where} for the lake {location}: {type(exc).__name__}; "
            "check AWS_ENDPOINT_URL (and that the server runs)"
        )
    code = exc.response.get("Error", {}).get("Code", "")
    if code == "NoSuchBucket":
        return (
            f"the bucket {bucket!r} of the lake {location} does not exist at {where}: create it, "
            "or fix the lake's location (BACKFILL_LAKE_DIR)"
        )
    if code == "InvalidAccessKeyId":
        return f"S3 at {where} does not know the key id in AWS_ACCESS_KEY_ID: fix AWS_ACCESS_KEY_ID"
    if code == "SignatureDoesNotMatch":
        return (
            f"S3 at {where} refused the signature of AWS_ACCESS_KEY_ID's requests: fix "
            "AWS_SECRET_ACCESS_KEY (the secret of that key id)"
        )
    if code in ("AccessDenied", "403"):
        return (
            f"S3 at {where} denies AWS_ACCESS_KEY_ID listing the bucket {bucket!r} of the lake "
            f"{location}: grant the key read and write there, or use another "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
        )
    return (
        f"S3 at {where} refused to list the lake {location} ({code or type(exc).__name__}): "
        "check AWS_ENDPOINT_URL, AWS_REGION and the keys"
    )


def _check_conditional_put(storage: Store, location: str, where: str) -> None:
    probe = f"{location}/{PROBE_FOLDER}/{uuid.uuid4().hex}"
    try:
        storage.put(probe, b"probe", create=True)
    except OSError as exc:
        raise StorageError(
            f"S3 at {where} lists the lake {location} but refuses to write to it ({exc}): grant "
            "AWS_ACCESS_KEY_ID write access to the bucket"
        ) from None
    try:
        storage.put(probe, b"again", create=True)
    except FileExistsError:
        return
    finally:
        storage.delete(probe)
    raise StorageError(
        f"S3 at {where} overwrote an object that a write with If-None-Match: * had to leave "
        "alone: this store does not support conditional puts, so two writers of one manifest or "
        "commit could both win. Use a store that does (AWS S3, SeaweedFS): AWS_ENDPOINT_URL"
    )
