"""The checks of ``stg_orders_enriched``, evaluated per partition before it is published. The
figures they compare come from ``transforms.enrichment.enrichment_audit``."""

from __future__ import annotations

from datetime import date

import dagster as dg

from backfill_assets.catalog import STG_ORDERS_ENRICHED
from backfill_assets.event_days.outcomes import CODE_DEFECT
from backfill_assets.publishing.publication import CheckOutcome
from backfill_assets.transforms.enrichment import EMPTY_DAY

ONE_ROW_PER_STAGING_ORDER = "one_row_per_staging_order"
SEGMENT_AS_OF_EVENT_DATE = "segment_as_of_event_date"

ENRICH_CHECKS = [
    dg.AssetCheckSpec(
        ONE_ROW_PER_STAGING_ORDER,
        asset=STG_ORDERS_ENRICHED,
        blocking=True,
        description="Day D has exactly one row per published stg_orders row of D: "
        "the same count, the same (event_date, order_id) keys, the same customer." + CODE_DEFECT,
    ),
    dg.AssetCheckSpec(
        SEGMENT_AS_OF_EVENT_DATE,
        asset=STG_ORDERS_ENRICHED,
        blocking=True,
        description="Every row's _segment_as_of is at most its event_date, and its "
        "segment and as-of date are the customer's latest cached history entry valid "
        "from event_date or earlier (NULL when there is none): never a later segment."
        + CODE_DEFECT,
    ),
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
