"""Per-partition write-audit-publish inside a ranged run: the protocol every asset step walks.

Dagster, left alone, attributes a ranged run's check results to no partition and
fails every downstream partition when one day fails a blocking check. Here each
asset step computes its whole range in one Spark job, stages it in the lake where
no reader sees it, audits every day against what was staged, publishes only the
days that pass, and reports exactly those days to Dagster. Nothing is visible to a
reader of a table before its checks passed. ``Publication`` is that protocol, which
the asset bodies call:

- ``days_to_build``: the step's days, less those an earlier attempt of this run published;
- ``stage`` / ``read_staged``: write the range beside the table; read back what was written;
- ``audit``: one ``AssetCheckEvaluation`` per (check, partition), blocking; returns the
  days that passed and remembers the held ones;
- ``publish``: one commit per table swapping in the staged files of the passing days;
- ``published``: one ``AssetMaterialization`` per published partition (specs are
  ``skippable``);
- ``finish``: the step's check outputs closed, then the step fails naming the held days,
  without retries, so the run ends failed and "re-execute from failure" redoes only them;
- leaving the ``with`` block discards what was staged and not published; what a step of an
  earlier run could not discard (its cleanup failed, or it was killed) is discarded by the
  next step that stages into the same table, once Dagster says that run is over.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Self

import dagster as dg
from pyspark.sql import DataFrame

from backfill_assets import signals
from backfill_assets.asset_events.event_times import Pace, paced
from backfill_assets.catalog import Table
from backfill_assets.dagster_private import RawMetadataMapping
from backfill_assets.lake import CommitInfo, Lake, StagedVersion, WriteResult
from backfill_assets.lake.manifests import new_id
from backfill_assets.publishing.run_workers import record_worker

STEP_STAGE_PREFIX = "step-"  # the staged versions of asset steps, which a later step may close


@dataclass(frozen=True)
class CheckOutcome:
    """The result of one check on one partition, with expected and actual values. A
    non-blocking check that fails warns (severity WARN) and holds nothing."""

    asset_key: dg.AssetKey
    check_name: str
    partition: date
    passed: bool
    metadata: RawMetadataMapping = field(default_factory=dict)
    blocking: bool = True

    def evaluation(self) -> dg.AssetCheckEvaluation:
        return dg.AssetCheckEvaluation(
            asset_key=self.asset_key,
            check_name=self.check_name,
            passed=self.passed,
            partition=self.partition.isoformat(),
            blocking=self.blocking,
            severity=dg.AssetCheckSeverity.ERROR if self.blocking else dg.AssetCheckSeverity.WARN,
            metadata=dict(self.metadata),
        )


def partition_dates(context: dg.AssetExecutionContext) -> list[date]:
    return sorted(date.fromisoformat(key) for key in context.partition_keys)


def ancestor_run_ids(context: dg.AssetExecutionContext) -> list[str]:
    """The runs this one re-executes, parent first."""
    ids, run = [], context.run
    while run is not None and run.parent_run_id:
        ids.append(run.parent_run_id)
        run = context.instance.get_run_by_id(run.parent_run_id)
    return ids


EVENT_PAGE = 1000


def run_events(
    instance: dg.DagsterInstance,
    run_id: str,
    of_type: set[dg.DagsterEventType],
    page: int = EVENT_PAGE,
) -> Iterator[dg.EventLogEntry]:
    """The run's events of these types, oldest first, read ``page`` at a time: a year's ranged
    run stores thousands of them, and a reader needs one at a time, not all of them at once."""
    cursor = None
    while True:
        batch = instance.get_records_for_run(run_id, cursor=cursor, of_type=of_type, limit=page)
        for record in batch.records:
            yield record.event_log_entry
        if not batch.has_more:
            return
        cursor = batch.cursor


def published_by_earlier_attempts(
    context: dg.AssetExecutionContext, asset_key: dg.AssetKey
) -> set[date]:
    """Partitions of ``asset_key`` already published by the runs this one re-executes.

    A re-execution from failure of a ranged run gets the whole range again; the
    days its ancestors published stay as they are and only the held days are redone.
    """
    published: set[date] = set()
    for run_id in ancestor_run_ids(context):
        for record in run_events(
            context.instance, run_id, {dg.DagsterEventType.ASSET_MATERIALIZATION}
        ):
            mat = record.asset_materialization
            if mat is not None and mat.asset_key == asset_key and mat.partition:
                published.add(date.fromisoformat(mat.partition))
    return published


def held_days(outcomes: Iterable[CheckOutcome]) -> dict[date, list[str]]:
    """Days that failed at least one blocking check, with the failed checks as ``asset.check``
    (a failed warning check holds nothing)."""
    held: dict[date, list[str]] = {}
    for outcome in outcomes:
        if not outcome.passed and outcome.blocking:
            name = f"{outcome.asset_key.to_user_string()}.{outcome.check_name}"
            held.setdefault(outcome.partition, []).append(name)
    return held


def report(
    context: dg.AssetExecutionContext, outcomes: Iterable[CheckOutcome]
) -> Iterator[dg.AssetCheckEvaluation]:
    """One evaluation per selected check and partition (unselected checks still gate)."""
    selected = context.selected_asset_check_keys
    for outcome in outcomes:
        if dg.AssetCheckKey(outcome.asset_key, outcome.check_name) in selected:
            yield outcome.evaluation()


def close_check_outputs(context: dg.AssetExecutionContext) -> Iterator[dg.Output]:
    """Satisfy the step's check outputs; the evaluations themselves were yielded per partition."""
    selected = context.selected_asset_check_keys
    for output_name, spec in context.assets_def.check_specs_by_output_name.items():
        if spec.key in selected:
            yield dg.Output(None, output_name=output_name)


