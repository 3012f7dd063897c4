"""``stg_orders`` and ``fct_daily_revenue``: one multi-asset step, published day by day.

Why one step: see this package's docstring.
"""

# No ``from __future__ import annotations`` here: Dagster checks the type of ``context`` when
# the asset is defined, and cannot read a postponed annotation.
from collections.abc import Iterator
from datetime import date

import dagster as dg
from pyspark.sql import SparkSession

from backfill_assets.asset_events.fact_metadata import fact_metadata
from backfill_assets.asset_events.lineage import commit_info, write_metadata
from backfill_assets.catalog import (
    EVENT_DAYS_OP,
    FACT_TABLE,
    FCT_DAILY_REVENUE,
    RAW_FX_RATES,
    RAW_ORDERS,
    STAGING_TABLE,
    STG_ORDERS,
)
from backfill_assets.defs.event_days.checks import FACT_CHECKS, STAGING_CHECKS
from backfill_assets.defs.partitions import (
    arrivals_of_event_day,
    daily_partitions,
    rates_of_event_day,
)
from backfill_assets.event_days.fact import build_fact, previous_fact_totals, stale_fact_days
from backfill_assets.event_days.quality import plotted, quality_checks
from backfill_assets.event_days.staging_orders import build_staging, trailing_published
from backfill_assets.lake import Lake
from backfill_assets.publishing.correcting import CorrectionForm, publication_for
from backfill_assets.publishing.interrupts import stops_on_interrupt
from backfill_assets.publishing.publication import Publication, partition_dates
from backfill_assets.publishing.steps import KINDS, spark_step, unsupported_fails_once
from backfill_assets.resources import PipelineResource, SparkResource
from backfill_assets.settings import Settings
from backfill_assets.transforms.schemas import DAILY_REVENUE, STAGING_ORDERS


def publish_staging(
    step: Publication, spark: SparkSession, settings: Settings
) -> tuple[set[date], int | None]:
    """Build, stage, audit and publish this step's staging days: (days published in this run or
    an earlier attempt of it, the Delta version written)."""
    days = step.days_to_build(STG_ORDERS)
    done = set(partition_dates(step.context)) - set(days)
    if not days:
        return done, None
    build = build_staging(spark, step.lake, settings, days)
    if build.hot_keys or build.spread > 1:
        step.context.log.info(
            f"{STG_ORDERS.to_user_string()}: hot keys {build.hot_keys or 'none'}; "
            f"each day written by up to {build.spread} tasks"
        )
    staged = step.stage(
        STAGING_TABLE,
        build.staging,
        days,
        commit_info(step.context, STG_ORDERS, days, build.input_versions),
        spread=build.spread,
        in_day_blocks=build.in_day_blocks,
    )
    outcomes = build.audit(days, step.read_staged(staged))
    good = step.audit(days, outcomes)
    step.context.log.info(
        f"{STG_ORDERS.to_user_string()}: publishing {len(good)} of {len(days)} day(s)"
    )
    if not good:
        return done, None
    write = step.publish(staged, good)
    figures = plotted(outcomes, STG_ORDERS)
    for d in good:
        step.published(
            STG_ORDERS,
            d,
            {
                **write_metadata(write, d, build.input_versions, STAGING_ORDERS),
                **figures.get(d, {}),
            },
        )
    return set(good) | done, write.version


def publish_fact(
    step: Publication, candidates: list[date], staging_version: int | None, settings: Settings
) -> None:
    """Fact of the published staging days ``candidates``, staged, audited against that
    staging, and published."""
    days = step.days_to_build(FCT_DAILY_REVENUE, candidates)
    if not days:
        return
    lake, source = step.lake, STAGING_TABLE
    staging, version = step.read_published(source, days, staging_version)
    inputs = {source.path: version}
    history = trailing_published(
        staging.sparkSession, lake, settings, days, FACT_TABLE, DAILY_REVENUE
    )
    build = build_fact(staging, history, settings.quality)
    staged = step.stage(
        FACT_TABLE, build.fact, days, commit_info(step.context, FCT_DAILY_REVENUE, days, inputs)
    )
    outcomes = build.audit(days, step.read_staged(staged))
    good = step.audit(days, outcomes)
    if good and step.publishes:
        # The fact must match the staging published now: one republished meanwhile holds it.
        moved = lake.changed_since(source.path, source.partition_column, version, good)
        for d in sorted(moved):
            step.hold(d, f"{STG_ORDERS.to_user_string()} republished while the fact was built")
        good = [d for d in good if d not in moved]
    if not good:
        return
    before, replaced_version = previous_fact_totals(lake, good)
    write = step.publish(staged, good)
    figures = plotted(outcomes, FCT_DAILY_REVENUE)
    for d in good:
        step.published(
            FCT_DAILY_REVENUE,
            d,
            {
                **write_metadata(write, d, inputs, DAILY_REVENUE),
                **fact_metadata(build.expected.get(d, {}), before.get(d), replaced_version),
                **figures.get(d, {}),
            },
        )


