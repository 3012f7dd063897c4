"""How long a table keeps what time travel and a rollback need: its retention properties.

Vacuum keeps the files a version within its retention names, and the files whose removal (a
tombstone in the log) is younger than the retention; any other file it judges by the file's
own age. A checkpoint keeps a tombstone only for the table's
``delta.deletedFileRetentionDuration`` (Delta's default: 7 days) and log clean-up keeps commit
files for ``delta.logRetentionDuration`` (30 days). So where the first is shorter than the
vacuum's retention, the next checkpoint drops the older tombstones and vacuum deletes those
files by their age: a rollback or a time travel within the retention then finds them gone.

Every table the lake creates carries both properties, at least the lake's retention
(``table_properties``, never below Delta's default), and before every vacuum and checkpoint a
table whose properties fall short (created before, or by another writer) is brought up to it
in a metadata commit (``shortfall``; ``Lake.vacuum``). A value this module cannot read is
refused with a LakeError, not overwritten.
"""

from __future__ import annotations

import math
import re

from backfill_assets.lake.errors import LakeError
from backfill_assets.storage.stores import storage_for

DELETED_FILES = "delta.deletedFileRetentionDuration"
LOG = "delta.logRetentionDuration"
# What Delta uses when a table does not set them, in hours.
DEFAULT_HOURS = {DELETED_FILES: 7 * 24.0, LOG: 30 * 24.0}
_UNIT_HOURS = {
    "week": 168.0,
    "day": 24.0,
    "hour": 1.0,
    "minute": 1 / 60,
    "second": 1 / 3600,
    "millisecond": 1 / 3_600_000,
    "microsecond": 1 / 3_600_000_000,
    "nanosecond": 1 / 3_600_000_000_000,
}
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+?)s?(?=\s|$)")


def interval_text(hours: float) -> str:
    """A Delta interval (what both engines parse) of at least ``hours``: whole days when it
    is, else whole hours rounded up."""
    if hours % 24 == 0:
        return f"interval {int(hours // 24)} days"
    return f"interval {math.ceil(hours)} hours"


def interval_hours(text: str) -> float | None:
    """The hours a Delta interval (``interval 14 days``, ``interval 1 week 3 days``) spans, or
    None when it is not one this module reads."""
    body = text.strip().lower().removeprefix("interval").strip()
    if not body:
        return None
    hours, end = 0.0, 0
    for match in _PART.finditer(body):
        if body[end : match.start()].strip() or match.group(2) not in _UNIT_HOURS:
            return None
        hours += float(match.group(1)) * _UNIT_HOURS[match.group(2)]
        end = match.end()
    return hours if end and not body[end:].strip() else None


def table_properties(retention_hours: float) -> dict[str, str]:
    """The properties a new table is created with: each at least the retention and Delta's
    default."""
    return {key: interval_text(max(retention_hours, d)) for key, d in DEFAULT_HOURS.items()}


def shortfall(table: str, configuration: dict[str, str], retention_hours: float) -> dict[str, str]:
    """The properties to set for the table (whose properties are ``configuration``) to keep
    files and log for ``retention_hours``: {} when it does already. LakeError for a value
    this module cannot read."""
    needed = {}
    for key, default in DEFAULT_HOURS.items():
        text = configuration.get(key)
        hours = default if text is None else interval_hours(text)
        if hours is None:
            raise LakeError(
                f"{table}: cannot read its table property {key}={text!r} as an interval; "
                f"set it to at least {interval_text(retention_hours)!r} by hand"
            )
        if hours < retention_hours:
            needed[key] = interval_text(max(retention_hours, default))
    return needed


def vacuum_candidates(table_dir: str) -> dict[str, int]:
    """The table's files outside its log and hidden folders, which VACUUM judges (relative
    path: modification time in ms)."""
    return {
        path: modified
        for path, modified in storage_for(table_dir).list_files_modified(table_dir).items()
        if not any(part.startswith(("_", ".")) for part in path.split("/"))
    }
