"""What ``downstream_refresh`` asks of ``stg_orders_enriched``: the days whose staging changed
after their enrichment, as one ranged run, and nothing while the segment service is unset."""

from __future__ import annotations

import dataclasses
from datetime import date
from pathlib import Path

from backfill_assets.catalog import ENRICH_STEP
from backfill_assets.defs.automation.downstream import enrich_request
from backfill_assets.settings import SegmentSettings, Settings

UNSET = Settings(Path("landing"), Path("lake"), date(2024, 1, 1), 7)
SET = dataclasses.replace(UNSET, segments=SegmentSettings(url="http://127.0.0.1:1"))
D = [date(2024, 1, k) for k in range(1, 6)]


def test_stale_days_make_one_ranged_request_keyed_by_the_newest_staging():
    staging = {D[0]: 10, D[1]: 11, D[2]: 40, D[3]: 13, D[4]: 50}
    enriched = {D[0]: 20, D[1]: 21, D[2]: 22, D[3]: 23}  # D2 republished after; D4 never built
    request = enrich_request(SET, staging, enriched)
    assert (request.step, request.start, request.end) == (ENRICH_STEP, D[2], D[4])
    assert request.key == f"{ENRICH_STEP}:{D[2]}..{D[4]}:staging@50"


def test_nothing_when_up_to_date_or_without_the_service():
    staging = {D[0]: 10, D[1]: 11}
    assert enrich_request(SET, staging, {D[0]: 12, D[1]: 12}) is None
    assert enrich_request(UNSET, staging, {}) is None
