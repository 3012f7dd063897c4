"""The Delta table layer: read a partition set pinned to a version, replace one atomically, or
stage one, audit it and publish it.

``Lake`` and ``StagedVersion`` load on first use, so that what only names files (``storage``,
which the landing zone's listing shares, and ``keys``) is imported without Spark."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from backfill_assets.lake.commit import CommitInfo, Compaction, PartitionInfo, WriteResult
from backfill_assets.lake.errors import LakeConflict, LakeError, LakeTableMissing, LakeUnsupported
from backfill_assets.lake.keys import parse_partition_dates

if TYPE_CHECKING:
    from backfill_assets.lake.manifests import StagedVersion
    from backfill_assets.lake.table import Lake

__all__ = [
    "CommitInfo",
    "Compaction",
    "Lake",
    "LakeConflict",
    "LakeError",
    "LakeTableMissing",
    "LakeUnsupported",
    "PartitionInfo",
    "StagedVersion",
    "WriteResult",
    "parse_partition_dates",
]


def __getattr__(name: str) -> Any:
    if name == "Lake":
        from backfill_assets.lake.table import Lake

        return Lake
    if name == "StagedVersion":
        from backfill_assets.lake.manifests import StagedVersion

        return StagedVersion
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
