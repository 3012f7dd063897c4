"""Staging layer: parsed, validated, deduplicated (latest wins) orders in USD, per event day.

Event day D reads the raw arrivals D .. D + max lateness and the rates of D - 7 .. D,
computes the whole range in one Spark job, and audits each day before publishing it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import dagster as dg
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from backfill_assets.defs.partitions import arrivals_of_event_day, rates_of_event_day
from backfill_assets.defs.publishing import CheckOutcome
from backfill_assets.defs.raw.checks import RAW_FX_RATES, RAW_ORDERS, VALID_TABLE
from backfill_assets.defs.staging.checks import (
    STG_ORDERS,
    missing_window_files,
    staging_outcomes,
    staging_stats,
    valid_order_ids,
)
from backfill_assets.lake import Lake, LakeTableMissing
from backfill_assets.landing import list_landing_files
from backfill_assets.settings import Settings
from backfill_assets.transforms import schemas
from backfill_assets.transforms.fx import convert_to_usd, rates_on
from backfill_assets.transforms.orders import latest_wins


def staging_spec(settings: Settings) -> dg.AssetSpec:
    return dg.AssetSpec(
        STG_ORDERS,
        skippable=True,
        group_name="staging",
        kinds={"spark", "delta"},
        description="One row per order and event day (Delta table staging/orders): valid "
        "records of arrivals D .. D + max lateness, deduplicated latest-wins, converted to "
        "USD at the rate of the event's own day. A day with an order lacking a rate is held.",
        deps=[
            dg.AssetDep(RAW_ORDERS, partition_mapping=arrivals_of_event_day(settings)),
            dg.AssetDep(RAW_FX_RATES, partition_mapping=rates_of_event_day(settings)),
        ],
        metadata={"table": "staging/orders"},
    )


@dataclass
class StagingBuild:
    """A range of event days computed but not yet published."""

    staging: DataFrame
    outcomes: list[CheckOutcome]
    input_versions: dict[str, int | None]
    rows: dict[date, int]  # rows computed per day, to verify what the lake commits

    def release(self) -> None:
        self.staging.unpersist()


def _read_or_empty(spark, lake: Lake, table: str, column: str, days: list[date], schema):
    try:
        return lake.read_partitions(table, column, days)
    except LakeTableMissing:
        return spark.createDataFrame([], schema), None


def unsplit_arrivals(lake: Lake, arrivals: list[date], versions: dict[str, int | None]) -> set[date]:
    """Arrival dates whose raw rows are not exactly its parsed valid rows plus its quarantine
    rows, per the lake's row counts at the versions staging read: a raw rebuild that stopped
    before all three commits, or a lake written before the valid table existed. Staging must
    not build from such a date."""
    counts = {
        table: {} if version is None else lake.row_counts(table, "arrival_date", version)
        for table, version in versions.items()
    }
    raw, valid, quarantine = (counts[t] for t in ("raw/orders", VALID_TABLE, "quarantine/orders"))
    return {a for a in arrivals if raw.get(a, 0) != valid.get(a, 0) + quarantine.get(a, 0)}


def build_staging(spark, lake: Lake, landing, days: list[date], lateness: int) -> StagingBuild:
    first, last = days[0], days[-1]
    arrivals = [first + timedelta(days=i) for i in range((last - first).days + lateness + 1)]
    rate_days = [first - timedelta(days=7 - i) for i in range((last - first).days + 8)]
    raw, raw_version = _read_or_empty(spark, lake, "raw/orders", "arrival_date", arrivals, schemas.RAW_ORDERS)
    parsed, parsed_version = _read_or_empty(spark, lake, VALID_TABLE, "arrival_date", arrivals, schemas.VALID_ORDERS)
    split_at = {"raw/orders": raw_version, VALID_TABLE: parsed_version,
                "quarantine/orders": lake.version("quarantine/orders")}
    rates, rates_version = _read_or_empty(spark, lake, "raw/fx_rates", "rate_date", rate_days, schemas.RAW_FX_RATES)

    # The raw step parsed and validated every record; staging reads its valid records (not
    # cached: the one other reader, valid_order_ids, reads two columns of them again).
    valid = parsed.filter(F.col("event_date").isin(days))
    staging = convert_to_usd(latest_wins(valid), rates_on(rates, days))
    staging = staging.persist(StorageLevel.MEMORY_AND_DISK)

    read_files = {(r["arrival_date"], r["source_file"]) for r in raw.select("arrival_date", "source_file").distinct().collect()}
    landed = {(f.partition, f.relative_path) for f in list_landing_files(landing, "orders", arrivals)}
    unsplit = unsplit_arrivals(lake, arrivals, split_at)
    incomplete = {
        d: missing_window_files(d, lateness, landed, read_files)
        + [f"{a}: raw rows != valid + quarantine rows" for a in sorted(unsplit)
           if d <= a <= d + timedelta(days=lateness)]
        for d in days
    }
    stats = staging_stats(staging)
    outcomes = staging_outcomes(
        days, stats, valid_order_ids(valid), incomplete, schemas.staging_schema_errors(staging)
    )
    inputs = {"raw/orders": raw_version, VALID_TABLE: parsed_version, "raw/fx_rates": rates_version}
    return StagingBuild(staging, outcomes, inputs, {d: s["rows"] for d, s in stats.items()})
