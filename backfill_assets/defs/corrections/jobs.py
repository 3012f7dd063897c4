"""A built correction's actions from the Dagster UI: one job each for diff, cutover, rollback and
discard, launched with a form (the launchpad's config: the correction's id, and for cutover its
guardrail) instead of a tag typed by hand.

Each runs what the command of the same name runs (``corrections/actions.py``: recovery first,
the lifecycle's guardrails, the commits recorded in Dagster), and tags its run with the
correction's id, so that the correction's runs list every action taken on it. A refusal (an
unknown or closed id, a guardrail, production changed since the diff) fails the run with the
reason, before anything is changed. Terminate stops the diff's Spark jobs; a cutover, rollback
or discard stopped before its intent is saved changes nothing, and one whose commits began
finishes them (metadata only: seconds), so the two tables never disagree.
"""

import contextlib
from collections.abc import Iterator

import dagster as dg
from pydantic import Field

from backfill_assets.catalog import (
    CORRECTION_CUTOVER_JOB,
    CORRECTION_DIFF_JOB,
    CORRECTION_DISCARD_JOB,
    CORRECTION_ROLLBACK_JOB,
    CORRECTION_TAG,
)
from backfill_assets.corrections import actions, lifecycle, recovery, registry
from backfill_assets.corrections import report as reporting
from backfill_assets.corrections.registry import CorrectionError
from backfill_assets.lake import Lake
from backfill_assets.publishing.interrupts import stops_on_interrupt
from backfill_assets.publishing.steps import unsupported_fails_once
from backfill_assets.resources import PipelineResource, SparkResource


class CorrectionChoice(dg.Config):
    correction_id: str = Field(
        description="The correction's id, as `backfill-assets corrections` lists it."
    )


class CutoverChoice(CorrectionChoice):
    max_revenue_change_pct: float = Field(
        default=lifecycle.DEFAULT_MAX_REVENUE_CHANGE_PCT,
        description="Refuse when a day's revenue moves by more than this percentage.",
    )
    force: bool = Field(default=False, description="Cut over past the revenue guardrail.")
    skip_rebuilt: bool = Field(
        default=False,
        description="Leave to production the days it rebuilt after the correction was staged.",
    )


@contextlib.contextmanager
def _refusals(spark: SparkResource) -> Iterator[None]:
    """A refusal fails the run with its reason (no stack trace from deep inside); a SIGINT or
    SIGTERM (the UI's Terminate) cancels the diff's Spark jobs and starts no commit
    (``publishing.interrupts``)."""
    with stops_on_interrupt(spark.started_session), unsupported_fails_once():
        try:
            yield
        except CorrectionError as exc:
            raise dg.Failure(description=str(exc)) from None


def _begin(
    context: dg.OpExecutionContext,
    choice: CorrectionChoice,
    spark: SparkResource,
    pipeline: PipelineResource,
) -> tuple[Lake, str, recovery.Recovery | None]:
    """The correction's record checked (no Spark for a refusal), the run tagged with its id,
    the lake opened and what the correction left interrupted recovered."""
    cid = choice.correction_id.strip()
    registry.get(pipeline.lake_dir, cid)
    context.instance.add_run_tags(context.run_id, {CORRECTION_TAG: cid})
    lake = pipeline.lake(spark.spark_session)
    found = actions.recover(lake, context.instance, cid)
    if found is not None:
        context.log.info(str(found))
    return lake, cid, found


# No postponed evaluation in this module: Dagster resolves an op's config class from its
# annotation. The context stays unannotated, as in the other ops.
@dg.op
def diff_correction(  # type: ignore[no-untyped-def]
    context, config: CorrectionChoice, spark: SparkResource, pipeline: PipelineResource
) -> dg.Output[None]:
    """The correction against production, per day and table; its report saved beside its
    record and shown on the assets."""
    with _refusals(spark):
        lake, cid, _ = _begin(context, config, spark, pipeline)
        done = actions.diff(lake, context.instance, cid)
    changed = ", ".join(map(str, done.result.changed_days)) or "none"
    context.log.info(f"correction {cid}: changed days {changed}; report {done.report_path}")
    return dg.Output(
        None,
        metadata={
            "correction": cid,
            "changed_days": changed,
            "guardrail": reporting.verdict(done.result),
            "report": dg.MetadataValue.md(done.markdown),
            "report_path": done.report_path,
        },
    )


@dg.op
def cut_over_correction(  # type: ignore[no-untyped-def]
    context, config: CutoverChoice, spark: SparkResource, pipeline: PipelineResource
) -> dg.Output[None]:
    """Publish the diffed correction: one metadata commit per table."""
    with _refusals(spark):
        lake, cid, found = _begin(context, config, spark, pipeline)
        outcome = actions.cutover(
            lake,
            context.instance,
            cid,
            config.max_revenue_change_pct,
            config.force,
            config.skip_rebuilt,
            found,
        )
    return _committed(context, cid, outcome, "cut over")


@dg.op
def roll_back_correction(  # type: ignore[no-untyped-def]
    context, config: CorrectionChoice, spark: SparkResource, pipeline: PipelineResource
) -> dg.Output[None]:
    """Put the cut-over partitions back as they were."""
    with _refusals(spark):
        lake, cid, found = _begin(context, config, spark, pipeline)
        outcome = actions.rollback(lake, context.instance, cid, found)
    return _committed(context, cid, outcome, "rolled back")


@dg.op
def discard_correction(  # type: ignore[no-untyped-def]
    context, config: CorrectionChoice, spark: SparkResource, pipeline: PipelineResource
) -> dg.Output[None]:
    """Drop the correction's staged files."""
    with _refusals(spark):
        lake, cid, found = _begin(context, config, spark, pipeline)
        deleted = actions.discard(lake, context.instance, cid, found)
    context.log.info(f"correction {cid} discarded: {deleted} staged file(s) deleted")
    return dg.Output(None, metadata={"correction": cid, "deleted_files": deleted})


def _committed(
    context: dg.OpExecutionContext, cid: str, outcome: lifecycle.Outcome, action: str
) -> dg.Output[None]:
    summary = actions.cutover_summary(cid, outcome, action)
    context.log.info(summary)
    if outcome.skipped:
        context.log.info("left to production: " + ", ".join(map(str, outcome.skipped)))
    return dg.Output(
        None,
        metadata={
            "correction": cid,
            "days": ", ".join(map(str, outcome.days)),
            "versions": {t: w.version for t, w in outcome.writes.items()},
            "summary": summary,
        },
    )


@dg.job(name=CORRECTION_DIFF_JOB, description="Diff a built correction against production.")
def correction_diff_job() -> None:
    diff_correction()


@dg.job(
    name=CORRECTION_CUTOVER_JOB,
    description="Cut a diffed correction over into production (guardrail: the largest change of "
    "a day's revenue; force to pass it).",
)
def correction_cutover_job() -> None:
    cut_over_correction()


@dg.job(name=CORRECTION_ROLLBACK_JOB, description="Roll a cut-over correction back.")
def correction_rollback_job() -> None:
    roll_back_correction()


@dg.job(name=CORRECTION_DISCARD_JOB, description="Discard a correction's staged files.")
def correction_discard_job() -> None:
    discard_correction()


CORRECTION_ACTION_JOBS = (
    correction_diff_job,
    correction_cutover_job,
    correction_rollback_job,
    correction_discard_job,
)
