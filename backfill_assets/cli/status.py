"""`backfill-assets status`: per partition and layer, what Dagster and the lake say; then the
same for each month of the monthly report that the days reach."""

from __future__ import annotations

from collections import Counter
from datetime import date, timedelta

import dagster as dg

from backfill_assets.catalog import ASSET_TABLES, LAYERS, MONTHLY_ASSETS, RAW_FX_RATES
from backfill_assets.dagster_private import AssetCheckExecutionRecordStatus
from backfill_assets.days import last_partition, months_between, rate_partition
from backfill_assets.defs.downstream.checks import LTV_CHECKS, MONTHLY_CHECKS
from backfill_assets.defs.event_days.checks import FACT_CHECKS, STAGING_CHECKS
from backfill_assets.defs.raw.checks import RAW_FX_RATES_CHECKS, RAW_ORDERS_CHECKS
from backfill_assets.lake import Lake
from backfill_assets.settings import Settings

CHECK_SPECS = (
    RAW_ORDERS_CHECKS
    + RAW_FX_RATES_CHECKS
    + STAGING_CHECKS
    + FACT_CHECKS
    + LTV_CHECKS
    + MONTHLY_CHECKS
)


def check_status(instance: dg.DagsterInstance) -> dict[tuple[str, str], list[str]]:
    """(asset, partition) -> the checks whose latest evaluation failed (none: all passed)."""
    keys = [spec.key for spec in CHECK_SPECS]
    status: dict[tuple[str, str], list[str]] = {}
    for info in instance.event_log_storage.get_asset_check_partition_info(keys):
        if info.partition_key is None:
            continue
        slot = status.setdefault(
            (info.check_key.asset_key.to_user_string(), info.partition_key), []
        )
        if info.latest_execution_status == AssetCheckExecutionRecordStatus.FAILED:
            slot.append(info.check_key.name)
    return status


def lake_rows(settings: Settings) -> dict[str, dict[date, int]]:
    """Rows per partition of each layer's table and the monthly report's, from the Delta logs
    (no Spark needed). raw_fx_rates' first partition counts the rate dates it also holds."""
    lake = Lake(settings.lake_dir, None, engine="delta-rs")
    rows = {}
    for key in LAYERS + MONTHLY_ASSETS:
        table = ASSET_TABLES[key][0]
        partitions = (
            lake.partitions(table.path, table.partition_column) if lake.exists(table.path) else []
        )
        counts: Counter[date] = Counter()
        for p in partitions:
            day = (
                rate_partition(p.partition, settings.start_date)
                if key == RAW_FX_RATES
                else p.partition
            )
            counts[day] += p.rows
        rows[key.to_user_string()] = dict(counts)
    return rows


def print_status(settings: Settings, start: date | None, end: date | None) -> int:
    end = end or last_partition()
    start = start or max(settings.start_date, end - timedelta(days=59))
    with dg.DagsterInstance.get() as instance:
        published = {
            k.to_user_string(): set(instance.get_materialized_partitions(k))
            for k in LAYERS + MONTHLY_ASSETS
        }
        checks = check_status(instance)
    rows = lake_rows(settings)

    def table(label: str, partitions: list[date], keys: tuple[dg.AssetKey, ...]) -> None:
        names = [k.to_user_string() for k in keys]
        print(f"{label:<12}" + "".join(f"{n:<26}" for n in names))
        for partition in partitions:
            key = partition.isoformat()
            cells = []
            for name in names:
                failed = checks.get((name, key))
                if key in published[name]:
                    verdict = "published" if not failed else "published,FAILED " + ",".join(failed)
                    cells.append(f"{verdict} {rows[name].get(partition, 0)}")
                else:
                    cells.append("HELD " + ",".join(failed) if failed else "-")
            print(f"{key:<12}" + "".join(f"{c:<26}" for c in cells))

    table("partition", [start + timedelta(days=i) for i in range((end - start).days + 1)], LAYERS)
    print()
    table("month", months_between(start, end), MONTHLY_ASSETS)
    return 0
