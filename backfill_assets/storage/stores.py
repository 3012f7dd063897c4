"""Where the project's files live: a local folder or an S3 bucket, behind one small ``Storage``.

Every file is named by a location string: an absolute local path, or ``s3://bucket/key``.
``storage_for(location)`` gives the storage that serves it. What goes through it: what the lake
reads and writes beside Delta (the staged manifests, staged data file deletes, the reads of the
Delta log: ``lake/log.py``), the corrections' records, and the landing zone's listing and reads.
Delta's commits and scans go through delta-rs with ``delta_options``; the data files through
pyarrow with ``arrow_filesystem``.

On S3 the small files are written by one PUT each, which S3 makes atomic per object: a reader
sees the old object or the new one, as the local rename gives. A create-only write sends
``If-None-Match: *``, so of two writers creating one manifest or record exactly one wins (the
local one links the temporary file in place, which fails when the name is taken). The clients
are boto3's for these files, because its ``put_object`` sends ``IfNoneMatch`` (pyarrow's S3
filesystem has no conditional write), and pyarrow's for the Parquet files, which the executors
stream. Endpoint and keys come from ``settings.S3Settings`` only, and no error says a key.
"""

from __future__ import annotations

import functools
import os
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from backfill_assets.settings import S3Settings
from backfill_assets.storage import StorageError
from backfill_assets.storage.s3_preflight import check_s3

if TYPE_CHECKING:
    import pyarrow.fs as pafs

S3_SCHEME = "s3://"


def is_s3(location: str | os.PathLike) -> bool:
    return os.fspath(location).startswith(S3_SCHEME)


class LocalStorage:
    """Files on this machine's disk; the local half of durable writes is in ``durable.py``."""

    is_local = True

    def read_text(self, path: str) -> str:
        """FileNotFoundError when there is no file at ``path``."""
        with open(path, encoding="utf-8") as src:
            return src.read()

    def list_names(self, folder: str) -> list[str]:
        """The names of the files directly in ``folder``; [] when it does not exist."""
        try:
            return [n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n))]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def has_files(self, folder: str) -> bool:
        return os.path.isdir(folder)

    def size(self, path: str) -> int:
        """Bytes of the file at ``path``; FileNotFoundError when there is none."""
        return os.path.getsize(path)

    def list_files_modified(self, folder: str) -> dict[str, int]:
        """Every file under ``folder``, at any depth, relative to it: its modification time
        (ms); a file deleted while the folder is listed is left out."""
        found = {}
        for parent, _, names in os.walk(folder):
            for name in names:
                path = os.path.join(parent, name)
                try:
                    found[os.path.relpath(path, folder)] = int(os.stat(path).st_mtime * 1000)
                except FileNotFoundError:
                    pass
        return found

    def modified_ms(self, path: str) -> int:
        """FileNotFoundError when there is no file at ``path``."""
        return int(os.stat(path).st_mtime * 1000)

    def delete(self, path: str) -> bool:
        """False when it was already gone."""
        try:
            os.remove(path)
            return True
        except FileNotFoundError:
            return False

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target)

    def makedirs(self, folder: str) -> None:
        os.makedirs(folder, exist_ok=True)

    def delta_options(self) -> dict[str, str] | None:
        return None

    def arrow_filesystem(self) -> tuple[pafs.FileSystem | None, str]:
        return None, ""

    def check(self, location: str) -> None:
        pass


class S3Object(NamedTuple):
    """A listed object: its key relative to the folder listed, its size, when it was written."""

    name: str
    size: int
    modified_ns: int  # S3's LastModified: when the PUT completed, on the server's clock


