"""The checks of the tables downstream of the daily fact, evaluated per partition before it is
published. The figures they compare come from ``transforms.audit``."""

from __future__ import annotations

from datetime import date

import dagster as dg

from backfill_assets.catalog import FCT_CUSTOMER_LTV, RPT_MONTHLY_REVENUE
from backfill_assets.event_days.outcomes import CODE_DEFECT, compared
from backfill_assets.publishing.publication import CheckOutcome
from backfill_assets.transforms.audit import EMPTY_LTV_DAY, MONTHLY_FIELDS, ZERO

PREVIOUS_PLUS_DAY = "previous_plus_day"
NEVER_DECREASES = "never_decreases"
CONTRIBUTION_MATCHES_FACT = "contribution_matches_fact"
TOTALS_MATCH_FACT = "totals_match_fact"

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


def ltv_outcomes(
    days: list[date], audit: dict[date, dict], fact: dict[date, dict]
) -> list[CheckOutcome]:
    outcomes = []
    for day in days:
        a = audit.get(day, EMPTY_LTV_DAY)
        contribution = {k: a[k] for k in MONTHLY_FIELDS}
        in_fact = {k: fact.get(day, ZERO)[k] for k in MONTHLY_FIELDS}
        outcomes += [
            CheckOutcome(
                FCT_CUSTOMER_LTV,
                PREVIOUS_PLUS_DAY,
                day,
                a["wrong_rows"] == 0 and a["customers"] == a["contributors"],
                {
                    "rows": a["customers"],
                    "customers_with_orders": a["contributors"],
                    "wrong_rows": a["wrong_rows"],
                    "first_wrong_customers": dg.MetadataValue.json(list(a["first_wrong"])),
                },
            ),
            CheckOutcome(
                FCT_CUSTOMER_LTV,
                NEVER_DECREASES,
                day,
                a["decreasing_rows"] == 0,
                {"decreasing_rows": a["decreasing_rows"]},
            ),
            CheckOutcome(
                FCT_CUSTOMER_LTV,
                CONTRIBUTION_MATCHES_FACT,
                day,
                contribution == in_fact,
                {
                    **compared(in_fact, contribution),
                    "fact_published": (day in fact) or a["contributors"] == 0,
                },
            ),
        ]
    return outcomes


def monthly_outcomes(
    months: list[date], expected: dict[date, dict], actual: dict[date, dict]
) -> list[CheckOutcome]:
    zero = {k: ZERO[k] for k in MONTHLY_FIELDS}
    return [
        CheckOutcome(
            RPT_MONTHLY_REVENUE,
            TOTALS_MATCH_FACT,
            m,
            expected.get(m, zero) == actual.get(m, zero),
            compared(expected.get(m, zero), actual.get(m, zero)),
        )
        for m in months
    ]
