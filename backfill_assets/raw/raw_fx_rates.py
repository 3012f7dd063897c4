"""``raw_fx_rates``' build: the rate lines of each rate date as landed, proven against the
landing files, then published."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from typing import Any

import dagster as dg
from pyspark import StorageLevel

from backfill_assets.asset_events.lineage import commit_info, write_metadata
from backfill_assets.catalog import FX_RATES_DATASET, RAW_FX_RATES, RAW_FX_RATES_TABLE
from backfill_assets.days import rate_dates, rate_partition
from backfill_assets.landing.layout import gives_rows, list_landing_files
from backfill_assets.landing.spark_reader import read_rate_lines
from backfill_assets.publishing.publication import Publication
from backfill_assets.raw.raw_outcomes import RATES_MATCH_LANDING, landing_outcomes, listed_files
from backfill_assets.settings import Settings
from backfill_assets.transforms import schemas
from backfill_assets.transforms.audit import FileKey, line_fingerprints


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
        listed_files(replace(f, partition=rate_partition(f.partition, first)) for f in files),
        _by_partition(line_fingerprints(lines, column), first),
        _by_partition(line_fingerprints(step.read_staged(staged), column), first),
        gives_rows(pipeline.landing, FX_RATES_DATASET),
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
