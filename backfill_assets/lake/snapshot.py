"""A table version as deltalake reads it, for both engines: its data files (path, partition date,
size, modification time, ``numRecords``), schema, partition columns and properties.

delta-rs's engine works on these tables. delta-spark's reads, its rows per partition and the
files its metadata-only commits swap come from here too (``plain``), with no Spark job, where
Delta's JVM would reconstruct the version's state in Spark jobs. ``plain`` gives nothing for a
version that a scan of its listed Parquet files would read wrongly (deletion vectors, column
mapping, a reader feature not known to be harmless: ``spark_files.unreadable_features``), that
is partitioned other than by one date column, or that deltalake cannot open: delta-spark asks
Delta's JVM for those.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError, TableNotFoundError

from backfill_assets.lake.errors import LakeError, LakeUnsupported
from backfill_assets.lake.keys import date_text
from backfill_assets.lake.log import relative_path, torn_commit
from backfill_assets.lake.spark_files import unreadable_features
from backfill_assets.storage.stores import storage_for

if TYPE_CHECKING:
    import pyarrow.parquet as pq
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class DataFile:
    """A data file a version names."""

    path: str  # relative to the table directory, decoded: where the file is
    day: dt.date | None  # its partition value
    size: int
    modification_time: int  # ms
    records: int | None  # numRecords from its statistics, None when they lack it
    stats: str | None = None  # its statistics as the log spells them (``files(stats=True)``)
    log_path: str = ""  # its path as the log spells it (URL-encoded), where it came from one

    def partition_values(self, column: str) -> dict[str, str | None]:
        """Its ``partitionValues`` as the log spells them."""
        return {column: None if self.day is None else date_text(self.day)}


@dataclass(frozen=True)
class Snapshot:
    """A version's files and shape (``plain``)."""

    version: int
    files: list[DataFile]
    schema_json: str  # Delta's schemaString: Spark's StructType JSON
    partition_columns: list[str]
    configuration: dict[str, str]

    @property
    def schema(self) -> StructType:
        from pyspark.sql.types import StructType

        return StructType.fromJson(json.loads(self.schema_json))

    def in_days(self, days: Iterable[dt.date]) -> list[DataFile]:
        wanted = set(days)
        return [f for f in self.files if f.day in wanted]


def load(table_dir: str, version: int | None = None) -> DeltaTable | None:
    """deltalake's table at ``version`` (the latest when None); None when there is no table;
    LakeError when deltalake cannot load that version."""
    storage = storage_for(table_dir)
    if not storage.has_files(os.path.join(table_dir, "_delta_log")):
        return None
    if storage.is_local:
        torn_commit(table_dir)  # delta-rs reads an empty commit file as a commit of nothing
    try:
        return DeltaTable(table_dir, version=version, storage_options=storage.delta_options())
    except TableNotFoundError:
        return None
    except DeltaError as exc:
        if storage.is_local:
            torn_commit(table_dir, whole=True)
        at = "latest version" if version is None else f"version {version}"
        raise LakeError(f"cannot load {at} of {table_dir}: {exc}") from exc


def transaction_version(table_dir: str, app_id: str) -> int | None:
    """What Delta's transaction id (``txn``) of ``app_id`` records at the latest version (None:
    none, or no table), which a checkpoint keeps when log cleanup deletes the commit; LakeError
    when deltalake cannot load the table."""
    table = load(table_dir)
    return None if table is None else table.transaction_version(app_id)


def files(
    table_dir: str, table: DeltaTable, column: str | None, stats: bool = False
) -> list[DataFile]:
    """The data files of ``table``'s version (the table at ``table_dir``), with their ``column``
    values as dates; with ``stats``, each file's statistics too (``_stats``)."""
    import pyarrow as pa

    actions = pa.table(table.get_add_actions(flatten=False))
    rows = actions.num_rows

    def values(name: str) -> list:
        return actions.column(name).to_pylist() if name in actions.column_names else [None] * rows

    days = (
        [None if p is None else p.get(column) for p in values("partition")]
        if column
        else [None] * rows
    )
    found = [
        DataFile(relative_path(table_dir, path), _as_date(day), size, mtime, records, None, path)
        for path, day, size, mtime, records in zip(
            values("path"),
            days,
            values("size_bytes"),
            values("modification_time"),
            values("num_records"),
            strict=True,
        )
    ]
    if not stats:
        return found
    return [
        dataclasses.replace(f, stats=_stats(f.records, nulls, low, high))
        for f, nulls, low, high in zip(
            found, values("null_count"), values("min"), values("max"), strict=True
        )
    ]


