"""The weekly lake maintenance: a job of one op over every table of the catalog, and its schedule.

The op is ``lake.maintenance.maintain_tables`` (what ``backfill-assets maintain`` runs too),
after the corrections' upkeep: recover their interrupted operations, report broken records,
decommission the old ones. Per table: expire abandoned staged versions, vacuum with
``BACKFILL_RETENTION_DAYS`` honoured, compact small files, write checkpoints. A retention
below the floor fails the run before anything is touched. Terminate (SIGINT or SIGTERM) cancels
the compaction's Spark jobs and starts no further step (``publishing.interrupts``).
"""

from __future__ import annotations

import inspect

import dagster as dg

from backfill_assets import signals
from backfill_assets.catalog import (
    LAKE_TABLES,
    MAINTENANCE_JOB,
    MAINTENANCE_OP,
    MAINTENANCE_SCHEDULE,
    WHY_TAG,
)
from backfill_assets.corrections import actions, registry
from backfill_assets.corrections.lifecycle import recover_all
from backfill_assets.defs.automation.wiring import schedule_status
from backfill_assets.lake import CommitInfo
from backfill_assets.lake.maintenance import maintain_tables
from backfill_assets.publishing.interrupts import stops_on_interrupt
from backfill_assets.publishing.steps import unsupported_fails_once
from backfill_assets.resources import PipelineResource, SparkResource, code_version
from backfill_assets.settings import AutomationSettings, retention_days

CRON = "0 4 * * 0"  # Sundays 04:00 UTC, clear of the daily refresh at 02:00


@dg.op(name=MAINTENANCE_OP)
# context unannotated: Dagster compares its raw annotation, a string under postponed evaluation
def maintain_lake(  # type: ignore[no-untyped-def]
    context, spark: SparkResource, pipeline: PipelineResource
) -> None:
    """Recover the corrections' interrupted operations, decommission those older than the
    retention, then vacuum (retention honoured), compact and checkpoint every table."""
    with stops_on_interrupt(spark.started_session), unsupported_fails_once():
        _maintain(context, spark, pipeline)


def _maintain(
    context: dg.OpExecutionContext, spark: SparkResource, pipeline: PipelineResource
) -> None:
    days = retention_days()
    lake = pipeline.lake(spark.spark_session)
    for found in recover_all(lake):
        context.log.info(str(found))
        actions.record_recovered(context.instance, lake.location, found)
    for broken in registry.scan(lake.location)[1]:
        context.log.warning(str(broken))
    for closed in actions.decommission(lake, context.instance, days):
        context.log.info(f"correction {closed} decommissioned: older than {days:g} days")
    done = maintain_tables(
        lake,
        [(t.path, t.partition_column) for t in LAKE_TABLES],
        days,
        CommitInfo(
            run_id=context.run_id, code_version=code_version(), extra={"maintenance": "weekly"}
        ),
        between=signals.check,
    )
    for table in done:
        context.log.info(table.summary())


@dg.job(
    name=MAINTENANCE_JOB,
    description="Lake upkeep: decommission corrections older than "
    "BACKFILL_RETENTION_DAYS; over every table, expire abandoned staged versions, vacuum "
    "with that retention honoured, compact small files, write checkpoints.",
)
def maintenance_job() -> None:
    maintain_lake()


def build_maintenance_schedule(auto: AutomationSettings) -> dg.ScheduleDefinition:
    def weekly_lake_maintenance(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        """Sundays at 04:00 UTC (registered running with BACKFILL_AUTOMATION=on, like the daily
        refresh): decommission corrections older than the retention, vacuum every table with
        BACKFILL_RETENTION_DAYS (default 14, never below 7: in-flight writers' files), compact small
        files, write checkpoints."""
        day = context.scheduled_execution_time.date().isoformat()
        key = f"maintenance:{day}"
        return dg.RunRequest(run_key=key, tags={WHY_TAG: f"weekly lake maintenance {day}"})

    return dg.schedule(
        name=MAINTENANCE_SCHEDULE,
        cron_schedule=CRON,
        execution_timezone="UTC",
        job=maintenance_job,
        default_status=schedule_status(auto),  # it deletes files: on when asked
        description=inspect.cleandoc(weekly_lake_maintenance.__doc__ or ""),
    )(weekly_lake_maintenance)
