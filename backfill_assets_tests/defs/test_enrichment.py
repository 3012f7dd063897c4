"""``stg_orders_enriched`` end to end on real Spark, Delta, Dagster and the segment service on
127.0.0.1: each order's segment as of its event day, computed here in plain Python from the
service's HTTP answers; a second run asks the service nothing; held days without the service."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from backfill_assets.backfill_plan import RunPlan, plan_backfill
from backfill_assets.catalog import (
    CLI_TAG,
    ENRICH_STEP,
    REQUEST_TAG,
    STEP_ASSETS,
    STG_ORDERS_ENRICHED,
)
from backfill_assets.cli.runner import execute
from backfill_assets.demo.generate import generate_feed
from backfill_assets_testkit.pipeline_env import pipeline_env
from backfill_assets_tests.enrichment.service_process import (
    histories_over_http,
    running_service,
    stats,
)

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

FIRST, LAST = date(2024, 3, 4), date(2024, 3, 6)
ENRICH = RunPlan(STEP_ASSETS[ENRICH_STEP], FIRST, LAST)


def as_of(history, day):
    """The segment of the latest entry valid from ``day`` or earlier, and its date."""
    entries = [(d, s) for d, s in history if d <= day]
    return (max(entries)[1], max(entries)[0]) if entries else (None, None)


@pytest.fixture(scope="module")
def env(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("enrich")
    with (
        running_service(rps=20) as url,
        pipeline_env(root, start_date=FIRST.isoformat(), lateness=0) as penv,
    ):
        generate_feed(
            penv.settings.landing_dir, FIRST, LAST, orders_per_day=30, seed=3, max_lateness_days=0
        )
        for plan in plan_backfill(penv.settings, FIRST, LAST):
            assert execute(plan, penv.instance).success
        penv.url = url
        yield penv


def lookups(env, run_id: str) -> dict:
    mats = [
        r.asset_materialization
        for r in env.instance.fetch_materializations(STG_ORDERS_ENRICHED, limit=100).records
        if r.run_id == run_id
    ]
    assert {m.partition for m in mats} == {d.isoformat() for d in ENRICH.days}
    return mats[0].metadata["segment_lookups"].value


def test_without_the_service_every_day_is_held_naming_the_setting(env, monkeypatch):
    monkeypatch.delenv("BACKFILL_SEGMENTS_URL", raising=False)
    outcome = execute(ENRICH, env.instance)
    assert not outcome.success
    assert set(outcome.held) == set(ENRICH.days)
    assert all("BACKFILL_SEGMENTS_URL" in " ".join(why) for why in outcome.held.values())
    assert env.rows("staging/orders_enriched") == []


def test_each_order_gets_its_segment_as_of_its_event_day(env, monkeypatch):
    monkeypatch.setenv("BACKFILL_SEGMENTS_URL", env.url)
    before = stats(env.url)["requests"]
    outcome = execute(ENRICH, env.instance, tags={CLI_TAG: "backfill"})
    assert outcome.success, outcome.error
    staging = env.rows("staging/orders")
    customers = sorted({r["customer_id"] for r in staging})
    histories = histories_over_http(env.url, customers)
    expected = {
        (r["event_date"], r["order_id"]): {
            **r,
            **dict(
                zip(
                    ("customer_segment", "_segment_as_of"),
                    as_of(histories[r["customer_id"]], r["event_date"]),
                    strict=True,
                )
            ),
        }
        for r in staging
    }
    got = {(r["event_date"], r["order_id"]): r for r in env.rows("staging/orders_enriched")}
    assert got == expected
    # Both cases occur: a segment from before the day, and none yet (a later entry is not used).
    assert any(r["customer_segment"] is None for r in got.values())
    assert any(r["customer_segment"] is not None for r in got.values())
    assert any(
        any(d > r["event_date"] for d, _ in histories[r["customer_id"]]) for r in got.values()
    )
    used = lookups(env, outcome.run_id)
    assert (
        used["lane"] == "backfill"
        and used["cached_hits"] == 0
        and used["fetched"] == len(customers)
    )
    batches = -(-len(customers) // 50)
    assert (
        used["requests"]
        == batches
        == stats(env.url)["requests"] - before - len(range(0, len(customers), 100))
    )
    cache = {
        (r["customer_id"], r["valid_from"]): r["segment"]
        for r in env.rows("staging/customer_segments")
    }
    assert cache == {(c, d): s for c, h in histories.items() for d, s in h}


def test_a_second_run_asks_the_service_nothing(env, monkeypatch):
    monkeypatch.setenv("BACKFILL_SEGMENTS_URL", env.url)
    first = env.multiset("staging/orders_enriched")
    cache = env.multiset("staging/customer_segments")
    before = stats(env.url)["requests"]
    outcome = execute(ENRICH, env.instance, tags={REQUEST_TAG: "test-live"})
    assert outcome.success, outcome.error
    assert stats(env.url)["requests"] == before
    used = lookups(env, outcome.run_id)
    assert (
        used["requests"] == 0
        and used["fetched"] == 0
        and used["cached_hits"] == used["customers"] > 0
    )
    assert used["lane"] == "live"
    assert env.multiset("staging/orders_enriched") == first
    assert env.multiset("staging/customer_segments") == cache


def test_a_day_whose_staging_is_not_published_is_held(env, monkeypatch):
    monkeypatch.setenv("BACKFILL_SEGMENTS_URL", env.url)
    later = LAST + timedelta(days=1)
    outcome = execute(RunPlan(STEP_ASSETS[ENRICH_STEP], LAST, later), env.instance)
    assert not outcome.success
    assert set(outcome.held) == {later} and "stg_orders" in outcome.held[later][0]
    assert set(outcome.published[STG_ORDERS_ENRICHED]) == {LAST}
