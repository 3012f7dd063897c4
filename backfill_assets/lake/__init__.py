"""The Delta table layer: read a partition set pinned to a version, replace one atomically."""

from backfill_assets.lake.commit import CommitInfo, PartitionInfo, WriteResult
from backfill_assets.lake.keys import LakeError, LakeTableMissing, parse_partition_dates
from backfill_assets.lake.table import Lake

__all__ = [
    "CommitInfo",
    "Lake",
    "LakeError",
    "LakeTableMissing",
    "PartitionInfo",
    "WriteResult",
    "parse_partition_dates",
]
