"""A correction run of the event-days step: every check, nothing published.

A run tagged ``CORRECTION_TAG=<id>`` (a run of ``correction_job`` that ``backfill-assets correct``
or the UI's ``correction_start_job`` starts, ``corrections/actions.py``) walks the same protocol
as a production run, with ``CorrectionPublication`` in place of ``Publication``:

- ``publish`` keeps the passing days in the correction's staged version of each table
  (``Lake.keep_staged``) instead of committing them, and records them in the correction's
  record (``corrections/registry.py``);
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
from dagster._core.definitions.metadata import RawMetadataMapping
from pyspark.sql import DataFrame

from backfill_assets.catalog import (
    ASSET_TABLES,
    CORRECTION_JOB,
    CORRECTION_REASON_TAG,
    CORRECTION_TAG,
    Table,
)
from backfill_assets.corrections import events, lifecycle, recovery, registry
from backfill_assets.lake import Lake, StagedVersion, WriteResult
from backfill_assets.publishing.publication import (
    CheckOutcome,
    Publication,
    ancestor_run_ids,
    partition_dates,
)
from backfill_assets.resources import code_version

CORRECTION_JOB_DESCRIPTION = (
    "The run that builds a correction of staging and fact beside production: every check runs, "
    "nothing is published. Started by correction_start_job (a range, a reason, an optional id) "
    "or backfill-assets correct, which rebuild raw for the range first and tag this run with "
    "the correction. Then correction_diff_job, correction_cutover_job, correction_rollback_job."
)
CORRECTION_JOB_NEEDS_TAGS = (
    f"{CORRECTION_JOB} builds a correction that correction_start_job (or backfill-assets "
    f"correct) started: launched by itself, its run has no {CORRECTION_TAG} and "
    f"{CORRECTION_REASON_TAG} tags. Start the correction with correction_start_job. Nothing was "
    "built."
)


def correction_of(context: dg.AssetExecutionContext) -> tuple[str, str] | None:
    """(id, reason) of the correction the run builds, from its tags; None for a production
    run."""
    tags = context.run.tags
    if CORRECTION_TAG in tags:
        return tags[CORRECTION_TAG], tags.get(CORRECTION_REASON_TAG, "")
    return None


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
        staged = self.lake.staged_version(table.path, self.correction.id)
        if staged is None:
            raise dg.Failure(
                f"correction {self.correction.id} has no staged {table.path}", allow_retries=False
            )
        return self.lake.read_staged(staged, days), staged.base_version

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
        """Keep the staged files of ``days`` in the correction's version of the table."""
        kept = self.lake.keep_staged(staged, days, into=self.correction.id)
        record = self.correction.table(staged.table)
        for d in days:
            record.staged[d.isoformat()] = self.context.run_id
            record.held.pop(d.isoformat(), None)
        self.correction.runs.append(
            {
                "run_id": self.context.run_id,
                "table": staged.table,
                "code_version": staged.commit.code_version,
                "input_versions": dict(staged.commit.input_versions),
                "days": [d.isoformat() for d in days],
            }
        )
        self._widen(days)
        if self.correction.state != registry.State.STAGED:  # its diff no longer describes it
            self.correction.state = registry.State.STAGED
            self.correction.note("staged again", ", ".join(d.isoformat() for d in days))
        registry.save(self.lake.location, self.correction)
        rows = kept.rows_by_partition
        return WriteResult(
            staged.table,
            -1 if kept.base_version is None else kept.base_version,
            {d: rows.get(d, 0) for d in days},
            0,
            1,
        )

    def _widen(self, days: list[date]) -> None:
        self.correction.start = min(self.correction.start, days[0].isoformat())
        self.correction.end = max(self.correction.end, days[-1].isoformat())

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
            " --rebuild, or correction_start_job with this id and rebuild ticked."
        )
        events.report_state(self.context.instance, self.lake.location, self.correction)


def publication_for(context: dg.AssetExecutionContext, lake: Lake) -> Publication:
    """The production protocol, or the correction's when the run builds one (its tags say
    which)."""
    correction = correction_of(context)
    if correction is None:
        if context.job_name == CORRECTION_JOB:
            raise dg.Failure(description=CORRECTION_JOB_NEEDS_TAGS, allow_retries=False)
        return Publication(context, lake)
    return CorrectionPublication(context, lake, *correction)
