"""A data file's Delta statistics, from its Parquet footer: what lets a reader (Spark, delta-rs,
DuckDB, Trino) skip the file for a predicate on a column other than the partition column.

Delta's add action carries ``stats``, a JSON document: ``numRecords``, and per column
``minValues``, ``maxValues`` and ``nullCount``, for the first ``delta.dataSkippingNumIndexedCols``
columns of the file (32 unless the table says otherwise; a reader ignores statistics of a column
past its own limit, and treats a column without them as "may match"). So every value written
here must be a true bound, or a reader skips a file that holds matching rows; where the footer
cannot give one, the column's bound is left out:

- integers and dates: the footer's exact min and max;
- strings: the min cut to ``STRING_PREFIX`` characters (a prefix is never greater than the
  string); the max only when no longer than that (a cut max would be smaller than the value);
- timestamps adjusted to UTC: at millisecond precision, as Delta's writers record them, the min
  rounded down and the max rounded up (no max in the last millisecond of year 9999);
- decimals, floating point (NaN is outside the footer's bounds but inside Spark's ordering),
  booleans, binary, timestamps without a time zone, and nested columns: ``nullCount`` only
  (nested ones not even that).

A column whose footer lacks statistics in any row group that holds a value gets no bounds.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow.parquet as pq

DEFAULT_INDEXED_COLUMNS = 32  # Delta's default delta.dataSkippingNumIndexedCols
STRING_PREFIX = 32  # characters, as Delta's writers cut string bounds
MS = dt.timedelta(milliseconds=1)


def file_stats(metadata: pq.FileMetaData, indexed_columns: int = DEFAULT_INDEXED_COLUMNS) -> str:
    """The ``stats`` JSON of the file whose footer is ``metadata`` (see the module docstring)."""
    stats: dict[str, Any] = {"numRecords": metadata.num_rows}
    mins: dict[str, Any] = {}
    maxes: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    schema = metadata.schema
    limit = metadata.num_columns if indexed_columns < 0 else indexed_columns
    for i in range(min(metadata.num_columns, limit)):
        column = schema.column(i)
        name = column.path
        if "." in name:  # a nested column's leaf: no statistics kept
            continue
        bounds = _bounds(metadata, i)
        if bounds is None:
            continue
        null_count, low, high = bounds
        nulls[name] = null_count
        if low is None:
            continue
        encoded = _encode(column, low, high)
        if encoded is None:
            continue
        low_text, high_text = encoded
        if low_text is not None:
            mins[name] = low_text
        if high_text is not None:
            maxes[name] = high_text
    stats.update(minValues=mins, maxValues=maxes, nullCount=nulls)
    return json.dumps(stats, separators=(",", ":"))


def _bounds(metadata: pq.FileMetaData, i: int) -> tuple[int, Any, Any] | None:
    """(null count, min, max) of column ``i`` over every row group (min/max None when it holds
    only nulls), or None when a row group's statistics are missing."""
    null_count, low, high = 0, None, None
    for g in range(metadata.num_row_groups):
        chunk = metadata.row_group(g).column(i)
        s = chunk.statistics
        if s is None or not s.has_null_count:
            return None
        null_count += s.null_count
        if chunk.num_values == s.null_count:  # only nulls here: no bound to take
            continue
        if not s.has_min_max:
            return None
        low = s.min if low is None else min(low, s.min)
        high = s.max if high is None else max(high, s.max)
    return null_count, low, high


def _encode(column: pq.ColumnSchema, low: Any, high: Any) -> tuple[Any, Any] | None:
    """The JSON values of a column's bounds, or None where no safe bound can be written."""
    logical = column.logical_type.type
    physical = column.physical_type
    if logical == "STRING":
        return low[:STRING_PREFIX], high if len(high) <= STRING_PREFIX else None
    if logical == "DATE":
        return low.isoformat(), high.isoformat()
    if logical == "TIMESTAMP":
        if not json.loads(column.logical_type.to_json()).get("isAdjustedToUTC"):
            return None
        ceiling = _ceil_ms(high)
        return _timestamp(_floor_ms(low)), None if ceiling is None else _timestamp(ceiling)
    if logical in ("NONE", "INT") and physical in ("INT32", "INT64"):
        return int(low), int(high)
    return None


def _floor_ms(value: dt.datetime) -> dt.datetime:
    return value.replace(microsecond=value.microsecond - value.microsecond % 1000)


def _ceil_ms(value: dt.datetime) -> dt.datetime | None:
    """``value`` rounded up to the millisecond; None past the last one there is (in the last
    millisecond of year 9999, which holds valid timestamps)."""
    floor = _floor_ms(value)
    if floor == value:
        return floor
    try:
        return floor + MS
    except OverflowError:
        return None


def _timestamp(value: dt.datetime) -> str:
    utc = value.astimezone(dt.UTC) if value.tzinfo else value
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def indexed_columns(properties: dict[str, str]) -> int:
    """How many leading columns get statistics, as the table's properties say (-1: all)."""
    text = properties.get("delta.dataSkippingNumIndexedCols")
    try:
        return DEFAULT_INDEXED_COLUMNS if text is None else int(text)
    except ValueError:
        return DEFAULT_INDEXED_COLUMNS
