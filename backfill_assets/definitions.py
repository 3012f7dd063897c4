"""The one Definitions object: layers, checks, jobs, resources, schedules and sensors."""

from __future__ import annotations

import functools

import dagster as dg

from backfill_assets.catalog import (
    BACKFILL_JOB,
    CORRECTION_JOB,
    EVENT_DAYS_STEP,
    MONTHLY_ASSETS,
    MONTHLY_JOB,
    STEP_ASSETS,
)
from backfill_assets.corrections.pending import CHECK_KEYS
from backfill_assets.defs.automation import build_automation
from backfill_assets.defs.corrections.assets import CORRECTIONS_SPEC
from backfill_assets.defs.corrections.checks import correction_pending_checks
from backfill_assets.defs.corrections.jobs import CORRECTION_ACTION_JOBS
from backfill_assets.defs.corrections.ui_requests import (
    build_correction_request_sensor,
    build_correction_start_job,
)
from backfill_assets.defs.downstream.assets import (
    build_customer_ltv_assets,
    build_monthly_revenue_assets,
)
from backfill_assets.defs.enrichment.assets import build_enrichment_assets
from backfill_assets.defs.event_days.assets import build_event_day_assets
from backfill_assets.defs.raw.assets import build_raw_assets
from backfill_assets.publishing.correcting import CORRECTION_JOB_DESCRIPTION
from backfill_assets.resources import build_resources
from backfill_assets.settings import Settings, environment_key

# The correction-pending checks are reported by the corrections' lifecycle, never run by a job.
NOT_IN_JOBS = dg.AssetSelection.checks(*CHECK_KEYS)


def build_jobs() -> tuple[dg.UnresolvedAssetJobDefinition, ...]:
    """The backfill job, the monthly report's job and the correction job."""
    return (
        dg.define_asset_job(
            BACKFILL_JOB,
            selection=dg.AssetSelection.all()
            - dg.AssetSelection.assets(*MONTHLY_ASSETS)
            - NOT_IN_JOBS,
            description="Any daily layer over any partition range, as one run per range. From "
            "Lineage: select assets, Materialize selected, type a range such as "
            "[2026-11-01...2026-11-05]. A failed run names its held days: fix their inputs "
            "and re-execute it from failure; only the held days are rebuilt.",
        ),
        dg.define_asset_job(
            MONTHLY_JOB,
            selection=dg.AssetSelection.assets(*MONTHLY_ASSETS) - NOT_IN_JOBS,
            description="The monthly report over any range of months, as one run per range "
            "(Materialize, then a range such as [2026-09-01...2026-10-01]). A month waits "
            "for every day of its daily fact.",
        ),
        dg.define_asset_job(
            CORRECTION_JOB,
            selection=dg.AssetSelection.assets(*STEP_ASSETS[EVENT_DAYS_STEP]) - NOT_IN_JOBS,
            description=CORRECTION_JOB_DESCRIPTION,
        ),
    )


def build_definitions(settings: Settings) -> dg.Definitions:
    assets = (
        build_raw_assets(settings)
        + build_event_day_assets(settings)
        + build_enrichment_assets(settings)
        + build_customer_ltv_assets(settings)
        + build_monthly_revenue_assets(settings)
        + [CORRECTIONS_SPEC]
    )
    jobs = {job.name: job for job in build_jobs()}
    # the jobs downstream_refresh requests runs of: LTV and enrichment, and the monthly report
    automation = build_automation(settings, downstream_jobs=[jobs[BACKFILL_JOB], jobs[MONTHLY_JOB]])
    requests = build_correction_request_sensor(
        settings, automation.settings, [jobs[BACKFILL_JOB], jobs[CORRECTION_JOB]]
    )
    return dg.Definitions(
        assets=assets,
        asset_checks=[correction_pending_checks],
        jobs=[*jobs.values(), *CORRECTION_ACTION_JOBS, build_correction_start_job(settings)],
        resources=build_resources(settings),
        sensors=[*automation.sensors, requests],
        schedules=automation.schedules,
        # One process per run: a ranged run shares one Spark session across its steps.
        executor=dg.in_process_executor,
    )


@dg.definitions
def defs() -> dg.Definitions:
    return _definitions(Settings.from_env(), environment_key())


@functools.lru_cache(maxsize=4)
def _definitions(settings: Settings, environment: frozenset[tuple[str, str]]) -> dg.Definitions:
    """The definitions of these settings, built once per environment they are read from: each
    run a process executes reconstructs its job from ``defs()`` (a test process runs hundreds)."""
    return build_definitions(settings)


def backfill_job() -> dg.JobDefinition:
    """The job the CLI executes; a module-level function so Dagster can reconstruct it."""
    return defs().resolve_job_def(BACKFILL_JOB)


def monthly_job() -> dg.JobDefinition:
    """The job of the monthly report (reconstructable, like ``backfill_job``)."""
    return defs().resolve_job_def(MONTHLY_JOB)


def correction_job() -> dg.JobDefinition:
    """The job ``backfill-assets correct`` executes (reconstructable, like ``backfill_job``)."""
    return defs().resolve_job_def(CORRECTION_JOB)
