"""Raw layer: what landed, verbatim, one Delta partition per arrival (or rate) date."""


from collections import defaultdict
from datetime import date

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pyspark import StorageLevel
from pyspark.sql import functions as F

from backfill_assets.defs.lineage import commit_info, write_metadata
from backfill_assets.defs.partitions import daily_partitions
from backfill_assets.defs.publishing import (
    RETRY_TRANSIENT,
    close_check_outputs,
    fail_if_held,
    held_days,
    materialization,
    partition_dates,
    partitioned,
    published_by_earlier_attempts,
    report,
)
from backfill_assets.defs.raw.checks import (
    RATES_MATCH_LANDING,
    RAW_FX_RATES,
    RAW_FX_RATES_CHECKS,
    RAW_MATCHES_LANDING,
    RAW_ORDERS,
    RAW_ORDERS_CHECKS,
    VALID_TABLE,
    landing_outcomes,
    quarantine_outcomes,
)
from backfill_assets.defs.reconcile import (
    counts_by,
    fingerprints_and_counts,
    line_fingerprints,
    line_hash,
    rows_per_partition,
)
from backfill_assets.landing import list_landing_files, read_order_lines, read_rate_lines
from backfill_assets.resources import PipelineResource
from backfill_assets.settings import Settings
from backfill_assets.transforms.orders import quarantine_rows, valid_orders, validate_orders
from backfill_assets.transforms.schemas import QUARANTINE_ORDERS as QUARANTINE_SCHEMA
from backfill_assets.transforms.schemas import RAW_FX_RATES as RAW_FX_RATES_SCHEMA
from backfill_assets.transforms.schemas import RAW_ORDERS as RAW_ORDERS_SCHEMA
from backfill_assets.transforms.schemas import VALID_ORDERS as VALID_ORDERS_SCHEMA

KINDS = {"spark", "delta"}


# The tables the raw orders step writes, each with its schema (for withdrawing held days).
ORDER_TABLES = {
    "raw/orders": RAW_ORDERS_SCHEMA,
    "quarantine/orders": QUARANTINE_SCHEMA,
    VALID_TABLE: VALID_ORDERS_SCHEMA,
}


def _days_to_build(context: dg.AssetExecutionContext, key: dg.AssetKey) -> list[date]:
    done = published_by_earlier_attempts(context, key)
    return [d for d in partition_dates(context) if d not in done]


def _listed(files) -> dict[date, set[str]]:
    listed: dict[date, set[str]] = defaultdict(set)
    for f in files:
        listed[f.partition].add(f.relative_path)
    return listed


def withdraw(spark, lake, table: str, column: str, days: list[date], before: int | None, schema, commit) -> None:
    """Put held days back as they were before this step wrote them, so the lake never holds
    a raw day that Dagster does not report as materialized."""
    if not days:
        return
    if before is None:
        lake.replace_partitions(table, spark.createDataFrame([], schema), column, days, commit)
    else:
        lake.restore_partitions(table, column, days, before, commit)


