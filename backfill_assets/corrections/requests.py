"""A correction requested from the Dagster UI, carried out as ``backfill-assets correct`` carries
it out: raw over the range first (the landing's restated files, published like any raw run),
then the correction's build of staging and fact (``correction_job``), once every raw run
succeeded.

A request is a successful run of ``correction_start_job``: its form was checked (``check``, the
checks ``correct`` makes too, before anything runs) and its run tagged with the correction's
id, reason, range and rebuild box (``Request``). The ``correction_requests`` sensor asks, for
each request, for what comes next (``next_step``), judging by the runs that carry the request's
run id as their plan (``PLAN_TAG``, as a CLI backfill's runs carry their backfill's id):

- a raw run of the range, as ``correct`` makes them (``plan_backfill``), not on record yet:
  that run (all of them at first; the rest of them after a tick cut short);
- a raw run not ended, or failed (until it is re-executed from failure, which keeps its tags):
  nothing, and the sensor says which;
- every raw run succeeded: the correction's build, a run of ``correction_job`` with the form
  (so its checks run again: an id taken meanwhile is refused there, nothing built);
- the build on record: the request is done.

Run keys carry the request's run id, so the daemon never launches a step of a request twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date

import dagster as dg

from backfill_assets.backfill_plan import (
    RunPlan,
    gone_raw_partitions,
    plan_backfill,
    raw_run_tags,
    would_wipe,
)
from backfill_assets.catalog import (
    BACKFILL_JOB,
    CORRECTION_JOB,
    CORRECTION_RANGE_TAG,
    CORRECTION_REASON_TAG,
    CORRECTION_REBUILD_TAG,
    CORRECTION_START_JOB,
    CORRECTION_TAG,
    EVENT_DAYS_OP,
    EVENT_DAYS_STEP,
    PLAN_TAG,
    RANGE_END,
    RANGE_START,
    STEP_ASSETS,
    WHY_TAG,
)
from backfill_assets.corrections import lifecycle, registry
from backfill_assets.corrections.registry import CorrectionError
from backfill_assets.lake import Lake
from backfill_assets.settings import Settings

RECENT = 50  # the newest requests the sensor looks at each tick
ENDED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


@dataclass(frozen=True)
class Request:
    """A correction requested by a run of ``correction_start_job`` (``run_id``)."""

    run_id: str
    correction_id: str
    reason: str
    start: date
    end: date
    rebuild: bool

    def tags(self) -> dict[str, str]:
        """The tags of the request's own run, from which ``of_run`` reads it back."""
        return {
            CORRECTION_TAG: self.correction_id,
            CORRECTION_REASON_TAG: self.reason,
            CORRECTION_RANGE_TAG: f"{self.start}..{self.end}",
            CORRECTION_REBUILD_TAG: str(self.rebuild).lower(),
        }

    @classmethod
    def of_run(cls, run: dg.DagsterRun) -> Request | None:
        tags = run.tags
        if not {CORRECTION_TAG, CORRECTION_RANGE_TAG} <= tags.keys():
            return None  # refused before it was tagged
        first, last = (date.fromisoformat(d) for d in tags[CORRECTION_RANGE_TAG].split(".."))
        return cls(
            run.run_id,
            tags[CORRECTION_TAG],
            tags.get(CORRECTION_REASON_TAG, ""),
            first,
            last,
            tags.get(CORRECTION_REBUILD_TAG) == "true",
        )


def check(
    settings: Settings, correction_id: str, reason: str, start: date, end: date, rebuild: bool
) -> str:
    """The reason, stripped, once a correction ``correction_id`` of [start, end] may start;
    else a CorrectionError saying why, before anything is built: an empty reason, an id taken
    (unless ``rebuild``) or unknown (with ``rebuild``), a range outside the partitions or one
    production never published, raw partitions whose landing files are gone."""
    reason = registry.check_reason(reason)
    registry.check_start(settings.lake_dir, correction_id, rebuild)
    try:
        plans = plan_backfill(settings, start, end)
    except ValueError as exc:
        raise CorrectionError(str(exc)) from None
    lifecycle.require_production(Lake(settings.lake_dir, None, engine="delta-rs"), start, end)
    wiped = would_wipe(plans, gone_raw_partitions(settings, start, end))
    if wiped:
        raise CorrectionError(
            "these raw_orders partitions hold rows but their landing files are gone, and "
            "rebuilding them would publish emptiness: " + ", ".join(map(str, wiped))
        )
    return reason


