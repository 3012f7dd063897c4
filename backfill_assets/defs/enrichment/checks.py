"""The checks of ``stg_orders_enriched``, evaluated per partition before it is published. The
figures they compare come from ``transforms.enrichment.enrichment_audit``."""

from __future__ import annotations

import dagster as dg

from backfill_assets.catalog import STG_ORDERS_ENRICHED
from backfill_assets.downstream.downstream_outcomes import (
    ONE_ROW_PER_STAGING_ORDER,
    SEGMENT_AS_OF_EVENT_DATE,
)
from backfill_assets.event_days.outcomes import CODE_DEFECT

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