def _stats(records: int | None, nulls: Any, low: Any, high: Any) -> str | None:
    """A file's ``stats`` JSON from the statistics deltalake parsed out of the log. Each bound
    is written back in Delta's encoding, or left out (``_bound``): a missing bound only means
    "may match" to a reader, a wrong one would skip a file that holds matching rows."""
    if records is None:
        return None
    document: dict[str, Any] = {"numRecords": records}
    for key, found, encode in (
        ("minValues", low, _bound),
        ("maxValues", high, _bound),
        ("nullCount", nulls, lambda v: v if isinstance(v, int) else None),
    ):
        if isinstance(found, dict):
            document[key] = _encoded(found, encode)
    return json.dumps(document, separators=(",", ":"))


def _encoded(values: dict[str, Any], encode: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in values.items():
        kept = _encoded(value, encode) if isinstance(value, dict) else encode(value)
        if kept is not None and kept != {}:
            out[name] = kept
    return out


def _bound(value: Any) -> Any:
    """A min or max as Delta's log spells it; None where it cannot be written exactly."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, decimal.Decimal):
        as_float = float(value)
        return as_float if decimal.Decimal(repr(as_float)) == value else None
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC)
        if value.microsecond % 1000:
            return None  # the log keeps milliseconds: this did not come from it
        zone = "Z" if value.tzinfo is not None else ""
        return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}{zone}"
    if isinstance(value, dt.date):
        return value.isoformat()
    return None


def unreadable(table: DeltaTable) -> list[str]:
    """What of ``table``'s protocol a plain Parquet scan of its files would get wrong."""
    protocol = table.protocol()
    return unreadable_features(
        protocol.min_reader_version,
        protocol.reader_features or [],
        table.metadata().configuration or {},
    )


def file_paths(table_dir: str, version: int) -> set[str]:
    """The data files ``version`` names, relative to the table (none: no table); LakeError when
    deltalake cannot load that version."""
    table = load(table_dir, version)
    if table is None:
        return set()
    return {f.path for f in files(table_dir, table, None)}


def shape(table_dir: str, version: int) -> tuple[str, dict[str, str]] | None:
    """(schema JSON, table properties) of ``version``: the schema with every field's
    nullability and metadata as Delta's log holds them; None when deltalake cannot load it."""
    try:
        table = load(table_dir, version)
    except LakeError:
        return None
    if table is None:
        return None
    return table.schema().to_json(), dict(table.metadata().configuration or {})


def check_readable(table: DeltaTable, table_name: str) -> None:
    """Refuse a table whose data a plain Parquet scan would read wrongly (``LakeUnsupported``)."""
    unknown = unreadable(table)
    if unknown:
        raise LakeUnsupported(table_name, "delta-rs", unknown)


def plain(table_dir: str, version: int, stats: bool = False) -> Snapshot | None:
    """``version`` when a scan of its listed Parquet files reads it as Delta's reader would,
    and it is partitioned by at most one column, a date; else None (see the module docstring).
    With ``stats``, its files' statistics too."""
    try:
        table = load(table_dir, version)
    except LakeError:
        return None
    if table is None or unreadable(table):
        return None
    columns = list(table.metadata().partition_columns)
    schema_json = table.schema().to_json()
    if len(columns) > 1:
        return None
    if columns:
        field = next(f for f in json.loads(schema_json)["fields"] if f["name"] == columns[0])
        if field["type"] != "date":
            return None
    return Snapshot(
        version,
        files(table_dir, table, columns[0] if columns else None, stats),
        schema_json,
        columns,
        dict(table.metadata().configuration or {}),
    )


def row_counts(table_dir: str, column: str, found: list[DataFile], name: str) -> dict[dt.date, int]:
    """Rows per ``column`` date of ``found``: their ``numRecords``, else the file's footer."""
    counts: dict[dt.date, int] = {}
    for file in found:
        records = file.records
        if records is None:
            records = footer(table_dir, file.path).num_rows
        if file.day is None:
            raise LakeError(f"table {name}: file {file.path} has no {column} value")
        counts[file.day] = counts.get(file.day, 0) + records
    return counts


def footer(table_dir: str, path: str) -> pq.FileMetaData:
    """The Parquet footer of the data file at ``path`` (relative to the table)."""
    import pyarrow.parquet as pq

    filesystem, scheme = storage_for(table_dir).arrow_filesystem()
    full = os.path.join(table_dir, path)
    if filesystem is None:
        return pq.read_metadata(full)
    with filesystem.open_input_file(full.removeprefix(scheme)) as source:
        return pq.read_metadata(source)


def _as_date(value: object) -> dt.date | None:
    if value is None or isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(str(value))