def recent(instance: dg.DagsterInstance) -> list[Request]:
    """The newest requests: successful runs of ``correction_start_job``."""
    runs = instance.get_runs(
        filters=dg.RunsFilter(
            job_name=CORRECTION_START_JOB, statuses=[dg.DagsterRunStatus.SUCCESS]
        ),
        limit=RECENT,
    )
    return [r for r in map(Request.of_run, runs) if r is not None]


@dataclass
class Step:
    """What a request needs now: runs to launch, or why it waits (or that it is done)."""

    runs: list[dg.RunRequest] = field(default_factory=list)
    note: str = ""


def next_step(instance: dg.DagsterInstance, settings: Settings, request: Request) -> Step:
    cid = request.correction_id
    mine = instance.get_runs(filters=dg.RunsFilter(tags={PLAN_TAG: request.run_id}))
    built = [r for r in mine if r.job_name == CORRECTION_JOB]
    if built:  # the newest first
        return Step(
            note=f"correction {cid}: its build, run {_ids(built[:1])}, is {_status(built[0])}"
        )
    try:
        raw = raw_requests(settings, request)
    except ValueError as exc:  # the range is no longer within the partitions
        return Step(note=f"correction {cid}: cannot run raw for it: {exc}")
    latest: dict[tuple, dg.DagsterRun] = {}
    for run in mine:  # newest first: the latest attempt of each raw run counts
        latest.setdefault(_key(run.asset_selection, run.tags), run)
    # Every raw run of the plan, not only some: a tick cut short may have launched a part.
    missing = [r for r in raw if _key(r.asset_selection, r.tags) not in latest]
    if missing:
        return Step(runs=missing)
    waiting = [r for r in latest.values() if r.status not in ENDED]
    failed = [r for r in latest.values() if r.status in ENDED - {dg.DagsterRunStatus.SUCCESS}]
    if waiting:
        return Step(note=f"correction {cid}: waiting for raw run(s) {_ids(waiting)}")
    if failed:
        return Step(
            note=f"correction {cid}: raw run(s) {_ids(failed)} failed; re-execute them from "
            "failure once their inputs are fixed, and the correction is built after"
        )
    return Step(runs=[build_request(request)])


def raw_requests(settings: Settings, request: Request) -> list[dg.RunRequest]:
    """The raw runs ``correct`` makes for the range, tagged with the request as their plan."""
    plans = plan_backfill(settings, request.start, request.end)[:-1]
    _, tags = raw_run_tags(settings, plans, plan_id=request.run_id)
    return [
        dg.RunRequest(
            run_key=f"{request.run_id}:raw:{plan.assets[0].to_user_string()}:{plan.start}",
            job_name=BACKFILL_JOB,
            asset_selection=list(plan.assets),
            tags={**_ranged(plan, request, "raw first"), **tags.get(plan, {})},
        )
        for plan in plans
    ]


def build_request(request: Request) -> dg.RunRequest:
    """The correction's build over its range: ``correction_job`` with the request's form."""
    plan = RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], request.start, request.end)
    form = {
        "correction_id": request.correction_id,
        "reason": request.reason,
        "rebuild": request.rebuild,
    }
    return dg.RunRequest(
        run_key=f"{request.run_id}:build",
        job_name=CORRECTION_JOB,
        asset_selection=list(plan.assets),
        run_config={"ops": {EVENT_DAYS_OP: {"config": form}}},
        tags={**_ranged(plan, request, "its build"), PLAN_TAG: request.run_id},
    )


def _key(
    assets: Iterable[dg.AssetKey] | None, tags: Mapping[str, str]
) -> tuple[tuple[str, ...], str | None]:
    """A raw run's identity within its request: its assets and its range's first day."""
    return tuple(sorted(map(str, assets or ()))), tags.get(RANGE_START)


def _ranged(plan: RunPlan, request: Request, what: str) -> dict[str, str]:
    return {
        RANGE_START: plan.start.isoformat(),
        RANGE_END: plan.end.isoformat(),
        WHY_TAG: f"correction {request.correction_id} requested in run {request.run_id[:8]}: "
        + what,
    }


def _status(run: dg.DagsterRun) -> str:
    return run.status.value.lower().replace("_", " ")


def _ids(runs: list[dg.DagsterRun]) -> str:
    return ", ".join(r.run_id[:8] for r in runs)
