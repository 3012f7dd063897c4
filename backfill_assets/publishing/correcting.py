"""A correction run of the event-days step: every check, nothing published.

A run tagged ``CORRECTION_TAG=<id>`` (``backfill-assets correct``), or of ``correction_job``
launched from the UI with its form filled in (``CorrectionForm``), walks the same protocol as
a production run, with ``CorrectionPublication`` in place of ``Publication``:

- ``publish`` keeps the passing days in the correction's staged version of each table
  instead of committing them, and records them in the correction's record
  (``corrections/keeping.py``);
- the fact is built from the correction's staging, not production's;
- check results go to the correction's record and to an observation per partition, never to
  the production partitions' check status; held days are named there and in the run's log,
  and the run succeeds (a failed run would mark production's partitions failed in Dagster).
  Correcting those days again under the same id, once their inputs are fixed, replaces them
  in the correction.
"""

from __future__ import annotations

from datetime import date

import dagster as dg
from pydantic import Field
from pyspark.sql import DataFrame

from backfill_assets import signals
from backfill_assets.catalog import (
    ASSET_TABLES,
    CORRECTION_JOB,
    CORRECTION_REASON_TAG,
    CORRECTION_TAG,
    Table,
)
from backfill_assets.corrections import events, keeping, lifecycle, recovery, registry
from backfill_assets.dagster_private import RawMetadataMapping
from backfill_assets.lake import Lake, StagedVersion, WriteResult
from backfill_assets.publishing.publication import (
    CheckOutcome,
    Publication,
    ancestor_run_ids,
    partition_dates,
)
from backfill_assets.resources import code_version

CORRECTION_JOB_DESCRIPTION = (
    "Build a correction of staging and fact beside production: every check runs, nothing is "
    "published. correction_start_job runs it after raw over the range; to run it by hand "
    "once raw is current, pick the partition range in the Launchpad and fill in the form "
    "(config: staging_and_fact: reason, an optional correction_id, rebuild). Then "
    "correction_diff_job, correction_cutover_job, correction_rollback_job."
)
CORRECTION_JOB_NEEDS_TAGS = (
    f"{CORRECTION_JOB} builds a correction, so its run needs a reason: the Launchpad's config "
    "(staging_and_fact: reason, an optional correction_id), or the tags "
    f"{CORRECTION_TAG}=<id> and {CORRECTION_REASON_TAG}=<why>. Nothing was built."
)


class CorrectionForm(dg.Config):
    """The correction a run of ``correction_job`` builds: the Launchpad's form. Left empty by
    every other run (a production run)."""

    reason: str = Field(
        default="", description="correction_job only: why, shown to the people who read the numbers"
    )
    correction_id: str = Field(
        default="",
        description="correction_job only, optional: the new correction's id (letters, digits, "
        "'-', '_'); left empty, one is made from the range's first day",
    )
    rebuild: bool = Field(
        default=False,
        description="correction_job only: tick to build days of the staged correction named "
        "by correction_id again (its held days, once their inputs are fixed)",
    )


def correction_of(
    context: dg.AssetExecutionContext, lake: Lake, form: CorrectionForm | None = None
) -> tuple[str, str] | None:
    """(id, reason) of the correction the run builds, from its tags or its form; None for a
    production run. A form filled in outside ``correction_job`` is refused, and so is one
    whose id is already taken (unless it asks to rebuild that correction's days)."""
    tags = context.run.tags
    if CORRECTION_TAG in tags:  # `correct`'s runs, and the form's once its checks passed
        return tags[CORRECTION_TAG], tags.get(CORRECTION_REASON_TAG, "")
    if form is None or not (form.correction_id.strip() or form.reason.strip() or form.rebuild):
        return None
    if context.job_name != CORRECTION_JOB:
        raise dg.Failure(
            description=f"a correction is built by {CORRECTION_JOB}, not {context.job_name}: "
            "leave the correction form empty here. Nothing was built.",
            allow_retries=False,
        )
    cid = form.correction_id.strip() or registry.new_id(partition_dates(context)[0])
    try:
        reason = registry.check_reason(form.reason)
        registry.check_start(lake.location, cid, form.rebuild)
    except registry.CorrectionError as exc:
        raise dg.Failure(description=f"{exc}. Nothing was built.", allow_retries=False) from None
    # Tagged like a run of `backfill-assets correct`: the correction's runs list this one, and a
    # re-execution, which copies the tags, builds into the same correction.
    context.instance.add_run_tags(
        context.run_id, {CORRECTION_TAG: cid, CORRECTION_REASON_TAG: reason}
    )
    return cid, reason