@dataclass(frozen=True)
class S3Storage:
    """Objects in S3 (or a server speaking its API), reached as ``S3Settings`` says."""

    settings: S3Settings
    is_local = False

    @property
    def client(self) -> Any:
        return _boto_client(self.settings)

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def read_bytes(self, path: str) -> bytes:
        """FileNotFoundError when there is no object at ``path``."""
        bucket, key = split(path)
        try:
            return bytes(self.client.get_object(Bucket=bucket, Key=key)["Body"].read())
        except Exception as exc:
            raise _not_found_or(exc, path) from None

    def read_tagged(self, path: str) -> tuple[bytes, str]:
        """The object at ``path`` and its ETag, for a ``put`` that must replace exactly it;
        FileNotFoundError when there is none."""
        bucket, key = split(path)
        try:
            found = self.client.get_object(Bucket=bucket, Key=key)
            return bytes(found["Body"].read()), str(found["ETag"])
        except Exception as exc:
            raise _not_found_or(exc, path) from None

    def put(self, path: str, data: bytes, create: bool, if_match: str | None = None) -> str:
        """One PUT; the ETag of the object it wrote. ``create``: only when no object is at
        ``path`` (FileExistsError if one is); ``if_match``: only while the object there has
        that ETag (``If-Match``; FileExistsError when another write replaced or deleted it
        meanwhile)."""
        bucket, key = split(path)
        extra = {"IfNoneMatch": "*"} if create else {}
        if if_match is not None:
            extra["IfMatch"] = if_match
        try:
            return str(self.client.put_object(Bucket=bucket, Key=key, Body=data, **extra)["ETag"])
        except Exception as exc:
            if _status(exc) in (409, 412) or (if_match is not None and _status(exc) == 404):
                raise FileExistsError(f"{path} exists already or was changed") from None
            raise _os_error(exc, path) from None

    def list_names(self, folder: str) -> list[str]:
        return [o.name for o in self.list_folder(folder)[1]]

    def list_folder(self, folder: str) -> tuple[list[str], list[S3Object]]:
        """What is directly under ``folder``: the names of its sub-folders (the key prefixes one
        level down) and its objects, named relative to it; nothing when there is nothing."""
        return self._list(folder, "/")

    def list_tree(self, folder: str) -> list[S3Object]:
        """Every object under ``folder``, at any depth, named relative to it."""
        return self._list(folder, "")[1]

    def _list(self, folder: str, delimiter: str) -> tuple[list[str], list[S3Object]]:
        bucket, prefix = split(folder)
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        folders: list[str] = []
        objects: list[S3Object] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix, Delimiter=delimiter
            )
            for page in pages:
                folders += [
                    p["Prefix"][len(prefix) :].rstrip("/") for p in page.get("CommonPrefixes", [])
                ]
                objects += [
                    S3Object(
                        o["Key"][len(prefix) :],
                        o["Size"],
                        int(o["LastModified"].timestamp() * 1_000_000) * 1000,
                    )
                    for o in page.get("Contents", [])
                ]
        except Exception as exc:
            raise _os_error(exc, folder) from None
        return folders, objects

    def exists(self, path: str) -> bool:
        bucket, key = split(path)
        try:
            self.client.head_object(Bucket=bucket, Key=key)
            return True
        except Exception as exc:
            if _status(exc) == 404:
                return False
            raise _os_error(exc, path) from None

    def has_files(self, folder: str) -> bool:
        bucket, prefix = split(folder)
        try:
            found = self.client.list_objects_v2(
                Bucket=bucket, Prefix=prefix.rstrip("/") + "/", MaxKeys=1
            )
        except Exception as exc:
            raise _os_error(exc, folder) from None
        return found.get("KeyCount", 0) > 0

    def size(self, path: str) -> int:
        """Bytes of the object at ``path``; FileNotFoundError when there is none."""
        bucket, key = split(path)
        try:
            return int(self.client.head_object(Bucket=bucket, Key=key)["ContentLength"])
        except Exception as exc:
            raise _not_found_or(exc, path) from None

    def list_files_modified(self, folder: str) -> dict[str, int]:
        """Every object under ``folder``, at any depth, relative to it: its LastModified (ms)."""
        return {o.name: o.modified_ns // 1_000_000 for o in self.list_tree(folder)}

    def modified_ms(self, path: str) -> int:
        bucket, key = split(path)
        try:
            head = self.client.head_object(Bucket=bucket, Key=key)
        except Exception as exc:
            raise _not_found_or(exc, path) from None
        return int(head["LastModified"].timestamp() * 1000)

    def delete(self, path: str, if_match: str | None = None) -> bool:
        """False when it was already gone (S3 answers a delete of nothing with success: asked
        first, so that a count of deleted files stays true). ``if_match``: only while the
        object there has that ETag (a conditional delete, ``If-Match``), False when it has
        another or there is none."""
        bucket, key = split(path)
        if if_match is not None:
            try:
                self.client.delete_object(Bucket=bucket, Key=key, IfMatch=if_match)
            except Exception as exc:
                if _status(exc) in (404, 412):
                    return False
                raise _os_error(exc, path) from None
            return True
        if not self.exists(path):
            return False
        try:
            self.client.delete_object(Bucket=bucket, Key=key)
        except Exception as exc:
            raise _os_error(exc, path) from None
        return True

    def rename(self, source: str, target: str) -> None:
        """A copy, then the delete of the source: not atomic (a crash between leaves both)."""
        bucket, key = split(source)
        target_bucket, target_key = split(target)
        try:
            self.client.copy_object(
                Bucket=target_bucket, Key=target_key, CopySource={"Bucket": bucket, "Key": key}
            )
        except Exception as exc:
            raise _not_found_or(exc, source) from None
        self.delete(source)

    def makedirs(self, folder: str) -> None:
        pass  # S3 has no folders: a key's prefix is all there is

    def delta_options(self) -> dict[str, str] | None:
        """delta-rs's storage options: the same five variables, from the settings."""
        s = self.settings
        options = {"AWS_REGION": s.region, "AWS_ALLOW_HTTP": "true" if s.allow_http else "false"}
        if s.endpoint:
            options["AWS_ENDPOINT_URL"] = s.endpoint
        if s.access_key_id and s.secret_access_key:
            options["AWS_ACCESS_KEY_ID"] = s.access_key_id
            options["AWS_SECRET_ACCESS_KEY"] = s.secret_access_key
        return options

    def arrow_filesystem(self) -> tuple[pafs.FileSystem | None, str]:
        """pyarrow's S3 filesystem and the prefix it strips (paths are ``bucket/key``)."""
        return arrow_s3(self.settings), S3_SCHEME

    def check(self, location: str) -> None:
        """One clear StorageError, naming the setting to fix, when the lake at ``location`` cannot
        be reached: see ``s3_preflight.py``."""
        check_s3(self, location, *split(location))


def storage_for(location: str | os.PathLike) -> LocalStorage | S3Storage:
    """The storage that serves ``location`` (S3's settings read now, from the environment)."""
    if is_s3(location):
        try:
            return S3Storage(S3Settings.from_env())
        except ValueError as exc:
            raise StorageError(str(exc)) from None
    return LOCAL


LOCAL = LocalStorage()


def split(location: str) -> tuple[str, str]:
    """(bucket, key) of ``s3://bucket/key``."""
    rest = os.fspath(location).removeprefix(S3_SCHEME)
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise StorageError(f"{location} names no bucket: s3://<bucket>/<prefix>")
    return bucket, key


def normalise(location: str | os.PathLike) -> str:
    """The lake root as a location: ``s3://bucket/prefix`` without trailing slash, or an
    absolute local path."""
    text = os.fspath(location)
    if is_s3(text):
        bucket, key = split(text)
        key = "/".join(p for p in key.split("/") if p)
        return f"{S3_SCHEME}{bucket}/{key}" if key else f"{S3_SCHEME}{bucket}"
    return os.path.abspath(text)


@functools.lru_cache(maxsize=8)
def _boto_client(settings: S3Settings) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "s3",
        endpoint_url=settings.endpoint,
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
        region_name=settings.region,
        config=Config(
            retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=60
        ),
    )


