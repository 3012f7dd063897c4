"""What every partition write records about itself, in the Delta commit and in Dagster."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

import dagster as dg

from backfill_assets.lake import CommitInfo, WriteResult
from backfill_assets.resources import code_version


def commit_info(
    context: dg.AssetExecutionContext, asset: str, days: list[date], input_versions: Mapping[str, int | None]
) -> CommitInfo:
    return CommitInfo(
        run_id=context.run_id,
        code_version=code_version(),
        input_versions={k: v for k, v in input_versions.items() if v is not None},
        extra={"asset": asset, "dagster_partitions": f"{days[0].isoformat()}..{days[-1].isoformat()}"},
    )


def write_metadata(write: WriteResult, day: date, input_versions: Mapping[str, int | None]) -> dict:
    return {
        "dagster/row_count": dg.MetadataValue.int(write.rows_by_partition.get(day, 0)),
        "table": dg.MetadataValue.text(write.table),
        "delta_version": dg.MetadataValue.int(write.version),
        "input_versions": dg.MetadataValue.json({k: v for k, v in input_versions.items()}),
    }
