"""What ``downstream_refresh`` asks of ``fct_customer_ltv``: one ranged run from the first day
whose LTV is stale to the last day it can build. LTV is cumulative: a day's LTV needs every
staging day from the first partition up to it published."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from backfill_assets.catalog import CUSTOMER_LTV_STEP
from backfill_assets.defs.automation.downstream import ltv_request
from backfill_assets.settings import Settings

SETTINGS = Settings(Path("landing"), Path("lake"), date(2024, 1, 1), 7)
D = [date(2024, 1, k) for k in range(1, 7)]  # D[0] is the first partition


def test_a_staging_change_asks_from_its_day_to_the_latest_published_day():
    staging = {d: 10 + k for k, d in enumerate(D)}
    ltv = {d: 20 for d in D}
    staging[D[3]] = 30  # republished after its LTV
    request = ltv_request(SETTINGS, staging, ltv)
    assert request is not None
    assert (request.step, request.start, request.end) == (CUSTOMER_LTV_STEP, D[3], D[5])
    assert request.key == f"{CUSTOMER_LTV_STEP}:{D[3]}..{D[5]}:staging@30"
    assert ltv_request(SETTINGS, staging, {**ltv, D[3]: 31, D[4]: 31, D[5]: 31}) is None


def test_nothing_while_the_first_partitions_staging_is_unpublished():
    """Production started after the first partition (its first day never built): no LTV day
    can be built, so a request would only start a run that fails holding every day."""
    staging = {d: 10 + k for k, d in enumerate(D) if d != D[0]}
    assert ltv_request(SETTINGS, staging, {}) is None


def test_a_gap_in_staging_ends_the_request_the_day_before_it():
    staging = {d: 10 + k for k, d in enumerate(D) if d != D[3]}
    request = ltv_request(SETTINGS, staging, {})
    assert request is not None
    assert (request.start, request.end) == (D[0], D[2])
    # LTV current up to the gap: nothing after it can be built either
    assert ltv_request(SETTINGS, staging, {d: 20 for d in D[:3]}) is None