@functools.lru_cache(maxsize=8)
def arrow_s3(settings: S3Settings) -> pafs.FileSystem:
    """pyarrow's S3 filesystem for ``settings`` (cached: one per process and settings; the
    executors build their own from the settings the task carries).

    With ``allow_delayed_open`` a file opened for writing starts no multipart upload until it
    outgrows a part: a data file smaller than that (most of a day's) is one PUT when it is
    closed, instead of a multipart upload's three requests. A failed upload raises at the
    close, which the writer waits for before it names the file (``parquet_writer``)."""
    import pyarrow.fs as pafs

    options: dict[str, Any] = {
        "region": settings.region,
        "allow_bucket_creation": False,
        "allow_delayed_open": True,
    }
    if settings.endpoint:
        url = urllib.parse.urlsplit(settings.endpoint)
        options["endpoint_override"] = url.netloc or settings.endpoint
        options["scheme"] = url.scheme or "https"
    if settings.access_key_id and settings.secret_access_key:
        options["access_key"] = settings.access_key_id
        options["secret_key"] = settings.secret_access_key
    return pafs.S3FileSystem(**options)


def _status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status if isinstance(status, int) else None


def _code(exc: Exception) -> str:
    response = getattr(exc, "response", None)
    return str(response.get("Error", {}).get("Code", "")) if isinstance(response, dict) else ""


def _not_found_or(exc: Exception, path: str) -> OSError:
    if _status(exc) == 404 and _code(exc) != "NoSuchBucket":
        return FileNotFoundError(f"no object at {path}")
    return _os_error(exc, path)


def _os_error(exc: Exception, path: str) -> OSError:
    """An OSError naming the object and what S3 said (never the keys: boto3's messages hold the
    code and the resource, not the credentials)."""
    code = _code(exc) or type(exc).__name__
    return OSError(f"S3 refused an operation on {path}: {code}: {exc}")
