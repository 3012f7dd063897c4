"""``stg_orders_enriched``'s definition; its build: ``downstream/enriched_orders.py``."""

from __future__ import annotations

from datetime import date
from typing import Any

import dagster as dg

from backfill_assets.catalog import (
    CUSTOMER_SEGMENTS_TABLE,
    ENRICHED_TABLE,
    STG_ORDERS,
    STG_ORDERS_ENRICHED,
)
from backfill_assets.defs.enrichment.checks import ENRICH_CHECKS
from backfill_assets.defs.partitions import daily_partitions
from backfill_assets.downstream.enriched_orders import publish_enriched
from backfill_assets.publishing.publication import Publication
from backfill_assets.publishing.steps import publishing_step
from backfill_assets.settings import Settings


def build_enrichment_assets(settings: Settings) -> list[dg.AssetsDefinition]:
    def build(step: Publication, todo: list[date], resources: Any) -> None:
        publish_enriched(step, resources.segments, todo)

    spec = dg.AssetSpec(
        STG_ORDERS_ENRICHED,
        group_name="staging",
        description="Staging orders with the customer's segment as of the event day "
        f"(Delta table {ENRICHED_TABLE.path}): per event_date D, one row per "
        "stg_orders row of D plus customer_segment and _segment_as_of, the "
        "customer's latest segment-history entry valid from D or earlier, never "
        "today's. Histories come from the segment service through one rate-limited "
        "client shared by every process (a share of it reserved for the live runs) "
        f"and are cached in {CUSTOMER_SEGMENTS_TABLE.path}, so a re-run asks the "
        "service nothing. Held while the service is not configured.",
        deps=[STG_ORDERS],
        metadata={"table": ENRICHED_TABLE.path},
    )
    step = publishing_step(
        "enrich_orders",
        spec,
        ENRICH_CHECKS,
        daily_partitions(settings),
        build,
        description="The enrichment of the range's days that an earlier attempt did not publish.",
        resources=("segments",),
    )
    return [step]
