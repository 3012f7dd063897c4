"""What every partition write records about itself, in the Delta commit and in Dagster."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

import dagster as dg
from pyspark.sql.types import StructType

from backfill_assets.lake import CommitInfo, WriteResult
from backfill_assets.resources import code_version
from backfill_assets.transforms.columns import column_descriptions


def commit_info(
    context: dg.AssetExecutionContext,
    asset: dg.AssetKey,
    days: list[date],
    input_versions: Mapping[str, int | None],
) -> CommitInfo:
    return CommitInfo(
        run_id=context.run_id,
        code_version=code_version(),
        input_versions={k: v for k, v in input_versions.items() if v is not None},
        extra={
            "asset": asset.to_user_string(),
            "dagster_partitions": f"{days[0].isoformat()}..{days[-1].isoformat()}",
        },
    )


def column_schema(struct: StructType) -> dg.TableSchema:
    """A Spark StructType as the table schema Dagster shows on the asset, each column described."""
    described = column_descriptions(struct)
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                f.name, f.dataType.simpleString().upper(), description=described.get(f.name)
            )
            for f in struct.fields
        ]
    )


def write_metadata(
    write: WriteResult,
    day: date,
    input_versions: Mapping[str, int | None],
    schema: StructType | None = None,
) -> dict:
    extra = {"dagster/column_schema": column_schema(schema)} if schema is not None else {}
    return {
        **extra,
        "dagster/row_count": dg.MetadataValue.int(write.rows_by_partition.get(day, 0)),
        "table": dg.MetadataValue.text(write.table),
        "delta_version": dg.MetadataValue.int(write.version),
        "input_versions": dg.MetadataValue.json({k: v for k, v in input_versions.items()}),
    }
