"""Raw layer: what landed, verbatim, one Delta partition per arrival (or rate) date."""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace
from datetime import date
from functools import partial
from typing import Any

import dagster as dg
from pyspark import StorageLevel
from pyspark.sql import Observation
from pyspark.sql import functions as F

from backfill_assets.asset_events.lineage import commit_info, write_metadata
from backfill_assets.catalog import (
    FX_RATES_DATASET,
    ORDERS_DATASET,
    QUARANTINE_TABLE,
    RAW_FX_RATES,
    RAW_FX_RATES_STEP,
    RAW_FX_RATES_TABLE,
    RAW_ORDERS,
    RAW_ORDERS_STEP,
    RAW_ORDERS_TABLE,
)
from backfill_assets.days import rate_dates, rate_partition
from backfill_assets.defs.partitions import daily_partitions
from backfill_assets.defs.raw.checks import (
    RATES_MATCH_LANDING,
    RAW_FX_RATES_CHECKS,
    RAW_MATCHES_LANDING,
    RAW_ORDERS_CHECKS,
    landing_outcomes,
    quarantine_outcomes,
)
from backfill_assets.landing.layout import LandingFile, list_landing_files
from backfill_assets.landing.spark_reader import read_order_lines, read_rate_lines
from backfill_assets.publishing.publication import Publication
from backfill_assets.publishing.steps import publishing_step
from backfill_assets.settings import Settings
from backfill_assets.transforms import schemas
from backfill_assets.transforms.audit import (
    FileKey,
    checksum_sums,
    counts_by,
    line_fingerprints,
    line_hash,
    rows_per_partition,
    stored_fingerprints,
)
from backfill_assets.transforms.orders import (
    parsed_view,
    quarantine_rows,
    raw_rows,
    validate_orders,
)

ORDER_TABLES = (RAW_ORDERS_TABLE, QUARANTINE_TABLE)  # raw_orders writes


def _listed(files: Iterable[LandingFile]) -> dict[date, set[str]]:
    listed: dict[date, set[str]] = defaultdict(set)
    for f in files:
        listed[f.partition].add(f.relative_path)
    return listed


def build_raw_orders(step: Publication, days: list[date], resources: Any) -> None:
    """Copy the landed records of each arrival date verbatim, split off the rejected ones,
    prove what was staged against what was read, then publish the days that passed.

    The landing text is read once and every record parsed once, in the job that stages raw:
    raw stores each record's verdict, typed fields and line checksum beside it (the ``_``
    columns, which staging reads), and the quarantine is split from raw's staged files."""
    spark, pipeline = step.lake.spark, resources.pipeline
    files = list_landing_files(pipeline.landing, ORDERS_DATASET, days)
    listed = _listed(files)
    # Read by blocks of days, the files sorted: raw's write takes the lines where they are.
    read = validate_orders(
        read_order_lines(spark, pipeline.landing, files, day_blocks=days),
        pipeline.max_lateness_days,
    )
    in_flight = Observation("raw_orders_read")
    observed = read.withColumn("line_hash", line_hash()).observe(
        in_flight,
        F.count(F.lit(1)).alias("records"),
        *checksum_sums(F.col("line_hash"), "checksum"),
    )
    commit = commit_info(step.context, RAW_ORDERS, days, {})
    # The rejected records in row groups of their own: the quarantine's split reads only those.
    raw = step.stage(
        RAW_ORDERS_TABLE,
        raw_rows(observed),
        days,
        commit,
        in_day_blocks=True,
        nulls_apart="_reason",
    )
    stored = parsed_view(step.read_staged(raw))
    quarantine = step.stage(QUARANTINE_TABLE, quarantine_rows(stored), days, commit)

    column = RAW_ORDERS_TABLE.partition_column
    expected, expected_reasons, actual = stored_fingerprints(stored, column, "reason")
    actual_reasons = counts_by(step.read_staged(quarantine), column, "reason")
    outcomes = landing_outcomes(
        RAW_ORDERS,
        RAW_MATCHES_LANDING,
        days,
        listed,
        expected,
        actual,
        read_totals=in_flight.get if files else None,
    ) + quarantine_outcomes(days, rows_per_partition(actual), expected_reasons, actual_reasons)
    good = step.audit(days, outcomes)
    if not good:
        return
    # The quarantine first and raw last: a crash between the commits leaves an arrival whose
    # tables do not add up, which staging's window check holds (see event_days/staging_orders.py).
    q_write = step.publish(quarantine, good)
    raw_write = step.publish(raw, good)
    for day in good:
        reasons = actual_reasons.get(day, {})
        step.published(
            RAW_ORDERS,
            day,
            {
                **write_metadata(raw_write, day, {}, schemas.RAW_ORDERS_STORED),
                "landing_files": dg.MetadataValue.int(len(listed.get(day, ()))),
                "valid_records": dg.MetadataValue.int(expected_reasons.get(day, {}).get(None, 0)),
                "quarantined": dg.MetadataValue.int(sum(reasons.values())),
                "quarantined_too_late": dg.MetadataValue.int(reasons.get("too_late", 0)),
                "quarantined_by_reason": dg.MetadataValue.json(dict(sorted(reasons.items()))),
                "quarantine_delta_version": dg.MetadataValue.int(q_write.version),
            },
        )


