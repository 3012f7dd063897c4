"""The event-day step: staging then fact for a range of event days, published day by day.

Staging and fact share one step so that a day failing its staging checks is held
in both layers while every other day of the range is published in both; separate
steps would let Dagster skip the whole downstream range on one bad day. The step
is subsettable: selecting only the fact rebuilds it from published staging days.
"""


from datetime import date

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pyspark.sql import functions as F

from backfill_assets.defs.fact.assets import build_fact, fact_spec
from backfill_assets.defs.fact.checks import FACT_CHECKS, FCT_DAILY_REVENUE, ZERO, fact_totals
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
from backfill_assets.defs.staging.assets import build_staging, staging_spec
from backfill_assets.defs.staging.checks import STAGING_CHECKS, STG_ORDERS
from backfill_assets.lake import Lake
from backfill_assets.resources import PipelineResource
from backfill_assets.settings import Settings
from backfill_assets.transforms.schemas import DAILY_REVENUE, STAGING_ORDERS


class LakeWriteMismatch(Exception):
    """The lake committed a different number of rows than the step computed: never a data issue."""


def _verify_rows(write, expected: dict[date, int]) -> None:
    got = {d: write.rows_by_partition.get(d, 0) for d in expected}
    if got != expected:
        raise LakeWriteMismatch(f"{write.table} v{write.version}: expected rows {expected}, committed {got}")


def publish_staging(context, spark, pipeline: PipelineResource, lake: Lake, held: dict):
    """Build, audit and publish this step's staging days: (published days, version, events)."""
    done = published_by_earlier_attempts(context, STG_ORDERS)
    days = [d for d in partition_dates(context) if d not in done]
    if not days:
        return set(done), None, []
    build = build_staging(spark, lake, pipeline.landing, days, pipeline.max_lateness_days)
    staging_held = held_days(build.outcomes)
    held.update(staging_held)
    good = [d for d in days if d not in staging_held]
    events = list(report(context, build.outcomes))
    version = None
    if good:
        write = lake.replace_partitions(
            "staging/orders",
            build.staging.filter(F.col("event_date").isin(good)),
            "event_date",
            good,
            commit_info(context, "stg_orders", good, build.input_versions),
        )
        _verify_rows(write, {d: build.rows.get(d, 0) for d in good})
        version = write.version
        events += [materialization(STG_ORDERS, d, write_metadata(write, d, build.input_versions, STAGING_ORDERS))
                   for d in good]
    build.release()
    context.log.info(f"stg_orders: published {len(good)} of {len(days)} day(s)")
    return set(good) | done, version, events


def publish_fact(context, lake: Lake, candidates: list[date], staging_version: int | None, held: dict):
    done = published_by_earlier_attempts(context, FCT_DAILY_REVENUE)
    days = [d for d in candidates if d not in done]
    if not days:
        return []
    staging, version = lake.read_partitions("staging/orders", "event_date", days, staging_version)
    build = build_fact(staging, days)
    fact_held = held_days(build.outcomes)
    held.update({d: held.get(d, []) + c for d, c in fact_held.items()})
    good = [d for d in days if d not in fact_held]
    events = list(report(context, build.outcomes))
    if good:
        inputs = {"staging/orders": version}
        before, replaced_version = previous_fact_totals(lake, good)
        write = lake.replace_partitions(
            "fact/daily_revenue",
            build.fact.filter(F.col("event_date").isin(good)),
            "event_date",
            good,
            commit_info(context, "fct_daily_revenue", good, inputs),
        )
        for d in good:
            totals = build.expected.get(d, {})
            events.append(materialization(FCT_DAILY_REVENUE, d, {
                **write_metadata(write, d, inputs, DAILY_REVENUE),
                "orders": dg.MetadataValue.int(totals.get("orders", 0)),
                "paid_orders": dg.MetadataValue.int(totals.get("paid_orders", 0)),
                "revenue_usd": dg.MetadataValue.float(float(totals.get("revenue_usd", 0))),
                "revenue_usd_exact": dg.MetadataValue.text(str(totals.get("revenue_usd", "0.00"))),
                **change_metadata(totals, before.get(d), replaced_version),
            }))
    return events


def previous_fact_totals(lake: Lake, days: list[date]) -> tuple[dict[date, dict], int | None]:
    """The per-day totals of the fact version about to be replaced (empty on first build)."""
    if not lake.exists("fact/daily_revenue"):
        return {}, None
    previous, version = lake.read_partitions("fact/daily_revenue", "event_date", days)
    return fact_totals(previous), version


def change_metadata(new: dict, old: dict | None, replaced_version: int | None) -> dict:
    """What a rebuild changed against the version it replaced: orders and revenue deltas."""
    old = old or ZERO
    return {
        "replaced_delta_version": dg.MetadataValue.int(-1 if replaced_version is None else replaced_version),
        "orders_delta": dg.MetadataValue.int(new.get("orders", 0) - old["orders"]),
        "paid_orders_delta": dg.MetadataValue.int(new.get("paid_orders", 0) - old["paid_orders"]),
        "revenue_usd_delta": dg.MetadataValue.text(
            str(new.get("revenue_usd", ZERO["revenue_usd"]) - old["revenue_usd"])
        ),
    }


def publish_event_days(context: dg.AssetExecutionContext, spark, pipeline: PipelineResource):
    lake = pipeline.lake(spark)
    held: dict[date, list[str]] = {}
    selected = context.selected_asset_keys
    staging_version = None
    if STG_ORDERS in selected:
        published, staging_version, events = publish_staging(context, spark, pipeline, lake, held)
        yield from events
    else:
        published = {date.fromisoformat(k) for k in context.instance.get_materialized_partitions(STG_ORDERS)}
    if FCT_DAILY_REVENUE in selected:
        candidates = [d for d in partition_dates(context) if d in published and d not in held]
        for d in partition_dates(context):
            if d not in published and d not in held:
                held[d] = ["stg_orders not published"]
        yield from publish_fact(context, lake, candidates, staging_version, held)
    yield from close_check_outputs(context)
    fail_if_held(held)


def build_event_day_assets(settings: Settings) -> list[dg.AssetsDefinition]:
    @dg.multi_asset(
        name="staging_and_fact",
        specs=[staging_spec(settings), fact_spec()],
        check_specs=partitioned(STAGING_CHECKS + FACT_CHECKS, daily_partitions(settings)),
        partitions_def=daily_partitions(settings),
        backfill_policy=dg.BackfillPolicy.single_run(),
        can_subset=True,
        retry_policy=RETRY_TRANSIENT,
        pool="spark",
    )
    def staging_and_fact(
        context: dg.AssetExecutionContext, spark: LazyPySparkResource, pipeline: PipelineResource
    ):
        """Staging then fact for the selected event days, each day audited before publishing."""
        yield from publish_event_days(context, spark.spark_session, pipeline)

    return [staging_and_fact]
