"""``downstream_refresh``: rebuild what sits downstream of the event days whenever they change.

Every change to staging or the fact is a materialization in Dagster, whoever made it: the
late-data sensor's runs, the daily schedule's follow-up, a CLI backfill, a re-execution, and a
correction's cutover or rollback (``corrections/events.py`` reports them). So one comparison of
storage ids finds what is stale, whatever changed it:

- customer LTV is cumulative: a change to staging[D] makes LTV[D .. latest] stale. The request
  is one ranged run from the first stale day to the last day it can build: the latest day
  whose staging is published, or the day before the first that is not;
- a month is stale when a day's fact was published after it (or it was never built) and every
  day of it has its fact published (a month missing days would only be held). The stale months
  are one ranged run of the monthly job from the first to the last;
- the enrichment of a day is stale when its staging was published after it (or it was never
  built), while the segment service is configured: one ranged run from the first stale day to
  the last (the days between cost no request: their customers are cached). These runs are the
  segment client's live lane.

While a run that writes what a request reads (the event days for LTV, the enrichment and the
months) is queued or running, the request waits: LTV is cumulative, and a rebuild now would be
done again after that run, so a backfill of the event days ends in one rebuild, not one per run.

Run keys carry the newest storage id compared, so a tick re-evaluated requests nothing twice,
and a request held by the run it started is not repeated until something changes again. A
change that a queued run of the same step already covers requests nothing: that run reads
what is published when it starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta

import dagster as dg

from backfill_assets.asset_events.materializations import latest_materializations
from backfill_assets.automation.state import run_request
from backfill_assets.catalog import (
    BACKFILL_JOB,
    CUSTOMER_LTV_STEP,
    DOWNSTREAM_SENSOR,
    ENRICH_STEP,
    FCT_CUSTOMER_LTV,
    FCT_DAILY_REVENUE,
    MONTHLY_REVENUE_STEP,
    RANGE_END,
    RANGE_START,
    RPT_MONTHLY_REVENUE,
    STEP_ASSETS,
    STG_ORDERS,
    STG_ORDERS_ENRICHED,
)
from backfill_assets.days import days_of_month
from backfill_assets.defs.automation.wiring import pipeline_sensor
from backfill_assets.defs.partitions import monthly_partitions
from backfill_assets.late_data import Request
from backfill_assets.late_data.stale import first_stale, first_unpublished
from backfill_assets.settings import AutomationSettings, Settings


def ltv_request(
    settings: Settings, staging: dict[date, int], ltv: dict[date, int]
) -> Request | None:
    """LTV from its first stale day to the last day it can build, or None. LTV is cumulative:
    a day can be built when every staging day from the first partition up to it is published,
    so the range ends at the latest published staging day, or the day before the first that is
    not (a run past it would only hold the days after)."""
    if not staging:
        return None
    gap = first_unpublished(settings.start_date, max(staging), staging)
    last = max(staging) if gap is None else gap - timedelta(days=1)
    first = first_stale(settings.start_date, last, staging, ltv)
    if first is None:
        return None
    newest = max(staging.values())
    return Request(
        CUSTOMER_LTV_STEP,
        first,
        last,
        f"{CUSTOMER_LTV_STEP}:{first}..{last}:staging@{newest}",
        f"{STG_ORDERS.to_user_string()} changed from {first} on: "
        f"{FCT_CUSTOMER_LTV.to_user_string()} is stale to {last}",
    )


def month_request(
    settings: Settings, fact: dict[date, int], months: dict[date, int]
) -> Request | None:
    """The complete months whose fact changed after they were built (or that never were), as
    one range, or None."""
    last = monthly_partitions(settings).get_last_partition_key()
    stale, newest = [], 0
    for key in monthly_partitions(settings).get_partition_keys() if last else []:
        month = date.fromisoformat(key)
        days = days_of_month(month, settings.start_date)
        if not days or any(d not in fact for d in days):
            continue
        changed = max(fact[d] for d in days)
        if month not in months or months[month] < changed:
            stale.append(month)
            newest = max(newest, changed)
    if not stale:
        return None
    first, last_month = stale[0], stale[-1]
    return Request(
        MONTHLY_REVENUE_STEP,
        first,
        last_month,
        f"{MONTHLY_REVENUE_STEP}:{first}..{last_month}:fact@{newest}",
        f"{FCT_DAILY_REVENUE.to_user_string()} changed in {len(stale)} month(s): "
        f"{', '.join(f'{m:%Y-%m}' for m in stale)}",
    )


def enrich_request(
    settings: Settings, staging: dict[date, int], enriched: dict[date, int]
) -> Request | None:
    """The enrichment from its first stale day to its last, or None (always None while the
    segment service is not configured: the days could only be held)."""
    if settings.segments is None:
        return None
    stale = sorted(
        d for d, changed in staging.items() if d not in enriched or enriched[d] < changed
    )
    if not stale:
        return None
    first, last = stale[0], stale[-1]
    newest = max(staging[d] for d in stale)
    return Request(
        ENRICH_STEP,
        first,
        last,
        f"{ENRICH_STEP}:{first}..{last}:staging@{newest}",
        f"{STG_ORDERS.to_user_string()} changed on {len(stale)} day(s) from {first} on: "
        f"{STG_ORDERS_ENRICHED.to_user_string()} is stale",
    )


def stale_downstream(settings: Settings, instance: dg.DagsterInstance) -> list[Request]:
    """The ranged runs that bring LTV and the monthly report up to date with the event days."""

    def latest(key: dg.AssetKey) -> dict[date, int]:
        return latest_materializations(instance, key)

    staging, fact = latest(STG_ORDERS), latest(FCT_DAILY_REVENUE)
    requests = [
        ltv_request(settings, staging, latest(FCT_CUSTOMER_LTV)),
        month_request(settings, fact, latest(RPT_MONTHLY_REVENUE)),
        enrich_request(settings, staging, latest(STG_ORDERS_ENRICHED)),
    ]
    return [r for r in requests if r is not None]


def queued_run_covers(in_flight: Sequence[dg.DagsterRun], request: Request) -> bool:
    """Whether a run of the request's step over a range that holds the request's is still
    queued: it has read nothing yet, so it will build from what is published when it starts,
    and another run of the same days would only repeat it."""
    assets = set(STEP_ASSETS[request.step])
    return any(
        run.status in (dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED)
        and set(run.asset_selection or ()) == assets
        and run.tags.get(RANGE_START, "9999") <= request.start.isoformat()
        and run.tags.get(RANGE_END, "") >= request.end.isoformat()
        for run in in_flight
    )


# What each request reads, whose writers it waits for.
UPSTREAM = {
    CUSTOMER_LTV_STEP: STG_ORDERS,
    ENRICH_STEP: STG_ORDERS,
    MONTHLY_REVENUE_STEP: FCT_DAILY_REVENUE,
}
IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def upstream_in_flight(in_flight: Sequence[dg.DagsterRun]) -> set[dg.AssetKey]:
    """The production assets that a queued or running run materializes: its selection, or
    every asset of the backfill job when it selected none. A correction's run writes beside
    production, and the maintenance job no asset: neither counts."""
    writing: set[dg.AssetKey] = set()
    for run in in_flight:
        if run.job_name == BACKFILL_JOB:
            writing |= set(run.asset_selection or UPSTREAM.values())
    return writing


def build_downstream_sensor(
    settings: Settings, auto: AutomationSettings, jobs: list
) -> dg.SensorDefinition:
    def downstream_refresh(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        """Whenever staging or the daily fact changes (late data, the daily refresh, a
        backfill, a correction's cutover or rollback), requests fct_customer_ltv from the first
        changed day to the latest as one ranged run, and rpt_monthly_revenue for every complete
        month the change touches as one ranged run, and stg_orders_enriched over the changed
        days when the segment service is configured. On by default. Run keys make a re-evaluated
        tick request nothing twice."""
        stale = stale_downstream(settings, context.instance)
        in_flight = (
            context.instance.get_runs(filters=dg.RunsFilter(statuses=IN_FLIGHT)) if stale else []
        )
        writing = upstream_in_flight(in_flight)
        waiting = [r for r in stale if UPSTREAM[r.step] in writing]
        requests = [r for r in stale if r not in waiting and not queued_run_covers(in_flight, r)]
        if not requests:
            reason = "customer LTV and the monthly report are up to date"
            if waiting:
                reason = "waiting for the runs that write " + ", ".join(
                    sorted({UPSTREAM[r.step].to_user_string() for r in waiting})
                )
            return dg.SensorResult(skip_reason=reason)
        return dg.SensorResult(run_requests=[run_request(r) for r in requests])

    return pipeline_sensor(
        auto, downstream_refresh, DOWNSTREAM_SENSOR, dg.DefaultSensorStatus.RUNNING, jobs
    )
