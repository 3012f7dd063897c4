"""The definitions of the tables downstream of the daily fact: ``fct_customer_ltv`` and
``rpt_monthly_revenue``. Their builds: ``downstream/customer_ltv.py``,
``downstream/monthly_revenue.py``."""

from __future__ import annotations

from datetime import date
from typing import Any

import dagster as dg

from backfill_assets.catalog import (
    CUSTOMER_LTV_TABLE,
    FCT_CUSTOMER_LTV,
    FCT_DAILY_REVENUE,
    MONTHLY_REVENUE_TABLE,
    RPT_MONTHLY_REVENUE,
    STG_ORDERS,
)
from backfill_assets.days import days_between
from backfill_assets.defs.downstream.checks import LTV_CHECKS, MONTHLY_CHECKS
from backfill_assets.defs.partitions import daily_partitions, monthly_partitions, previous_day
from backfill_assets.downstream.customer_ltv import publish_ltv
from backfill_assets.downstream.monthly_revenue import publish_months
from backfill_assets.publishing.publication import Publication, partition_dates
from backfill_assets.publishing.steps import publishing_step
from backfill_assets.settings import Settings


def build_customer_ltv_assets(settings: Settings) -> list[dg.AssetsDefinition]:
    def build(step: Publication, todo: list[date], resources: Any) -> None:
        # from the first day an earlier attempt did not publish to the range's end
        publish_ltv(step, settings, days_between(todo[0], partition_dates(step.context)[-1]))

    spec = dg.AssetSpec(
        FCT_CUSTOMER_LTV,
        group_name="fact",
        description=f"Customer lifetime value (Delta table {CUSTOMER_LTV_TABLE.path}): per "
        "as_of_date D, one row per customer with a staging order that day, their orders, "
        "paid orders and paid revenue from the first partition to D. A range is one run and "
        "one Spark job, seeded from each customer's latest earlier row. A day is held while "
        "a staging day up to it is not published; a range is held while the LTV before it "
        "is not current (the failure names the day to build from).",
        deps=[STG_ORDERS, dg.AssetDep(FCT_CUSTOMER_LTV, partition_mapping=previous_day())],
        metadata={"table": CUSTOMER_LTV_TABLE.path},
    )
    step = publishing_step(
        "customer_ltv",
        spec,
        LTV_CHECKS,
        daily_partitions(settings),
        build,
        description="LTV of the range's days, from the first one an earlier attempt did not "
        "publish.",
    )
    return [step]


def build_monthly_revenue_assets(settings: Settings) -> list[dg.AssetsDefinition]:
    def build(step: Publication, months: list[date], resources: Any) -> None:
        publish_months(step, settings, months)

    spec = dg.AssetSpec(
        RPT_MONTHLY_REVENUE,
        group_name="reports",
        description=f"Monthly revenue (Delta table {MONTHLY_REVENUE_TABLE.path}): per "
        "month (its first day) and country, the daily fact's orders, paid orders and "
        "paid revenue summed over the month. Built only when every day of the month "
        "is published, otherwise held naming the missing days; rebuilt for every "
        "month a fact change touches, recording the change against the version it "
        "replaced.",
        deps=[dg.AssetDep(FCT_DAILY_REVENUE, partition_mapping=dg.TimeWindowPartitionMapping())],
        metadata={"table": MONTHLY_REVENUE_TABLE.path},
    )
    step = publishing_step(
        "monthly_revenue",
        spec,
        MONTHLY_CHECKS,
        monthly_partitions(settings),
        build,
        description="The range's months whose days are all published, each audited before "
        "publishing.",
    )
    return [step]
