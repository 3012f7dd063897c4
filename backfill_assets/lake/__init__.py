"""The Delta table layer: read a partition set pinned to a version, replace one atomically, or
stage one, audit it and publish it."""

from backfill_assets.lake.commit import CommitInfo, Compaction, PartitionInfo, WriteResult
from backfill_assets.lake.keys import (
    LakeConflict,
    LakeError,
    LakeTableMissing,
    parse_partition_dates,
)
from backfill_assets.lake.staged import StagedVersion
from backfill_assets.lake.table import Lake

__all__ = [
    "CommitInfo",
    "Compaction",
    "Lake",
    "LakeConflict",
    "LakeError",
    "LakeTableMissing",
    "PartitionInfo",
    "StagedVersion",
    "WriteResult",
    "parse_partition_dates",
]
