"""Validation of everything that could end up in a predicate: partition keys and table names.

Keys become ``datetime.date`` objects here, and only dates formatted by this
module ever reach a partition filter or a ``replaceWhere``: no string from a
user or a run tag is pasted into a predicate.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable

from backfill_assets.lake.errors import LakeError

_DATE_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}")
_TABLE_SEGMENT = re.compile(r"[A-Za-z0-9_]+")
_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_partition_dates(keys: Iterable[object]) -> list[dt.date]:
    """Dates from date objects or 'YYYY-MM-DD' strings, sorted and de-duplicated."""
    if isinstance(keys, (str, bytes, dt.date)):
        raise LakeError(
            f"partition keys must be a collection of dates, got the single value {keys!r}"
        )
    dates = set()
    for key in keys:
        dates.add(_parse_one(key))
    return sorted(dates)


def _parse_one(key: object) -> dt.date:
    # datetime is a date subclass; a timestamp is not a partition key.
    if isinstance(key, dt.datetime):
        raise LakeError(f"partition key {key!r} is a datetime, not a date")
    if isinstance(key, dt.date):
        return key
    if isinstance(key, str) and _DATE_TEXT.fullmatch(key):
        try:
            return dt.date.fromisoformat(key)
        except ValueError:
            pass
    raise LakeError(f"partition key {key!r} is not a date (expected YYYY-MM-DD)")


def date_text(day: dt.date) -> str:
    """The canonical text of a validated date, the only form used in filters."""
    if not isinstance(day, dt.date) or isinstance(day, dt.datetime):
        raise LakeError(f"{day!r} is not a validated date")
    return day.isoformat()


def check_table_name(table: str) -> str:
    """'raw/orders' style names: word segments joined by '/', nothing that escapes the root."""
    if not isinstance(table, str) or not table:
        raise LakeError(f"table name {table!r} is empty or not a string")
    segments = table.split("/")
    if not all(_TABLE_SEGMENT.fullmatch(segment) for segment in segments):
        raise LakeError(f"table name {table!r} must be word segments joined by '/'")
    return table


def check_column_name(column: str) -> str:
    """A plain identifier, so it can be quoted safely wherever a column is named."""
    if not isinstance(column, str) or not _COLUMN.fullmatch(column):
        raise LakeError(f"column name {column!r} is not a plain identifier")
    return column


def partition_dates(partitions: Iterable[object]) -> list[dt.date]:
    """``parse_partition_dates``, refusing an empty set."""
    dates = parse_partition_dates(partitions)
    if not dates:
        raise LakeError("the partition set is empty")
    return dates


def version_arg(version: object) -> int | None:
    """A table version given by a caller (None: the latest)."""
    return None if version is None else required_version(version)


def required_version(version: object) -> int:
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise LakeError(f"version must be a non-negative int, got {version!r}")
    return version
