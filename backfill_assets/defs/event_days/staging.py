"""Staging: parsed, validated, deduplicated (latest wins) orders in USD, per event day.

Event day D reads the raw arrivals D .. D + max lateness and the rates of D - rate window ..
D, computes the whole range in one Spark job, and audits each day before it is published.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from backfill_assets.catalog import (
    FX_RATES_DATASET,
    ORDERS_DATASET,
    QUARANTINE_TABLE,
    RAW_FX_RATES_TABLE,
    RAW_ORDERS_TABLE,
    STAGING_TABLE,
    STG_ORDERS,
    VALID_ORDERS_TABLE,
    Table,
)
from backfill_assets.days import days_between
from backfill_assets.defs.event_days.checks import missing_window_files, staging_outcomes
from backfill_assets.defs.event_days.quality import quality_outcomes
from backfill_assets.defs.publishing import CheckOutcome, held_days
from backfill_assets.lake import Lake, LakeTableMissing
from backfill_assets.landing.layout import DATASETS, has_records, list_landing_files
from backfill_assets.settings import QualitySettings, Settings
from backfill_assets.transforms import schemas
from backfill_assets.transforms.audit import staging_stats, valid_order_ids
from backfill_assets.transforms.drift import staging_figures
from backfill_assets.transforms.fx import convert_to_usd, rates_on
from backfill_assets.transforms.orders import latest_wins
from backfill_assets.transforms.skew import staging_keys


@dataclass
class StagingBuild:
    """A range of event days computed, and what its checks compare the staged rows with."""

    staging: DataFrame
    input_versions: dict[str, int | None]
    valid_ids: dict[date, int]  # distinct order ids among the valid records, per event day
    incomplete: dict[date, list[str]]  # per day, the arrivals of its window raw does not hold
    schema_errors: list[str]
    history: DataFrame | None = None  # published staging of the warning checks' trailing days
    quality: QualitySettings = field(default_factory=QualitySettings)
    hot_keys: list[str] = field(default_factory=list)  # the range's hot keys (auto mode finds them)
    spread: int = 1  # tasks per day of the write: > 1 is the skew mitigation (transforms.skew)

    def audit(self, days: list[date], staged: DataFrame) -> list[CheckOutcome]:
        """The staging checks, on ``staged``: the rows as staged, not as computed; then the
        warning checks, from the same aggregations (which read the trailing days too)."""
        stats = staging_stats(staged, self.history)
        contract = staging_outcomes(days, stats, self.valid_ids, self.incomplete, self.schema_errors)
        return contract + quality_outcomes(STG_ORDERS, days, staging_figures(stats),
                                           set(held_days(contract)), self.quality)


def _read_or_empty(spark, lake: Lake, table: Table, days: list[date], schema):
    try:
        return lake.read_partitions(table.path, table.partition_column, days)
    except LakeTableMissing:
        return spark.createDataFrame([], schema), None


def unsplit_arrivals(lake: Lake, arrivals: list[date], versions: dict[Table, int | None]) -> set[date]:
    """Arrival dates whose raw rows are not exactly its parsed valid rows plus its quarantine
    rows, per the lake's row counts at the versions staging read: a raw rebuild that stopped
    before all three commits, or a lake written before the valid table existed. Staging must
    not build from such a date."""
    counts = {
        table: {} if version is None else lake.row_counts(table.path, table.partition_column, version)
        for table, version in versions.items()
    }
    raw, valid, quarantine = (
        counts[t] for t in (RAW_ORDERS_TABLE, VALID_ORDERS_TABLE, QUARANTINE_TABLE)
    )
    return {a for a in arrivals if raw.get(a, 0) != valid.get(a, 0) + quarantine.get(a, 0)}


def _landed_and_read(settings: Settings, dataset: str, dates: list[date], raw: DataFrame, table: Table):
    """(the landed files of ``dataset`` on ``dates`` that give raw rows, the files raw holds),
    each as (date, path). A file of zero records is in raw as no row, so it is never missing."""
    column = table.partition_column
    read = {(r[column], r["source_file"]) for r in raw.select(column, "source_file").distinct().collect()}
    ds = DATASETS[dataset]
    landed = {
        (f.partition, f.relative_path)
        for f in list_landing_files(settings.landing_dir, dataset, dates)
        if (f.partition, f.relative_path) in read
        or has_records(settings.landing_dir / f.relative_path, ds)
    }
    return landed, read


def build_staging(spark, lake: Lake, settings: Settings, days: list[date]) -> StagingBuild:
    first, last = days[0], days[-1]
    lateness = settings.max_lateness_days
    arrivals = days_between(first, last + timedelta(days=lateness))
    # Rate dates before the first partition are no raw partition: nothing reads or awaits them.
    rate_days = days_between(max(first - timedelta(days=settings.rate_max_age_days), settings.start_date), last)
    raw, raw_version = _read_or_empty(spark, lake, RAW_ORDERS_TABLE, arrivals, schemas.RAW_ORDERS)
    parsed, parsed_version = _read_or_empty(
        spark, lake, VALID_ORDERS_TABLE, arrivals, schemas.VALID_ORDERS
    )
    split_at = {RAW_ORDERS_TABLE: raw_version, VALID_ORDERS_TABLE: parsed_version,
                QUARANTINE_TABLE: lake.version(QUARANTINE_TABLE.path)}
    rates, rates_version = _read_or_empty(
        spark, lake, RAW_FX_RATES_TABLE, rate_days, schemas.RAW_FX_RATES
    )

    # The raw step parsed and validated every record; staging reads its valid records (not
    # cached: the skew plan's aggregations read two or three columns of them again).
    valid = parsed.filter(F.col("event_date").isin(days))
    staging = convert_to_usd(latest_wins(valid), rates_on(rates, days, settings.rate_max_age_days))

    order_files = _landed_and_read(settings, ORDERS_DATASET, arrivals, raw, RAW_ORDERS_TABLE)
    rate_files = _landed_and_read(settings, FX_RATES_DATASET, rate_days, rates, RAW_FX_RATES_TABLE)
    unsplit = unsplit_arrivals(lake, arrivals, split_at)
    max_age = timedelta(days=settings.rate_max_age_days)
    incomplete = {
        d: missing_window_files(d, d + timedelta(days=lateness), *order_files)
        + missing_window_files(d - max_age, d, *rate_files)
        + [f"{a}: raw rows != valid + quarantine rows" for a in sorted(unsplit)
           if d <= a <= d + timedelta(days=lateness)]
        for d in days
    }
    inputs = {RAW_ORDERS_TABLE.path: raw_version, VALID_ORDERS_TABLE.path: parsed_version,
              RAW_FX_RATES_TABLE.path: rates_version}
    valid_ids, hot, spread = skew_plan(valid, settings, days)
    return StagingBuild(
        staging, inputs, valid_ids, incomplete, schemas.staging_schema_errors(staging),
        trailing_published(spark, lake, settings, days, STAGING_TABLE, schemas.STAGING_ORDERS),
        settings.quality, hot, spread,
    )


def skew_plan(valid: DataFrame, settings: Settings, days: list[date]) -> tuple[dict[date, int], list[str], int]:
    """(distinct order ids per day, the hot keys, tasks per day of the write). In ``auto`` mode
    the aggregation that counts the ids also finds the hot event days and customers, and a hot
    key salts the write; ``on`` salts it always, ``off`` never."""
    skew = settings.skew
    if skew.mitigation != "auto":
        return valid_order_ids(valid), [], skew.salt_buckets if skew.mitigation == "on" else 1
    keys = staging_keys(valid, len(days))
    hot = keys.hot(skew.hot_key_share)
    return keys.valid_ids, hot, skew.salt_buckets if hot else 1


def trailing_published(spark, lake: Lake, settings: Settings, days: list[date], table: Table,
                       schema) -> DataFrame | None:
    """``table``'s published rows of the warning checks' trailing days of ``days`` that are not
    being built (None when there are none): read, not collected, so the checks' one
    aggregation reads them with the days built."""
    first = max(days[0] - timedelta(days=settings.quality.trailing_days), settings.start_date)
    building = set(days)
    history = [d for d in days_between(first, days[-1]) if d not in building]
    if not history or not lake.exists(table.path):
        return None
    return _read_or_empty(spark, lake, table, history, schema)[0]