def build_raw_fx_rates(
    settings: Settings, step: Publication, days: list[date], resources: Any
) -> None:
    """Copy the rate lines of each rate date as landed, proven against the landing files
    before they are published.

    The first partition also holds the rate dates of the rate window before it (``rate_dates``):
    its first days take their rate from there (a Saturday's from the Friday before), and no
    other partition would ever read them. The table stays partitioned by rate date; its check
    and its materialization count those dates with the first partition's."""
    spark, pipeline = step.lake.spark, resources.pipeline
    first = settings.start_date
    stored = rate_dates(days, first, settings.rate_max_age_days)
    files = list_landing_files(pipeline.landing, FX_RATES_DATASET, stored)
    lines = read_rate_lines(spark, pipeline.landing, files).persist(StorageLevel.MEMORY_AND_DISK)
    staged = step.stage(
        RAW_FX_RATES_TABLE, lines, stored, commit_info(step.context, RAW_FX_RATES, days, {})
    )
    column = RAW_FX_RATES_TABLE.partition_column
    outcomes = landing_outcomes(
        RAW_FX_RATES,
        RATES_MATCH_LANDING,
        days,
        _listed(replace(f, partition=rate_partition(f.partition, first)) for f in files),
        _by_partition(line_fingerprints(lines, column), first),
        _by_partition(line_fingerprints(step.read_staged(staged), column), first),
    )
    lines.unpersist()
    good = step.audit(days, outcomes)
    if good:
        write = step.publish(staged, rate_dates(good, first, settings.rate_max_age_days))
        for day in good:
            its_dates = [d for d in stored if rate_partition(d, first) == day]
            metadata = write_metadata(write, day, {}, schemas.RAW_FX_RATES)
            metadata["dagster/row_count"] = dg.MetadataValue.int(
                sum(write.rows_by_partition.get(d, 0) for d in its_dates)
            )
            if len(its_dates) > 1:
                metadata["rate_dates"] = dg.MetadataValue.text(f"{its_dates[0]}..{its_dates[-1]}")
            step.published(RAW_FX_RATES, day, metadata)


def _by_partition(
    found: dict[FileKey, tuple[int, int]], first: date
) -> dict[FileKey, tuple[int, int]]:
    """Fingerprints keyed by the raw_fx_rates partition that holds each file's rate date; no two
    keys merge, since a file's path names its rate date."""
    return {(rate_partition(d, first), path): v for (d, path), v in found.items()}


def build_raw_assets(settings: Settings) -> list[dg.AssetsDefinition]:
    partitions = daily_partitions(settings)
    raw_orders = publishing_step(
        RAW_ORDERS_STEP,
        dg.AssetSpec(
            RAW_ORDERS,
            group_name="raw",
            description="Every order record that landed on arrival date A, verbatim "
            f"(Delta table {RAW_ORDERS_TABLE.path}), and the rejected ones with their reason "
            f"({QUARANTINE_TABLE.path}); raw keeps each record's verdict and typed fields "
            "in `_` columns, which staging reads. Partitioned by arrival date; columns "
            "and rules in docs/contract.md. New or late files for A: materialize this "
            "partition (or run `backfill-assets catch-up`), then staging and fact of the "
            "event days they carry.",
            metadata={"tables": ", ".join(t.path for t in ORDER_TABLES)},
        ),
        RAW_ORDERS_CHECKS,
        partitions,
        build_raw_orders,
    )
    raw_fx_rates = publishing_step(
        RAW_FX_RATES_STEP,
        dg.AssetSpec(
            RAW_FX_RATES,
            group_name="raw",
            description="Every exchange-rate line published for rate date R, as landed "
            f"(Delta table {RAW_FX_RATES_TABLE.path}). Partitioned by rate date; the first "
            "partition also holds the rate dates of the 7 days before it, whose rates its "
            "first days may take. A missing "
            "or wrong rate: land a CSV in fx_rates/rate_date=R/ (the file whose name sorts "
            "last wins), materialize this partition (the first one for a date before it), "
            "then re-execute the held staging run from failure.",
            metadata={"tables": RAW_FX_RATES_TABLE.path},
        ),
        RAW_FX_RATES_CHECKS,
        partitions,
        partial(build_raw_fx_rates, settings),
    )
    return [raw_orders, raw_fx_rates]
