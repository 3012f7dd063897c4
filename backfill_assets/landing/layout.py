"""The landing zone's layout, in one place: the Spark reader, the sensor's scanner, ``plan`` and
the generator all name folders and files through here. No Spark, no Dagster.

``<landing>/orders/arrival_date=YYYY-MM-DD/<name>.jsonl`` and
``<landing>/fx_rates/rate_date=YYYY-MM-DD/<name>.csv`` (docs/contract.md). A file whose name
starts with ``_`` or ``.`` is still being written and is not there yet. A symbolic link that
leads outside the landing root is not part of the zone: nothing outside the root is read.

The root is a local folder or an ``s3://bucket/prefix`` location, reached through the lake's
``storage``: on S3 a folder is a key prefix, listed one level at a time.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import BinaryIO

from backfill_assets.catalog import FX_RATES_DATASET, ORDERS_DATASET
from backfill_assets.storage.stores import S3Storage, is_s3, storage_for

Root = str | os.PathLike[str]  # a local folder, or s3://bucket/prefix


@dataclass(frozen=True)
class Dataset:
    """A landed dataset: its folder under the root, its partition folders' prefix, its files'."""

    name: str
    partition_prefix: str
    suffix: str

    def folder_name(self, day: date) -> str:
        return f"{self.partition_prefix}={day.isoformat()}"

    def relative_folder(self, day: date) -> str:
        return f"{self.name}/{self.folder_name(day)}"


DATASETS: dict[str, Dataset] = {
    ORDERS_DATASET: Dataset(ORDERS_DATASET, "arrival_date", ".jsonl"),
    FX_RATES_DATASET: Dataset(FX_RATES_DATASET, "rate_date", ".csv"),
}
FX_HEADER = "currency,usd_per_unit"  # the first line of every rate file

_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class LandingFile:
    """One landed file: its partition date and its path relative to the landing root."""

    partition: date
    relative_path: str
    size_bytes: int


def dataset(name: str) -> Dataset:
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(
            f"unknown landing dataset {name!r}; expected one of {sorted(DATASETS)}"
        ) from None


def folder_day(name: str, ds: Dataset) -> date | None:
    """The date of a ``prefix=YYYY-MM-DD`` folder name, None for anything else."""
    prefix = ds.partition_prefix + "="
    text = name[len(prefix) :] if name.startswith(prefix) else ""
    if not _DAY.fullmatch(text):
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def is_complete(name: str, ds: Dataset) -> bool:
    """A landed file of ``ds`` by name: not in flight (``_``/``.``), with the dataset's suffix."""
    return not name.startswith(("_", ".")) and name.endswith(ds.suffix)


def leads_outside(path: str | os.PathLike, landing_root: str | os.PathLike) -> bool:
    """True for a symbolic link whose target is not under the landing root (only links cost a
    resolve): such a file or folder is not part of the landing zone."""
    return os.path.islink(path) and not Path(path).resolve().is_relative_to(
        Path(landing_root).resolve()
    )


def join(root: Root, relative: str) -> str:
    """The location of ``relative`` (a ``LandingFile.relative_path``) under the landing root."""
    text = os.fspath(root)
    return f"{text.rstrip('/')}/{relative}" if is_s3(text) else os.path.join(text, relative)


def open_landed(location: Root) -> BinaryIO:
    """A landed file's bytes (at ``join(root, relative)``), to read once; on S3 the object is
    fetched whole."""
    storage = storage_for(location)
    if isinstance(storage, S3Storage):
        return io.BytesIO(storage.read_bytes(os.fspath(location)))
    return open(location, "rb")


def put_landed(root: Root, relative: str, data: bytes) -> None:
    """Lands ``data`` as the file ``relative``, as a producer does: on disk written under an
    in-flight ``_`` name and renamed into place, on S3 one PUT (an object appears whole)."""
    location = join(root, relative)
    storage = storage_for(location)
    if isinstance(storage, S3Storage):
        storage.put(location, data, create=False)
        return
    folder, name = os.path.split(location)
    os.makedirs(folder, exist_ok=True)
    partial = os.path.join(folder, f"_{name}")
    with open(partial, "wb") as out:
        out.write(data)
    os.replace(partial, location)


def has_records(location: Root, ds: Dataset) -> bool:
    """Whether a landed file of ``ds`` gives raw at least one row: a line (split on ``\\n``, one
    trailing ``\\r`` dropped) that is not only whitespace, and for rates not the header. A file
    of zero records is allowed, and adds no row anywhere."""
    first = True
    with open_landed(location) as src:
        for raw in src:
            line = raw.decode("utf-8", errors="replace").removesuffix("\n").removesuffix("\r")
            if not line or line.isspace():
                continue
            if not (first and ds.name == FX_RATES_DATASET and line == FX_HEADER):
                return True
            first = False
    return False


def gives_rows(landing_root: Root, name: str) -> Callable[[str], bool]:
    """``has_records`` of dataset ``name``'s landed file at a relative path."""
    ds = dataset(name)
    return lambda relative: has_records(join(landing_root, relative), ds)


def landed_partitions(landing_root: Root, name: str) -> list[date]:
    """Dates whose partition folder exists (an empty folder is a landed day with no data; on S3,
    where a folder is only a prefix, a day with at least one object)."""
    ds = dataset(name)
    storage = storage_for(landing_root)
    if isinstance(storage, S3Storage):
        folders = storage.list_folder(join(landing_root, ds.name))[0]
        return sorted(d for d in {folder_day(f, ds) for f in folders} if d is not None)
    base = Path(landing_root) / ds.name
    if not base.is_dir():
        return []
    if leads_outside(base, landing_root):
        return []
    found = {
        folder_day(child.name, ds)
        for child in base.iterdir()
        if child.is_dir() and not leads_outside(child, landing_root)
    }
    return sorted(d for d in found if d is not None)


def list_landing_files(landing_root: Root, name: str, dates: Iterable[date]) -> list[LandingFile]:
    """The complete files of dataset ``name`` landed on ``dates``, sorted by (partition, path)."""
    ds = dataset(name)
    storage = storage_for(landing_root)
    if isinstance(storage, S3Storage):
        return _list_s3(storage, landing_root, ds, dates)
    root = Path(landing_root)
    files: list[LandingFile] = []
    for day in sorted(set(dates)):
        folder = root / ds.relative_folder(day)
        if not folder.is_dir() or leads_outside(folder, root) or leads_outside(folder.parent, root):
            continue
        for child in folder.iterdir():
            if is_complete(child.name, ds) and child.is_file() and not leads_outside(child, root):
                relative = f"{ds.relative_folder(day)}/{child.name}"
                files.append(LandingFile(day, relative, child.stat().st_size))
    return sorted(files, key=lambda f: (f.partition, f.relative_path))


def _list_s3(
    storage: S3Storage, landing_root: Root, ds: Dataset, dates: Iterable[date]
) -> list[LandingFile]:
    """``list_landing_files`` on S3: one listing per day's prefix (its objects, not deeper)."""
    files = []
    for day in sorted(set(dates)):
        folder = ds.relative_folder(day)
        for child in storage.list_folder(join(landing_root, folder))[1]:
            if is_complete(child.name, ds):
                files.append(LandingFile(day, f"{folder}/{child.name}", child.size))
    return sorted(files, key=lambda f: (f.partition, f.relative_path))