def publish_event_days(
    context: dg.AssetExecutionContext,
    spark: SparkSession,
    lake: Lake,
    settings: Settings,
    form: CorrectionForm | None = None,
) -> Iterator:
    """Staging then fact for the selected event days; a day held in staging is held in fact.
    ``form``: the correction a run of ``correction_job`` builds (``publishing/correcting.py``)."""
    with publication_for(context, lake, form) as step:
        selected = context.selected_asset_keys
        if STG_ORDERS in selected and FCT_DAILY_REVENUE not in selected:
            raise dg.Failure(
                description=f"{STG_ORDERS.to_user_string()} without "
                f"{FCT_DAILY_REVENUE.to_user_string()} would leave the fact built from a staging "
                "that is no longer published: select both (the fact alone is fine)",
                allow_retries=False,
            )
        staging_version = None
        if STG_ORDERS in selected:
            published, staging_version = publish_staging(step, spark, settings)
            yield from step.drain()  # staging is published: record it before the fact runs
        else:
            published = step.published_days(STG_ORDERS)
        if FCT_DAILY_REVENUE in selected:
            # A day held in staging keeps its published staging; its fact is rebuilt only if
            # it was built from an older one (a fact held, killed or unselected before).
            stale = stale_fact_days(lake, list(step.held)) if step.publishes else set()
            candidates = []
            for d in partition_dates(context):
                if d in step.held:
                    if d in stale:
                        candidates.append(d)
                elif d in published:
                    candidates.append(d)
                else:
                    step.hold(d, f"{STG_ORDERS.to_user_string()} not published")
            publish_fact(step, candidates, staging_version, settings)
        yield from step.finish()


def build_event_day_assets(settings: Settings) -> list[dg.AssetsDefinition]:
    partitions = daily_partitions(settings)

    @dg.multi_asset(
        name=EVENT_DAYS_OP,
        specs=[
            dg.AssetSpec(
                STG_ORDERS,
                skippable=True,
                group_name="staging",
                kinds=KINDS,
                description=f"One row per order and event day (Delta table {STAGING_TABLE.path}): "
                "valid records of arrivals D .. D + max lateness, deduplicated latest-wins, "
                "converted to USD at the rate of the event's own day. A day with an order "
                "lacking a rate is held: a red partition is a held day, not published, and View "
                "logs names the failed check. For fx_rate_present, land the rate for that day "
                "(or up to 7 days before) and materialize raw_fx_rates for its date; for "
                "window_complete, materialize raw_orders / raw_fx_rates for the dates it names. "
                "Then on the failed run's page use Re-execute, From failure (CLI: "
                "backfill-assets reexecute <run id>): only the held days are rebuilt.",
                deps=[
                    dg.AssetDep(RAW_ORDERS, partition_mapping=arrivals_of_event_day(settings)),
                    dg.AssetDep(RAW_FX_RATES, partition_mapping=rates_of_event_day(settings)),
                ],
                metadata={"table": STAGING_TABLE.path},
            ),
            dg.AssetSpec(
                FCT_DAILY_REVENUE,
                skippable=True,
                group_name="fact",
                kinds=KINDS,
                description=f"Daily revenue (Delta table {FACT_TABLE.path}): per event date and "
                "country, orders by final status and the USD revenue of paid orders. Published "
                "only for days whose staging passed its checks; a day held in staging is held "
                "here too, and re-execution from failure rebuilds both.",
                deps=[STG_ORDERS],
                metadata={"table": FACT_TABLE.path},
            ),
        ],
        can_subset=True,
        **spark_step(STAGING_CHECKS + FACT_CHECKS + quality_checks(settings.quality), partitions),
    )
    def staging_and_fact(
        context: dg.AssetExecutionContext,
        config: CorrectionForm,
        spark: SparkResource,
        pipeline: PipelineResource,
    ) -> Iterator:
        """Staging then fact for the selected event days, each day audited before publishing;
        a SIGINT or SIGTERM stops it (``publishing.interrupts``)."""
        with stops_on_interrupt(spark.started_session), unsupported_fails_once():
            session = spark.spark_session
            lake = pipeline.lake(session)
            yield from publish_event_days(context, session, lake, settings, config)

    return [staging_and_fact]
