"""The checks of the tables downstream of the daily fact, evaluated per partition before it is
published. The figures they compare come from ``transforms.audit``."""

from __future__ import annotations

import dagster as dg

from backfill_assets.catalog import FCT_CUSTOMER_LTV, RPT_MONTHLY_REVENUE
from backfill_assets.downstream.downstream_outcomes import (
    CONTRIBUTION_MATCHES_FACT,
    NEVER_DECREASES,
    PREVIOUS_PLUS_DAY,
    TOTALS_MATCH_FACT,
)
from backfill_assets.event_days.outcomes import CODE_DEFECT

LTV_CHECKS = [
    dg.AssetCheckSpec(
        PREVIOUS_PLUS_DAY,
        asset=FCT_CUSTOMER_LTV,
        blocking=True,
        description="LTV[D] has one row per customer with a staging order of day D, "
        "and each equals the customer's previous row (their latest row before D) plus "
        "that day's orders, paid orders and paid revenue; first_order_date is carried "
        "over, last_order_date is D." + CODE_DEFECT,
    ),
    dg.AssetCheckSpec(
        NEVER_DECREASES,
        asset=FCT_CUSTOMER_LTV,
        blocking=True,
        description="No customer's orders, paid orders or lifetime revenue in LTV[D] "
        "is below their previous row's." + CODE_DEFECT,
    ),
    dg.AssetCheckSpec(
        CONTRIBUTION_MATCHES_FACT,
        asset=FCT_CUSTOMER_LTV,
        blocking=True,
        description="Day D's contribution summed over customers (orders, paid orders, "
        "paid revenue) equals the published fct_daily_revenue[D]. Held when the fact of "
        "D is not published or was built from another staging: rebuild the event days, "
        "then this partition.",
    ),
]

MONTHLY_CHECKS = [
    dg.AssetCheckSpec(
        TOTALS_MATCH_FACT,
        asset=RPT_MONTHLY_REVENUE,
        blocking=True,
        description="The month's orders, paid orders and paid revenue equal the sums "
        "of the published daily fact over the month's days." + CODE_DEFECT,
    ),
]
