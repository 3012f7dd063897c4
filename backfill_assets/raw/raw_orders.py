"""``raw_orders``' build: every landed order record of an arrival date verbatim, the rejected
ones split off into the quarantine, proven against what was read, then published."""

from __future__ import annotations

from datetime import date
from typing import Any

import dagster as dg
from pyspark.sql import Observation
from pyspark.sql import functions as F

from backfill_assets.asset_events.lineage import commit_info, write_metadata
from backfill_assets.catalog import ORDERS_DATASET, QUARANTINE_TABLE, RAW_ORDERS, RAW_ORDERS_TABLE
from backfill_assets.landing.layout import gives_rows, list_landing_files
from backfill_assets.landing.spark_reader import read_order_lines
from backfill_assets.publishing.publication import Publication
from backfill_assets.raw.raw_outcomes import (
    RAW_MATCHES_LANDING,
    landing_outcomes,
    listed_files,
    quarantine_outcomes,
)
from backfill_assets.transforms import schemas
from backfill_assets.transforms.audit import (
    checksum_sums,
    counts_by,
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


def build_raw_orders(step: Publication, days: list[date], resources: Any) -> None:
    """Copy the landed records of each arrival date verbatim, split off the rejected ones,
    prove what was staged against what was read, then publish the days that passed.

    The landing text is read once and every record parsed once, in the job that stages raw:
    raw stores each record's verdict, typed fields and line checksum beside it (the ``_``
    columns, which staging reads), and the quarantine is split from raw's staged files."""
    spark, pipeline = step.lake.spark, resources.pipeline
    files = list_landing_files(pipeline.landing, ORDERS_DATASET, days)
    listed = listed_files(files)
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
        gives_rows(pipeline.landing, ORDERS_DATASET),
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
