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
from backfill_assets.transforms.orders import latest_wins, parsed_view, valid_orders
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


def with_parsed_columns(raw: DataFrame) -> DataFrame:
    """raw/orders rows with raw's ``_`` columns; a table written before raw kept them gets them
    as NULL, so its arrivals read as unparsed (and their event days are held) instead of
    failing the read."""
    missing = [f for f in schemas.RAW_ORDERS_PARSED if f.name not in raw.columns]
    return raw.select("*", *[F.lit(None).cast(f.dataType).alias(f.name) for f in missing])


@dataclass(frozen=True)
class RawArrivals:
    """What staging's window check needs to know of the raw order rows it read."""

    files: set[tuple[date, str]]  # (arrival date, source file) of every row
    rejected: dict[date, int]  # rows whose stored verdict is a quarantine reason
    unparsed: set[date]  # arrivals with rows stored without their verdict and typed fields


def raw_arrivals(raw: DataFrame) -> RawArrivals:
    """One aggregation over the raw rows staging read, by (arrival date, source file)."""
    rows = raw.groupBy("arrival_date", "source_file").agg(
        F.count(F.col("_reason")).alias("rejected"),
        F.count(F.when(F.col("_line_hash").isNull(), 1)).alias("unparsed"),
    ).collect()
    rejected: dict[date, int] = {}
    for r in rows:
        rejected[r["arrival_date"]] = rejected.get(r["arrival_date"], 0) + r["rejected"]
    return RawArrivals({(r["arrival_date"], r["source_file"]) for r in rows}, rejected,
                       {r["arrival_date"] for r in rows if r["unparsed"]})


def unsplit_arrivals(arrivals: list[date], raw: RawArrivals, quarantine: dict[date, int]) -> dict[date, str]:
    """Arrival dates staging must not build from, and why: raw's rejected records are not its
    quarantine rows (``quarantine``: rows per arrival, from the lake's statistics), which a raw
    rebuild that committed the quarantine and stopped before raw leaves; or raw rows stored
    before raw kept each record's verdict and typed fields."""
    reasons = {}
    for a in arrivals:
        if a in raw.unparsed:
            reasons[a] = f"{a}: raw rows without their parsed `_` columns (rebuild raw_orders)"
        elif raw.rejected.get(a, 0) != quarantine.get(a, 0):
            reasons[a] = f"{a}: raw's rejected records != quarantine rows"
    return reasons


def files_read(raw: DataFrame, column: str) -> set[tuple[date, str]]:
    """(date, source file) of every raw row."""
    return {(r[column], r["source_file"]) for r in raw.select(column, "source_file").distinct().collect()}


def _landed_and_read(settings: Settings, dataset: str, dates: list[date], read: set[tuple[date, str]]):
    """(the landed files of ``dataset`` on ``dates`` that give raw rows, the files raw holds
    (``read``)), each as (date, path). A file of zero records is in raw as no row, so it is
    never missing."""
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
    raw, raw_version = _read_or_empty(spark, lake, RAW_ORDERS_TABLE, arrivals, schemas.RAW_ORDERS_STORED)
    raw = with_parsed_columns(raw)
    quarantine_version = lake.version(QUARANTINE_TABLE.path)
    rates, rates_version = _read_or_empty(
        spark, lake, RAW_FX_RATES_TABLE, rate_days, schemas.RAW_FX_RATES
    )

    # The raw step parsed and validated every record and stored the verdicts and typed fields
    # beside it; staging reads the valid records' columns (not cached: the skew plan's
    # aggregations read two or three of them again).
    valid = valid_orders(parsed_view(raw)).filter(F.col("event_date").isin(days))
    staging = convert_to_usd(latest_wins(valid), rates_on(rates, days, settings.rate_max_age_days))

    read = raw_arrivals(raw)
    quarantined = ({} if quarantine_version is None else
                   lake.row_counts(QUARANTINE_TABLE.path, QUARANTINE_TABLE.partition_column, quarantine_version))
    unsplit = unsplit_arrivals(arrivals, read, quarantined)
    order_files = _landed_and_read(settings, ORDERS_DATASET, arrivals, read.files)
    rate_files = _landed_and_read(settings, FX_RATES_DATASET, rate_days,
                                  files_read(rates, RAW_FX_RATES_TABLE.partition_column))
    max_age = timedelta(days=settings.rate_max_age_days)
    incomplete = {
        d: missing_window_files(d, d + timedelta(days=lateness), *order_files)
        + missing_window_files(d - max_age, d, *rate_files)
        + [why for a, why in sorted(unsplit.items()) if d <= a <= d + timedelta(days=lateness)]
        for d in days
    }
    inputs = {RAW_ORDERS_TABLE.path: raw_version, QUARANTINE_TABLE.path: quarantine_version,
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
