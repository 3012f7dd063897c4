"""How a Spark step of the pipeline is declared, and the ``multi_asset`` of a step that walks
``Publication`` for one asset.

Every step is one ``dg.multi_asset``: its partitions and per-partition checks, a range as one
run, transient failures retried with backoff, the ``spark`` pool (``spark_step``). A step of
one asset (raw orders, raw rates, customer LTV, the monthly report, the enrichment) has one
body too (``publishing_step``): the days an earlier attempt did not publish, built by the
step's own function, then the check outputs and the failure naming the held days.
"""

# No ``from __future__ import annotations`` here: Dagster checks the type of ``context`` when
# the asset is defined, and cannot read a postponed annotation.
import contextlib
import warnings
from collections.abc import Callable, Iterator
from datetime import date
from typing import Any

import dagster as dg

from backfill_assets.lake import LakeUnsupported
from backfill_assets.publishing.interrupts import stops_on_interrupt
from backfill_assets.publishing.publication import Publication
from backfill_assets.settings import RunSettings


def retry_transient() -> dg.RetryPolicy:
    """Two retries of a failed step, after ``BACKFILL_RETRY_DELAY_SECONDS`` (5) and three times
    that (read when the definitions are built)."""
    delay = RunSettings.from_env().retry_delay_seconds
    return dg.RetryPolicy(max_retries=2, delay=delay, backoff=dg.Backoff.EXPONENTIAL)


@contextlib.contextmanager
def unsupported_fails_once() -> Iterator[None]:
    """Around a step's body: a table its engine cannot serve (``LakeUnsupported``) fails the
    step at once, naming the features; no retry changes a table's protocol."""
    try:
        yield
    except LakeUnsupported as exc:
        raise dg.Failure(description=f"{exc}; not retried", allow_retries=False) from exc


# What every asset of the pipeline is made of: Spark compute, Delta tables.
KINDS = {"spark", "delta"}


def spark_step(checks: list[dg.AssetCheckSpec], partitions: dg.PartitionsDefinition) -> dict:
    """How every Spark step of the pipeline is declared (``dg.multi_asset`` keywords): its
    partitions and per-partition checks, a range as one run, transient failures retried with
    backoff, and the ``spark`` pool that bounds how many run at once (dagster.yaml)."""
    return {
        "partitions_def": partitions,
        "check_specs": partitioned(checks, partitions),
        "backfill_policy": dg.BackfillPolicy.single_run(),
        "retry_policy": retry_transient(),
        "pool": "spark",
    }


def partitioned(
    specs: list[dg.AssetCheckSpec], partitions: dg.PartitionsDefinition
) -> list[dg.AssetCheckSpec]:
    """The checks bound to the daily partitions, so Dagster keeps (and the UI shows) one result
    per partition instead of the latest evaluation of the whole check."""
    with warnings.catch_warnings():  # partitioned checks are a preview feature in Dagster 1.13
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return [
            dg.AssetCheckSpec(
                spec.name,
                asset=spec.asset_key,
                description=spec.description,
                blocking=spec.blocking,
                partitions_def=partitions,
            )
            for spec in specs
        ]


# A one-asset step's own work: build, stage, audit and publish ``days`` (those of the run's
# partitions an earlier attempt did not publish), with the run's resources at hand.
StepBuild = Callable[[Publication, list[date], Any], None]


def publishing_step(
    name: str,
    spec: dg.AssetSpec,
    checks: list[dg.AssetCheckSpec],
    partitions: dg.PartitionsDefinition,
    build: StepBuild,
    *,
    description: str | None = None,
    resources: tuple[str, ...] = (),
) -> dg.AssetsDefinition:
    """The step ``name`` (its op's name) of the one asset ``spec`` (published day by day, so
    skippable; Spark and Delta), audited by ``checks``: its body opens a ``Publication``, calls
    ``build`` with the days left to build and the run's resources (``spark``, ``pipeline`` and
    ``resources``), then closes the check outputs and fails naming the held days; a SIGINT or
    SIGTERM stops it (``publishing.interrupts``). ``description`` is the op's, as the UI
    shows it."""

    @dg.multi_asset(
        name=name,
        specs=[spec.replace_attributes(skippable=True, kinds=KINDS)],
        description=description,
        required_resource_keys={"spark", "pipeline", *resources},
        **spark_step(checks, partitions),
    )
    def step_body(context: dg.AssetExecutionContext) -> Iterator:
        with stops_on_interrupt(context.resources.spark.started_session), unsupported_fails_once():
            spark = context.resources.spark.spark_session
            with Publication(context, context.resources.pipeline.lake(spark)) as step:
                days = step.days_to_build(spec.key)
                try:
                    if days:
                        build(step, days, context.resources)
                except Exception:
                    # What was published before the failure (or the stop) is recorded.
                    yield from step.drain()
                    raise
                yield from step.finish()

    return step_body
