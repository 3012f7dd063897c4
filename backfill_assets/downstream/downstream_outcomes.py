"""The checks' outcomes per partition of the tables downstream of the daily fact, evaluated
before it is published. The figures they compare come from ``transforms.audit`` and
``transforms.enrichment.enrichment_audit``."""

from __future__ import annotations

from datetime import date

import dagster as dg

from backfill_assets.catalog import FCT_CUSTOMER_LTV, RPT_MONTHLY_REVENUE, STG_ORDERS_ENRICHED
from backfill_assets.event_days.outcomes import compared
from backfill_assets.publishing.publication import CheckOutcome
from backfill_assets.transforms.audit import EMPTY_LTV_DAY
from backfill_assets.transforms.enrichment import EMPTY_DAY
from backfill_assets.transforms.totals import MONTHLY_FIELDS, ZERO

PREVIOUS_PLUS_DAY = "previous_plus_day"
NEVER_DECREASES = "never_decreases"
CONTRIBUTION_MATCHES_FACT = "contribution_matches_fact"
TOTALS_MATCH_FACT = "totals_match_fact"
ONE_ROW_PER_STAGING_ORDER = "one_row_per_staging_order"
SEGMENT_AS_OF_EVENT_DATE = "segment_as_of_event_date"


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


def enrich_outcomes(days: list[date], audit: dict[date, dict]) -> list[CheckOutcome]:
    outcomes = []
    for day in days:
        a = audit.get(day, EMPTY_DAY)
        outcomes += [
            CheckOutcome(
                STG_ORDERS_ENRICHED,
                ONE_ROW_PER_STAGING_ORDER,
                day,
                a["rows"] == a["staging_rows"] and a["missing"] == 0 and a["extra"] == 0,
                {
                    "staging_rows": a["staging_rows"],
                    "rows": a["rows"],
                    "staging_orders_missing": a["missing"],
                    "rows_without_staging_order": a["extra"],
                },
            ),
            CheckOutcome(
                STG_ORDERS_ENRICHED,
                SEGMENT_AS_OF_EVENT_DATE,
                day,
                a["after_event_date"] == 0 and a["not_latest"] == 0,
                {
                    "segments_after_event_date": a["after_event_date"],
                    "not_the_latest_entry": a["not_latest"],
                },
            ),
        ]
    return outcomes
