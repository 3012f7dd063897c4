"""``rpt_monthly_revenue``: per month and country, the daily fact summed over the month.

Monthly partitions (keyed by the month's first day) over the daily fact through Dagster's
time-window mapping. A month is built only when every day of it (every daily partition in it)
has its fact published; otherwise it is held, and the failure names the missing days. A range
of months is one run and one Spark job. A month whose fact days were republished while it was
built is held, naming them, and the next run builds it again. Each published month records,
beside its totals, how they changed against the version it replaced (``orders_delta``,
``paid_orders_delta``, ``revenue_usd_delta``, ``replaced_delta_version``).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date

import dagster as dg

from backfill_assets.asset_events.fact_metadata import fact_metadata
from backfill_assets.asset_events.lineage import commit_info, write_metadata
from backfill_assets.catalog import (
    FACT_TABLE,
    FCT_DAILY_REVENUE,
    MONTHLY_REVENUE_TABLE,
    RPT_MONTHLY_REVENUE,
)
from backfill_assets.days import days_of_month, month_of
from backfill_assets.downstream.downstream_outcomes import monthly_outcomes
from backfill_assets.lake import Lake
from backfill_assets.publishing.publication import Publication
from backfill_assets.settings import Settings
from backfill_assets.transforms.ltv import monthly_revenue
from backfill_assets.transforms.schemas import MONTHLY_REVENUE
from backfill_assets.transforms.totals import MONTHLY_FIELDS, ZERO, fact_totals, totals_by

MAX_NAMED = 10


def ready_months(
    step: Publication, settings: Settings, months: list[date]
) -> dict[date, list[date]]:
    """The months whose every day has its fact published, with those days; the others held,
    naming the missing days."""
    published = step.published_days(FCT_DAILY_REVENUE)
    ready = {}
    for month in months:
        days = days_of_month(month, settings.start_date)
        missing = [d for d in days if d not in published]
        if missing:
            named = ", ".join(d.isoformat() for d in missing[:MAX_NAMED])
            more = f" (+{len(missing) - MAX_NAMED} more)" if len(missing) > MAX_NAMED else ""
            step.hold(month, f"{FCT_DAILY_REVENUE.to_user_string()} not published: {named}{more}")
        elif days:
            ready[month] = days
    return ready


def monthly_sums(by_day: dict[date, dict]) -> dict[date, dict]:
    """Daily totals summed per month (the check's expected side)."""
    months: dict[date, dict] = defaultdict(lambda: {k: ZERO[k] for k in MONTHLY_FIELDS})
    for day, totals in by_day.items():
        for k in MONTHLY_FIELDS:
            months[month_of(day)][k] += totals[k]
    return dict(months)


def previous_months(lake: Lake, months: list[date]) -> tuple[dict[date, dict], int | None]:
    """The totals of the version about to be replaced (empty on first build)."""
    table = MONTHLY_REVENUE_TABLE
    if not lake.exists(table.path):
        return {}, None
    previous, version = lake.read_partitions(table.path, table.partition_column, months)
    return totals_by(previous, table.partition_column, MONTHLY_FIELDS), version


def unmoved_months(
    step: Publication, ready: dict[date, list[date]], fact_version: int | None
) -> list[date]:
    """The months of ``ready`` none of whose fact days a commit after ``fact_version`` changed;
    the others held, naming those days: they were built from a fact that is no longer the
    published one, as the fact holds a day whose staging moved while it was built."""
    days = [d for m in ready for d in ready[m]]
    moved = step.lake.changed_since(
        FACT_TABLE.path, FACT_TABLE.partition_column, fact_version, days
    )
    good = []
    for month, month_days in sorted(ready.items()):
        changed = sorted(d for d in month_days if d in moved)
        if changed:
            named = ", ".join(d.isoformat() for d in changed[:MAX_NAMED])
            step.hold(
                month,
                f"{FCT_DAILY_REVENUE.to_user_string()} republished while it was built: {named}",
            )
        else:
            good.append(month)
    return good


def publish_months(step: Publication, settings: Settings, months: list[date]) -> None:
    ready = ready_months(step, settings, months)
    if not ready:
        return
    months = sorted(ready)
    fact, fact_version = step.read_published(
        FACT_TABLE, [d for m in months for d in ready[m]], None
    )
    inputs = {FACT_TABLE.path: fact_version}
    staged = step.stage(
        MONTHLY_REVENUE_TABLE,
        monthly_revenue(fact),
        months,
        commit_info(step.context, RPT_MONTHLY_REVENUE, months, inputs),
    )
    expected = monthly_sums(fact_totals(fact))
    actual = totals_by(
        step.read_staged(staged), MONTHLY_REVENUE_TABLE.partition_column, MONTHLY_FIELDS
    )
    audited = step.audit(months, monthly_outcomes(months, expected, actual))
    good = unmoved_months(step, {m: ready[m] for m in audited}, fact_version)
    if not good:
        return
    before, replaced_version = previous_months(step.lake, good)
    write = step.publish(staged, good)
    for m in good:
        step.published(
            RPT_MONTHLY_REVENUE,
            m,
            {
                **write_metadata(write, m, inputs, MONTHLY_REVENUE),
                **fact_metadata(actual.get(m, {}), before.get(m), replaced_version),
                "days": dg.MetadataValue.int(len(ready[m])),
            },
        )
