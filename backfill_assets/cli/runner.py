"""Execute ranged runs of the code location's job and read back their outcome.

The CLI, the benchmarks and the tests go through here, so every run they start is
a real run of the code location's job in the instance at ``DAGSTER_HOME``: it shows
in the UI and can be re-executed from there.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date

import dagster as dg

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import MONTHLY_ASSETS, RANGE_END, RANGE_START, WORKER_TAG
from backfill_assets.dagster_private import (
    BACKFILL_ID_TAG,
    BACKFILL_TAGS,
    PARENT_RUN_ID_TAG,
    RESUME_RETRY_TAG,
    ROOT_RUN_ID_TAG,
    TAGS_TO_MAYBE_OMIT_ON_RETRY,
    BulkActionStatus,
    SerializableErrorInfo,
    StepFailureData,
)
from backfill_assets.definitions import backfill_job, correction_job, monthly_job
from backfill_assets.publishing.publication import EVENT_PAGE, run_events
from backfill_assets.publishing.run_workers import release_orphaned_runs, worker_identity
from backfill_assets.settings import RunSettings
from backfill_assets.signals import handlers_kept


def quiet() -> dict:
    """The runs' config: the full event log is in the instance (and the UI); the terminal shows
    ``BACKFILL_LOG_LEVEL`` and above (warnings and errors by default)."""
    return {"loggers": {"console": {"config": {"log_level": RunSettings.from_env().log_level}}}}


@dataclass
class RunOutcome:
    plan: RunPlan
    run_id: str
    success: bool
    published: dict[dg.AssetKey, dict[date, int]] = field(default_factory=dict)  # day -> rows
    failed_checks: dict[dg.AssetKey, dict[date, list[str]]] = field(default_factory=dict)
    held: dict[date, list[str]] = field(default_factory=dict)  # why, as the step's failure names it
    warnings: dict[dg.AssetKey, dict[date, list[str]]] = field(
        default_factory=dict
    )  # WARN checks failed
    error: str | None = None


def execute(
    plan: RunPlan,
    instance: dg.DagsterInstance,
    tags: dict[str, str] | None = None,
    correction: bool = False,
) -> RunOutcome:
    """Run ``plan`` as one ranged run of the backfill job (of the correction job when
    ``correction``: ``tags`` then carry the correction's id and reason)."""
    release_orphans(instance)
    run_tags = {
        RANGE_START: plan.start.isoformat(),
        RANGE_END: plan.end.isoformat(),
        WORKER_TAG: worker_identity(),
        **(tags or {}),
    }
    job = (
        correction_job
        if correction
        else monthly_job
        if plan.assets == MONTHLY_ASSETS
        else backfill_job
    )
    # Dagster maps SIGTERM to SIGINT's handler on the way out of a run: put both back.
    with (
        handlers_kept(),
        dg.execute_job(
            dg.reconstructable(job),
            instance=instance,
            asset_selection=list(plan.assets),
            tags=run_tags,
            run_config=quiet(),
            raise_on_error=False,
        ) as result,
    ):
        run_id, success = result.run_id, result.success
    # Read back once the result, which holds every event of the run, is let go.
    return outcome_of_run(instance, plan, run_id, success)


def reexecute_from_failure(instance: dg.DagsterInstance, run_id: str) -> RunOutcome:
    """Re-execute a failed ranged run's failed steps: published days are kept, held ones redone."""
    parent = instance.get_run_by_id(run_id)
    if parent is None:
        raise ValueError(f"no run {run_id!r} in this Dagster instance")
    start, end = parent.tags.get(RANGE_START), parent.tags.get(RANGE_END)
    if not (start and end):
        raise ValueError(f"run {run_id} is not a ranged backfill run")
    plan = RunPlan(
        tuple(sorted(parent.asset_selection or (), key=str)),
        date.fromisoformat(start),
        date.fromisoformat(end),
    )
    job = {j().name: j for j in (correction_job, monthly_job)}.get(parent.job_name, backfill_job)
    # A run launched from the UI's asset graph may hold steps no job of ours runs (the
    # correction-pending checks, reported by the corrections' lifecycle): left out.
    steps = set(job().graph.node_dict)
    failed = dg.ReexecutionOptions.from_failure(run_id, instance).step_selection
    release_orphans(instance)
    with (
        handlers_kept(),
        dg.execute_job(
            dg.reconstructable(job),
            instance=instance,
            reexecution_options=dg.ReexecutionOptions(
                run_id, [key for key in failed if key.split("[")[0] in steps]
            ),
            run_config=quiet(),
            tags=reexecution_tags(instance, parent),
            raise_on_error=False,
        ) as result,
    ):
        run_id, success = result.run_id, result.success
    return outcome_of_run(instance, plan, run_id, success)


def reexecution_tags(instance: dg.DagsterInstance, parent: dg.DagsterRun) -> dict[str, str]:
    """The tags the UI's "Re-execute from failure" gives the run (Dagster's
    ``create_reexecuted_run``), with this process as its worker.

    ``execute_job`` links the run to its parent and root but does not tag it, and the UI and
    ``get_run_group`` find a run group by its ``ROOT_RUN_ID_TAG``. The parent's own tags carry
    over (its range, the command or request that started it), but not its outcome's, nor its
    backfill's once that backfill is finished: the retry would not be counted in it anyway.
    """
    tags = {k: v for k, v in parent.tags.items() if k not in TAGS_TO_MAYBE_OMIT_ON_RETRY}
    backfill_id = parent.tags.get(BACKFILL_ID_TAG)
    backfill = instance.get_backfill(backfill_id) if backfill_id else None
    if backfill is not None and backfill.status == BulkActionStatus.REQUESTED:
        tags.update({k: v for k, v in parent.tags.items() if k in BACKFILL_TAGS})
    return {
        **tags,
        PARENT_RUN_ID_TAG: parent.run_id,
        ROOT_RUN_ID_TAG: parent.root_run_id or parent.run_id,
        RESUME_RETRY_TAG: "true",
        WORKER_TAG: worker_identity(),
    }


def release_orphans(instance: dg.DagsterInstance) -> None:
    """Release the runs a killed process left unfinished (``publishing.run_workers``): they
    would hold the ``spark`` pool's slot, and every run started now would wait for it for ever."""
    for run_id in release_orphaned_runs(instance):
        print(
            f"released run {run_id}: its process is gone (killed?); it is marked failed and its "
            "pool slots are freed",
            file=sys.stderr,
            flush=True,
        )


OUTCOME_EVENTS = {
    dg.DagsterEventType.ASSET_MATERIALIZATION,
    dg.DagsterEventType.ASSET_CHECK_EVALUATION,
    dg.DagsterEventType.STEP_FAILURE,
}


def outcome_of_run(
    instance: dg.DagsterInstance, plan: RunPlan, run_id: str, success: bool, page: int = EVENT_PAGE
) -> RunOutcome:
    """What the run published, held and warned of, from its events in the instance (read ``page``
    at a time, and only the kinds that say so: not its logs or step events)."""
    outcome = RunOutcome(plan, run_id, success)
    published: dict = defaultdict(dict)
    failed: dict = defaultdict(lambda: defaultdict(list))
    warned: dict = defaultdict(lambda: defaultdict(list))
    for record in run_events(instance, run_id, OUTCOME_EVENTS, page):
        event = record.dagster_event
        if event is None:  # not a Dagster event (a log line): run_events asks for none of those
            continue
        if event.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
            mat = event.step_materialization_data.materialization
            if mat.partition is None:  # an unpartitioned asset publishes no day
                continue
            rows = mat.metadata.get("dagster/row_count")
            published[mat.asset_key][date.fromisoformat(mat.partition)] = rows.value if rows else 0
        elif event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            ev = event.asset_check_evaluation_data
            if not ev.passed and ev.partition:
                into = warned if ev.severity == dg.AssetCheckSeverity.WARN else failed
                into[ev.asset_key][date.fromisoformat(ev.partition)].append(ev.check_name)
        elif event.event_type == dg.DagsterEventType.STEP_FAILURE:
            data = event.step_failure_data
            if outcome.error is None:
                outcome.error = _cause(data.error)
            for day, why in _held_partitions(data).items():
                outcome.held.setdefault(date.fromisoformat(day), []).extend(why)
    outcome.published = dict(published)
    outcome.failed_checks = {k: dict(v) for k, v in failed.items()}
    outcome.warnings = {k: dict(v) for k, v in warned.items()}
    return outcome


# What Dagster's step failure is when the retry policy ran out: the step's own error its cause
RETRY_WRAPPERS = frozenset({"RetryRequestedFromPolicy", "RetryRequested"})


def _cause(error: SerializableErrorInfo | None) -> str | None:
    """A failed step's error as a summary names it: what the step raised, not the retry count
    that Dagster's last attempt reports ("Exceeded max_retries of 2")."""
    while error is not None and error.cls_name in RETRY_WRAPPERS and error.cause is not None:
        error = error.cause
    return None if error is None else error.message.strip()


def _held_partitions(data: StepFailureData) -> dict[str, list[str]]:
    """A failed step's ``held_partitions`` metadata (``publishing.fail_if_held``): day -> the
    checks that held it; {} when the step failed for another reason."""
    held = (
        data.user_failure_data.metadata.get("held_partitions") if data.user_failure_data else None
    )
    value = {} if held is None else held.value
    if not isinstance(value, dict) or not all(isinstance(why, list) for why in value.values()):
        raise ValueError(f"a step's held_partitions metadata is not day -> checks: {value!r}")
    return {str(day): [str(check) for check in why] for day, why in value.items()}