def fail_if_held(held: Mapping[date, list[str]]) -> None:
    """End the step failed, naming each held day and the checks it failed; never retried."""
    if not held:
        return
    lines = [
        f"{day.isoformat()}: {', '.join(sorted(set(checks)))}"
        for day, checks in sorted(held.items())
    ]
    raise dg.Failure(
        description=(
            f"{len(held)} partition(s) held back, the rest of the range was published. "
            "Failed checks:\n" + "\n".join(lines)
        ),
        metadata={
            "held_partitions": dg.MetadataValue.json({d.isoformat(): c for d, c in held.items()})
        },
        allow_retries=False,
    )


class Publication:
    """One asset step's walk through the write-audit-publish protocol (see the module
    docstring). A context manager: on leaving it, every version the step staged is
    discarded, so the files of held days (or of a step that raised) never linger."""

    publishes = True  # False for a correction's run, which keeps what passed staged

    def __init__(self, context: dg.AssetExecutionContext, lake: Lake) -> None:
        record_worker(context)  # a run whose process dies can then be released (run_workers)
        self.context = context
        self.lake = lake
        self.held: dict[date, list[str]] = {}
        self._events: list = []
        self._pace = Pace()
        self._staged: list[StagedVersion] = []
        self._tables_seen: set[str] = set()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        """Discard every version the step staged: each one tried, the first failure raised."""
        staged, self._staged = self._staged, []
        failures = []
        for version in staged:
            try:
                self.lake.staging.discard(version)
            except Exception as error:
                failures.append(error)
        if failures:
            raise failures[0]

    def close_abandoned(self, table: Table) -> list[str]:
        """Discard the staged versions of ``table`` that steps of finished runs, or earlier
        attempts of this step, left open (their cleanup failed, or their process died); their
        ids. A correction's gathered version (not a step's) and other runs' still going stay."""
        closed = []
        for staged in self.lake.staging.versions(table.path):
            if not staged.id.startswith(STEP_STAGE_PREFIX):
                continue
            # This run's own: an earlier attempt of this step (one step writes a table).
            run = self.context.instance.get_run_by_id(staged.commit.run_id)
            # A run this instance does not know (another instance's lake user) is left to expiry.
            if staged.commit.run_id == self.context.run_id or (run is not None and run.is_finished):
                self.lake.staging.discard(staged)
                closed.append(staged.id)
        if closed:
            self.context.log.info(
                f"{table.path}: discarded staged versions {closed} left open by finished runs"
            )
        return closed

    def days_to_build(self, asset_key: dg.AssetKey, days: list[date] | None = None) -> list[date]:
        """``days`` (default: the step's partitions) less those earlier attempts published."""
        done = published_by_earlier_attempts(self.context, asset_key)
        return [
            d for d in (partition_dates(self.context) if days is None else days) if d not in done
        ]

    def stage(
        self,
        table: Table,
        df: DataFrame,
        days: list[date],
        commit: CommitInfo,
        spread: int = 1,
        in_day_blocks: bool = False,
        nulls_apart: str | None = None,
    ) -> StagedVersion:
        """Write ``df``'s rows of ``days`` beside ``table``'s data, invisible to its readers
        (each day from up to ``spread`` tasks: the skew mitigation, ``transforms.skew``;
        ``in_day_blocks``: the rows arrive by blocks of days already; ``nulls_apart``: a
        column's NULL rows in row groups of their own; ``write_files``)."""
        if table.path not in self._tables_seen:
            self._tables_seen.add(table.path)
            self.close_abandoned(table)
        staged = self.lake.staging.stage(
            table.path,
            df,
            table.partition_column,
            days,
            commit,
            stage_id=f"{STEP_STAGE_PREFIX}{new_id()}",
            spread=spread,
            in_day_blocks=in_day_blocks,
            nulls_apart=nulls_apart,
        )
        self._staged.append(staged)
        return staged

    def published_days(self, asset_key: dg.AssetKey) -> set[date]:
        """The partitions of ``asset_key`` published now, per Dagster."""
        return {
            date.fromisoformat(k)
            for k in self.context.instance.get_materialized_partitions(asset_key)
        }

    def read_published(
        self, table: Table, days: list[date], version: int | None
    ) -> tuple[DataFrame, int | None]:
        """``table``'s published rows of ``days`` at ``version`` (latest when None), and the
        version read: what a downstream layer builds from."""
        return self.lake.read_partitions(table.path, table.partition_column, days, version)

    def read_staged(self, staged: StagedVersion) -> DataFrame:
        """What would be published: the checks read this, not the DataFrame that was written."""
        return self.lake.staging.read(staged)

    def audit(self, days: list[date], outcomes: list[CheckOutcome]) -> list[date]:
        """Report every outcome; the days of ``days`` that passed every check of ``outcomes``, in
        order (a day held earlier in the step may pass these: its fact is rebuilt from the
        staging that stays published)."""
        self._events += self.check_events(outcomes)
        failed = held_days(outcomes)
        for day, checks in failed.items():
            self.hold(day, *checks)
        return [d for d in days if d not in failed]

    def check_events(self, outcomes: list[CheckOutcome]) -> list:
        """What Dagster records of the outcomes: one evaluation per selected check and day."""
        return list(report(self.context, outcomes))

    def hold(self, day: date, *reasons: str) -> None:
        self.held.setdefault(day, []).extend(reasons)

    def publish(self, staged: StagedVersion, days: list[date]) -> WriteResult:
        """One commit that makes the staged files of ``days`` (audited, passed) the table's;
        none after a SIGINT or SIGTERM (``signals.check``)."""
        signals.check()
        return self.lake.staging.publish(staged, days)

    def published(self, asset_key: dg.AssetKey, day: date, metadata: RawMetadataMapping) -> None:
        self._events.append(
            dg.AssetMaterialization(
                asset_key=asset_key, partition=day.isoformat(), metadata=dict(metadata)
            )
        )

    def drain(self) -> Iterator:
        """The evaluations and materializations so far, for Dagster to record now."""
        events, self._events = self._events, []
        yield from paced(events, self._pace)

    def finish(self) -> Iterator:
        """The other events, the check outputs, then ``end``: a failure naming each held day."""
        yield from self.drain()
        yield from close_check_outputs(self.context)
        self.end()

    def end(self) -> None:
        fail_if_held(self.held)