class CorrectionPublication(Publication):
    """``Publication`` for a correction run: see the module docstring."""

    publishes = False

    def __init__(
        self, context: dg.AssetExecutionContext, lake: Lake, correction_id: str, reason: str
    ) -> None:
        super().__init__(context, lake)
        days = partition_dates(context)
        try:
            recovery.recover(lake, correction_id)  # an interrupted cutover, rollback or discard
            lifecycle.require_production(lake, days[0], days[-1])
            self.correction = registry.open_correction(
                lake.location,
                correction_id,
                reason,
                days[0],
                days[-1],
                code_version(),
            )
        except registry.CorrectionError as exc:
            raise dg.Failure(
                description=f"correction {correction_id}: {exc}", allow_retries=False
            ) from exc
        self._ancestors = set(ancestor_run_ids(context))

    def _record(self, asset_key: dg.AssetKey) -> registry.TableRecord:
        return self.correction.table(ASSET_TABLES[asset_key][0].path)

    def days_to_build(self, asset_key: dg.AssetKey, days: list[date] | None = None) -> list[date]:
        """``days`` less those an earlier attempt of this run kept in the correction."""
        record = self._record(asset_key)
        done = {
            date.fromisoformat(d)
            for d, run in record.staged.items()
            if run in self._ancestors and d not in record.held
        }
        return [
            d for d in (partition_dates(self.context) if days is None else days) if d not in done
        ]

    def published_days(self, asset_key: dg.AssetKey) -> set[date]:
        return set(self._record(asset_key).ready_days())

    def read_published(
        self, table: Table, days: list[date], version: int | None
    ) -> tuple[DataFrame, int | None]:
        """The correction's own rows of ``table``: its fact is built from its staging."""
        staged = self.lake.staging.version(table.path, self.correction.id)
        if staged is None:
            raise dg.Failure(
                f"correction {self.correction.id} has no staged {table.path}", allow_retries=False
            )
        return self.lake.staging.read(staged, days), staged.base_version

    def check_events(self, outcomes: list[CheckOutcome]) -> list:
        """An observation per failed check and day, naming the correction: the results go to
        the correction, never to production partitions' check status."""
        return [
            dg.AssetObservation(
                asset_key=o.asset_key,
                partition=o.partition.isoformat(),
                metadata={
                    "correction": self.correction.id,
                    "check": o.check_name,
                    "passed": o.passed,
                    **dict(o.metadata),
                },
            )
            for o in outcomes
            if not o.passed
        ]

    def publish(self, staged: StagedVersion, days: list[date]) -> WriteResult:
        """Keep the staged files of ``days`` in the correction's version of the table; not
        after a SIGINT or SIGTERM (``signals.check``)."""
        signals.check()
        kept = keeping.keep(self.lake, self.correction, staged, days, self.context.run_id)
        rows = kept.rows_by_partition
        return WriteResult(
            staged.table,
            -1 if kept.base_version is None else kept.base_version,
            {d: rows.get(d, 0) for d in days},
            0,
            1,
        )

    def published(self, asset_key: dg.AssetKey, day: date, metadata: RawMetadataMapping) -> None:
        self._events.append(
            dg.AssetObservation(
                asset_key=asset_key,
                partition=day.isoformat(),
                metadata={
                    "correction": self.correction.id,
                    "staged_for_correction": True,
                    **{k: v for k, v in metadata.items() if not k.startswith("dagster/")},
                },
            )
        )

    def end(self) -> None:
        """Record the held days in the correction and name them; the run still succeeds.

        Unlike production's, a correction's step does not fail for a held day: Dagster would
        mark the production partitions of a failed run as failed, and nothing of production
        failed. Its held days are in the record, which a cutover reads."""
        if not self.held:
            events.report_state(self.context.instance, self.lake.location, self.correction)
            return
        days = set(partition_dates(self.context))
        for asset_key in self.context.selected_asset_keys:
            record = self._record(asset_key)
            for day, checks in self.held.items():
                if day in days:
                    record.held[day.isoformat()] = sorted(set(checks))
        registry.save(self.lake.location, self.correction)
        self.context.log.warning(
            f"correction {self.correction.id}: held (never cut over): "
            + "; ".join(f"{d}: {', '.join(sorted(set(c)))}" for d, c in sorted(self.held.items()))
            + f". Fix their inputs, then build those days again: correct --id {self.correction.id}"
            " --rebuild, or the form with this id and rebuild ticked."
        )
        events.report_state(self.context.instance, self.lake.location, self.correction)


def publication_for(
    context: dg.AssetExecutionContext, lake: Lake, form: CorrectionForm | None = None
) -> Publication:
    """The production protocol, or the correction's when the run builds one (its tags or its
    form say which)."""
    correction = correction_of(context, lake, form)
    if correction is None:
        if context.job_name == CORRECTION_JOB:
            raise dg.Failure(description=CORRECTION_JOB_NEEDS_TAGS, allow_retries=False)
        return Publication(context, lake)
    return CorrectionPublication(context, lake, *correction)
