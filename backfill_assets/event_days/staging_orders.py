"""Staging: parsed, validated, deduplicated (latest wins) orders in USD, per event day.

Event day D reads the raw arrivals D .. D + max lateness and the rates of D - rate window ..
D, computes the whole range in one Spark job, and audits each day before it is published.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import date, timedelta

import dagster as dg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

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
from backfill_assets.days import days_between, last_partition
from backfill_assets.event_days.outcomes import missing_window_files, staging_outcomes
from backfill_assets.event_days.quality import quality_outcomes
from backfill_assets.lake import Lake, LakeTableMissing
from backfill_assets.landing.layout import gives_rows, list_landing_files
from backfill_assets.publishing.publication import CheckOutcome, held_days
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

    @property
    def in_day_blocks(self) -> bool:
        """Whether ``staging``'s rows arrive by blocks of days, each task's sorted by day (an
        unsalted dedupe's window leaves them so): the write then takes them where they are."""
        return self.spread == 1

    def audit(self, days: list[date], staged: DataFrame) -> list[CheckOutcome]:
        """The staging checks, on ``staged``: the rows as staged, not as computed; then the
        warning checks, from the same aggregations (which read the trailing days too)."""
        stats = staging_stats(staged, days, self.history)
        contract = staging_outcomes(
            days, stats, self.valid_ids, self.incomplete, self.schema_errors
        )
        return contract + quality_outcomes(
            STG_ORDERS, days, staging_figures(stats), set(held_days(contract)), self.quality
        )


def _read_or_empty(
    spark: SparkSession, lake: Lake, table: Table, days: list[date], schema: StructType
) -> tuple[DataFrame, int | None]:
    try:
        return lake.read_partitions(table.path, table.partition_column, days)
    except LakeTableMissing:
        return spark.createDataFrame([], schema), None


def require_parsed_columns(raw: DataFrame) -> DataFrame:
    """``raw`` when it has raw/orders' ``_`` columns, which staging reads. A table written
    before raw kept them has them in no row (the lake refuses a write that changes a table's
    schema), so the step fails, once, saying how to rebuild it."""
    missing = [f.name for f in schemas.RAW_ORDERS_PARSED if f.name not in raw.columns]
    if missing:
        raise dg.Failure(
            description=f"{RAW_ORDERS_TABLE.path} predates its parsed columns "
            f"({', '.join(missing[:3])}, ...; docs/contract.md): rebuild it into an empty lake, "
            "or delete it and backfill raw_orders for its days again, then staging.",
            allow_retries=False,
        )
    return raw


@dataclass(frozen=True)
class RawArrivals:
    """What staging's window check needs to know of the raw order rows it read."""

    files: set[tuple[date, str]]  # (arrival date, source file) of every row
    rejected: Counter  # arrival date -> rows whose stored verdict is a quarantine reason


def raw_arrivals(raw: DataFrame) -> RawArrivals:
    """One aggregation over the raw rows staging read, by (arrival date, source file)."""
    rows = (
        raw.groupBy("arrival_date", "source_file")
        .agg(F.count(F.col("_reason")).alias("rejected"))
        .collect()
    )
    rejected: Counter = Counter()
    for r in rows:
        rejected[r["arrival_date"]] += r["rejected"]
    return RawArrivals({(r["arrival_date"], r["source_file"]) for r in rows}, rejected)


def unsplit_arrivals(
    arrivals: list[date], raw: RawArrivals, quarantine: dict[date, int]
) -> set[date]:
    """Arrival dates whose rejected records in raw are not its quarantine rows (``quarantine``:
    rows per arrival, from the lake's statistics): a raw rebuild that committed the quarantine
    and stopped before raw. Staging must not build from such a date."""
    return {a for a in arrivals if raw.rejected[a] != quarantine.get(a, 0)}


def files_read(raw: DataFrame, column: str) -> set[tuple[date, str]]:
    """(date, source file) of every raw row."""
    return {
        (r[column], r["source_file"])
        for r in raw.select(column, "source_file").distinct().collect()
    }


def _landed_and_read(
    settings: Settings, dataset: str, dates: list[date], read: set[tuple[date, str]]
) -> tuple[set[tuple[date, str]], set[tuple[date, str]]]:
    """(the landed files of ``dataset`` on ``dates`` that give raw rows, the files raw holds
    (``read``)), each as (date, path). A file of zero records is in raw as no row, so it is
    never missing."""
    has_rows = gives_rows(settings.landing_dir, dataset)
    landed = {
        (f.partition, f.relative_path)
        for f in list_landing_files(settings.landing_dir, dataset, dates)
        if (f.partition, f.relative_path) in read or has_rows(f.relative_path)
    }
    return landed, read


def build_staging(
    spark: SparkSession, lake: Lake, settings: Settings, days: list[date]
) -> StagingBuild:
    first, last = days[0], days[-1]
    lateness = settings.max_lateness_days
    arrivals = days_between(first, last + timedelta(days=lateness))
    # The whole rate window, also before the first partition: its first partition holds those.
    rate_days = days_between(first - timedelta(days=settings.rate_max_age_days), last)
    raw, raw_version = _read_or_empty(
        spark, lake, RAW_ORDERS_TABLE, arrivals, schemas.RAW_ORDERS_STORED
    )
    raw = require_parsed_columns(raw)
    quarantine_version = lake.version(QUARANTINE_TABLE.path)
    rates, rates_version = _read_or_empty(
        spark, lake, RAW_FX_RATES_TABLE, rate_days, schemas.RAW_FX_RATES
    )

    # The raw step parsed and validated every record and stored the verdicts and typed fields
    # beside it; staging reads the valid records' columns (not cached: the skew plan's
    # aggregations read two or three of them again).
    valid = valid_orders(parsed_view(raw)).filter(F.col("event_date").isin(days))
    valid_ids, hot, spread = skew_plan(valid, settings, days)
    # A salted write means a hot day: its dedupe goes by (day, id) too, not to one task; an
    # unsalted one goes by blocks of days, where the write takes the rows (``in_day_blocks``).
    deduped = latest_wins(valid, days if spread == 1 else None)
    staging = convert_to_usd(deduped, rates_on(rates, days, settings.rate_max_age_days))

    read = raw_arrivals(raw)
    quarantined = (
        {}
        if quarantine_version is None
        else lake.row_counts(
            QUARANTINE_TABLE.path, QUARANTINE_TABLE.partition_column, quarantine_version
        )
    )
    unsplit = unsplit_arrivals(arrivals, read, quarantined)
    # An arrival after the last daily partition (today's folder) is no raw partition yet: no
    # staging can read it, so it holds no day. It joins its days once it is one (the daily
    # refresh, the late-data lane: docs/contract.md).
    partitions = [a for a in arrivals if a <= last_partition()]
    order_files = _landed_and_read(settings, ORDERS_DATASET, partitions, read.files)
    rate_files = _landed_and_read(
        settings,
        FX_RATES_DATASET,
        rate_days,
        files_read(rates, RAW_FX_RATES_TABLE.partition_column),
    )
    max_age = timedelta(days=settings.rate_max_age_days)
    incomplete = {
        d: missing_window_files(d, d + timedelta(days=lateness), *order_files)
        + missing_window_files(d - max_age, d, *rate_files)
        + [
            f"{a}: raw's rejected records != quarantine rows"
            for a in sorted(unsplit)
            if d <= a <= d + timedelta(days=lateness)
        ]
        for d in days
    }
    from backfill_assets.transforms.staging_rules import staging_schema_errors  # pandera: 0.6 s

    inputs = {
        RAW_ORDERS_TABLE.path: raw_version,
        QUARANTINE_TABLE.path: quarantine_version,
        RAW_FX_RATES_TABLE.path: rates_version,
    }
    return StagingBuild(
        staging,
        inputs,
        valid_ids,
        incomplete,
        staging_schema_errors(staging),
        trailing_published(spark, lake, settings, days, STAGING_TABLE, schemas.STAGING_ORDERS),
        settings.quality,
        hot,
        spread,
    )


def skew_plan(
    valid: DataFrame, settings: Settings, days: list[date]
) -> tuple[dict[date, int], list[str], int]:
    """(distinct order ids per day, the hot keys, tasks per day of the write). In ``auto`` mode
    the aggregation that counts the ids also finds the hot event days and customers, and a hot
    key salts the write; ``on`` salts it always, ``off`` never."""
    skew = settings.skew
    if skew.mitigation != "auto":
        return valid_order_ids(valid, days), [], skew.salt_buckets if skew.mitigation == "on" else 1
    keys = staging_keys(valid, days)
    hot = keys.hot(skew.hot_key_share)
    return keys.valid_ids, hot, skew.salt_buckets if hot else 1


def trailing_published(
    spark: SparkSession,
    lake: Lake,
    settings: Settings,
    days: list[date],
    table: Table,
    schema: StructType,
) -> DataFrame | None:
    """``table``'s published rows of the warning checks' trailing days of ``days`` that are not
    being built (None when there are none): read, not collected, so the checks' one
    aggregation reads them with the days built."""
    first = max(days[0] - timedelta(days=settings.quality.trailing_days), settings.start_date)
    building = set(days)
    history = [d for d in days_between(first, days[-1]) if d not in building]
    if not history or not lake.exists(table.path):
        return None
    return _read_or_empty(spark, lake, table, history, schema)[0]
