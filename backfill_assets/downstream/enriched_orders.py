"""``stg_orders_enriched``: a range in one run and one Spark job, like every step here.

For the range's published staging days: the distinct customers; those the cache table
(``staging/customer_segments``) lacks are asked of the segment service through the one shared
client (batched, rate-limited, in the run's lane); their answers are merged into the cache by
key; each order gets its customer's segment as of its event day; the range is staged, audited
and published day by day.

Held days, named in the run's failure: a day whose staging is not published, or was republished
while it was built; every day when the service is not configured (``BACKFILL_SEGMENTS_URL``) or
does not answer after the client's retries.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date

import dagster as dg

from backfill_assets.asset_events.lineage import commit_info, write_metadata
from backfill_assets.catalog import (
    CLI_TAG,
    CUSTOMER_SEGMENTS_TABLE,
    ENRICHED_TABLE,
    REQUEST_TAG,
    STAGING_TABLE,
    STG_ORDERS,
    STG_ORDERS_ENRICHED,
)
from backfill_assets.downstream.downstream_outcomes import enrich_outcomes
from backfill_assets.enrichment.cache import cached_segments, store_segments
from backfill_assets.enrichment.client import BACKFILL, LIVE, SegmentServiceError
from backfill_assets.publishing.publication import Publication
from backfill_assets.resources import SegmentsResource
from backfill_assets.transforms.enrichment import enrich, enrichment_audit, segments_frame
from backfill_assets.transforms.schemas import ENRICHED_ORDERS

STAGING, ENRICHED = STG_ORDERS.to_user_string(), STG_ORDERS_ENRICHED.to_user_string()


def lane_of(tags: Mapping[str, str]) -> str:
    """The live lane for the runs the sensors and the schedule request; a backfill otherwise (the
    CLI, the UI, a catch-up)."""
    return LIVE if REQUEST_TAG in tags and CLI_TAG not in tags else BACKFILL


def publish_enriched(step: Publication, segments: SegmentsResource, days: list[date]) -> None:
    """Build, stage, audit and publish the enrichment of ``days`` in one Spark job."""
    if not segments.configured:
        for d in days:
            step.hold(
                d,
                "the segment service is not configured: set BACKFILL_SEGMENTS_URL (make demo "
                "starts one), then re-execute",
            )
        return
    published = step.published_days(STG_ORDERS)
    for d in days:
        if d not in published:
            step.hold(d, f"{STAGING} {d} not published")
    days = [d for d in days if d in published]
    if not days:
        return
    lake, context = step.lake, step.context
    staging, staging_version = step.read_published(STAGING_TABLE, days, None)
    customers = {r["customer_id"] for r in staging.select("customer_id").distinct().collect()}
    cached, known = cached_segments(lake, customers)
    lane = lane_of(context.run.tags)
    client = segments.client(lane)
    try:
        fetched = client.histories(customers - known)
    except SegmentServiceError as exc:
        for d in days:
            step.hold(d, f"the segment service did not answer: {exc}")
        return
    lookups = {
        "lane": lane,
        "customers": len(customers),
        "cached_hits": len(customers & known),
        "fetched": len(fetched),
        "requests": client.stats.requests,
        "throttled_429": client.stats.throttled_429,
        "token_wait_s": round(sum(client.stats.token_waits_s), 3),
    }
    context.log.info(f"{ENRICHED}: segment lookups {lookups}")
    cache_version = store_segments(
        lake, fetched, commit_info(context, STG_ORDERS_ENRICHED, days, {})
    )
    segs = cached.unionByName(segments_frame(lake.spark, fetched))
    inputs = {STAGING_TABLE.path: staging_version, CUSTOMER_SEGMENTS_TABLE.path: cache_version}
    staged = step.stage(
        ENRICHED_TABLE,
        enrich(staging, segs),
        days,
        commit_info(context, STG_ORDERS_ENRICHED, days, inputs),
    )
    passed = step.audit(
        days, enrich_outcomes(days, enrichment_audit(staging, step.read_staged(staged), segs))
    )
    moved = lake.changed_since(
        STAGING_TABLE.path, STAGING_TABLE.partition_column, staging_version, days
    )
    for d in moved & set(passed):
        step.hold(d, f"{STAGING} republished while it was built")
    good = [d for d in passed if d not in moved]
    if not good:
        return
    write = step.publish(staged, good)
    for d in good:
        step.published(
            STG_ORDERS_ENRICHED,
            d,
            {
                **write_metadata(write, d, inputs, ENRICHED_ORDERS),
                "segment_lookups": dg.MetadataValue.json(lookups),
            },
        )