def load_raw_orders(context: dg.AssetExecutionContext, spark, pipeline: PipelineResource):
    """Copy the landed records of each arrival date verbatim, split off the rejected ones (and
    keep the valid ones parsed, for staging), then prove the tables against the landing files
    before reporting a day published. Every record is parsed once, here."""
    days = _days_to_build(context, RAW_ORDERS)
    if not days:
        yield from close_check_outputs(context)
        return
    lake = pipeline.lake(spark)
    files = list_landing_files(pipeline.landing, "orders", days)
    listed = _listed(files)
    lines = read_order_lines(spark, pipeline.landing, files)
    commit = commit_info(context, "raw_orders", days, {})
    before = {table: lake.version(table) for table in ORDER_TABLES}
    raw_write = lake.replace_partitions("raw/orders", lines, "arrival_date", days, commit)
    # Read the landing files once more and parse each record once; cache only what the rest
    # needs (verdict, typed fields, line hash, payload of rejects), not every payload: the
    # cache stays small enough for memory however long the range.
    verdicts = (
        validate_orders(lines, pipeline.max_lateness_days)
        .withColumn("line_hash", line_hash())
        .withColumn("payload", F.when(F.col("reason").isNotNull(), F.col("payload")))
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    q_write = lake.replace_partitions(
        "quarantine/orders", quarantine_rows(verdicts), "arrival_date", days, commit
    )
    v_write = lake.replace_partitions(
        VALID_TABLE, valid_orders(verdicts), "arrival_date", days, commit
    )
    raw_back, _ = lake.read_partitions("raw/orders", "arrival_date", days, raw_write.version)
    q_back, _ = lake.read_partitions("quarantine/orders", "arrival_date", days, q_write.version)

    expected, expected_reasons = fingerprints_and_counts(verdicts, "arrival_date", "reason")
    actual = line_fingerprints(raw_back, "arrival_date")
    actual_reasons = counts_by(q_back, "arrival_date", "reason")
    outcomes = landing_outcomes(
        RAW_ORDERS, RAW_MATCHES_LANDING, days, listed, expected, actual
    ) + quarantine_outcomes(
        days, rows_per_partition(actual), expected_reasons, actual_reasons, v_write.rows_by_partition
    )
    verdicts.unpersist()
    held = held_days(outcomes)
    for table, schema in ORDER_TABLES.items():
        withdraw(spark, lake, table, "arrival_date", sorted(held), before[table], schema, commit)
    yield from report(context, outcomes)
    for day in (d for d in days if d not in held):
        reasons = actual_reasons.get(day, {})
        yield materialization(RAW_ORDERS, day, {
            **write_metadata(raw_write, day, {}, RAW_ORDERS_SCHEMA),
            "landing_files": dg.MetadataValue.int(len(listed.get(day, ()))),
            "valid_records": dg.MetadataValue.int(v_write.rows_by_partition.get(day, 0)),
            "quarantined": dg.MetadataValue.int(sum(reasons.values())),
            "quarantined_too_late": dg.MetadataValue.int(reasons.get("too_late", 0)),
            "quarantined_by_reason": dg.MetadataValue.json(dict(sorted(reasons.items()))),
            "quarantine_delta_version": dg.MetadataValue.int(q_write.version),
        })
    yield from close_check_outputs(context)
    fail_if_held(held)


def load_raw_fx_rates(context: dg.AssetExecutionContext, spark, pipeline: PipelineResource):
    """Copy the rate lines of each rate date as landed, proven against the landing files."""
    days = _days_to_build(context, RAW_FX_RATES)
    if not days:
        yield from close_check_outputs(context)
        return
    lake = pipeline.lake(spark)
    files = list_landing_files(pipeline.landing, "fx_rates", days)
    lines = read_rate_lines(spark, pipeline.landing, files).persist(StorageLevel.MEMORY_AND_DISK)
    commit, before = commit_info(context, "raw_fx_rates", days, {}), lake.version("raw/fx_rates")
    write = lake.replace_partitions("raw/fx_rates", lines, "rate_date", days, commit)
    back, _ = lake.read_partitions("raw/fx_rates", "rate_date", days, write.version)
    outcomes = landing_outcomes(
        RAW_FX_RATES, RATES_MATCH_LANDING, days, _listed(files),
        line_fingerprints(lines, "rate_date"), line_fingerprints(back, "rate_date"),
    )
    lines.unpersist()
    held = held_days(outcomes)
    withdraw(spark, lake, "raw/fx_rates", "rate_date", sorted(held), before, RAW_FX_RATES_SCHEMA, commit)
    yield from report(context, outcomes)
    for day in (d for d in days if d not in held):
        yield materialization(RAW_FX_RATES, day, write_metadata(write, day, {}, RAW_FX_RATES_SCHEMA))
    yield from close_check_outputs(context)
    fail_if_held(held)


def build_raw_assets(settings: Settings) -> list[dg.AssetsDefinition]:
    partitions = daily_partitions(settings)
    common = dict(
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        retry_policy=RETRY_TRANSIENT,
        pool="spark",
    )

    @dg.multi_asset(
        name="raw_orders",
        specs=[
            dg.AssetSpec(
                RAW_ORDERS,
                skippable=True,
                group_name="raw",
                kinds=KINDS,
                description="Every order record that landed on arrival date A, verbatim "
                "(Delta table raw/orders), and the rejected ones with their reason "
                "(quarantine/orders), and the valid ones parsed for staging "
                "(raw/orders_valid, internal). Partitioned by arrival date.",
                metadata={"tables": "raw/orders, quarantine/orders, raw/orders_valid"},
            )
        ],
        check_specs=partitioned(RAW_ORDERS_CHECKS, partitions),
        **common,
    )
    def raw_orders(context: dg.AssetExecutionContext, spark: LazyPySparkResource, pipeline: PipelineResource):
        yield from load_raw_orders(context, spark.spark_session, pipeline)

    @dg.multi_asset(
        name="raw_fx_rates",
        specs=[
            dg.AssetSpec(
                RAW_FX_RATES,
                skippable=True,
                group_name="raw",
                kinds=KINDS,
                description="Every exchange-rate line published for rate date R, as landed "
                "(Delta table raw/fx_rates). Partitioned by rate date.",
                metadata={"tables": "raw/fx_rates"},
            )
        ],
        check_specs=partitioned(RAW_FX_RATES_CHECKS, partitions),
        **common,
    )
    def raw_fx_rates(context: dg.AssetExecutionContext, spark: LazyPySparkResource, pipeline: PipelineResource):
        yield from load_raw_fx_rates(context, spark.spark_session, pipeline)

    return [raw_orders, raw_fx_rates]
