"""The fact never stays built from a staging that is no longer published: a run that holds
staging[D] still rebuilds a stale fact[D] from the staging published now, and a run of staging
without the fact is refused."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import date
from decimal import Decimal

import pytest
from deltalake import DeltaTable

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import EVENT_DAYS_STEP, STEP_ASSETS, STG_ORDERS
from backfill_assets.cli.main import run_backfill
from backfill_assets.cli.runner import execute
from backfill_assets.demo.generate import generate_feed
from backfill_assets.lake import CommitInfo, Lake
from backfill_assets_testkit.pipeline_env import pipeline_env

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

FIRST, LAST = date(2024, 1, 1), date(2024, 1, 3)
DAY = date(2024, 1, 2)


def fact_by_country(env, day) -> dict:
    return {
        r["country"]: (r["orders"], r["paid_orders"], r["revenue_usd"])
        for r in env.rows("fact/daily_revenue")
        if r["event_date"] == day
    }


def expected_from_staging(env, day) -> dict:
    """The fact of ``day`` computed in plain Python from the staging rows published now."""
    out: dict = defaultdict(lambda: [0, 0, Decimal("0.00")])
    for r in env.rows("staging/orders"):
        if r["event_date"] == day:
            agg = out[r["country"]]
            agg[0] += 1
            if r["status"] == "paid":
                agg[1] += 1
                agg[2] += r["amount_usd"]
    return {c: tuple(v) for c, v in out.items()}


@pytest.fixture(scope="module")
def env(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("drift")
    with pipeline_env(root) as penv:
        generate_feed(penv.settings.landing_dir, FIRST, LAST, orders_per_day=12, seed=9)
        assert run_backfill(penv.settings, FIRST, LAST) == 0
        yield penv


def test_a_run_holding_staging_rebuilds_a_stale_fact_from_the_published_staging(env, spark):
    lake = Lake(env.settings.lake_dir, spark)
    # Staging[D] republished without one paid order, as by a run whose fact step then crashed.
    staging, _version = lake.read_partitions("staging/orders", "event_date", [DAY])
    dropped = staging.filter("status = 'paid'").limit(1).collect()[0]["order_id"]
    lake.replace_partitions(
        "staging/orders",
        staging.filter(f"order_id != '{dropped}'"),
        "event_date",
        [DAY],
        CommitInfo("crashed-run", "test"),
    )
    assert fact_by_country(env, DAY) != expected_from_staging(env, DAY)  # fact[D] is stale
    # An order file lands for D that raw does not hold yet: staging's window check holds D.
    folder = env.settings.landing_dir / "orders" / f"arrival_date={DAY}"
    record = {
        "order_id": "late-1",
        "customer_id": "c-1",
        "event_time": f"{DAY}T10:00:00Z",
        "updated_at": f"{DAY}T10:00:00Z",
        "status": "paid",
        "amount": "5.00",
        "currency": "USD",
        "country": "US",
    }
    (folder / "zz-late.jsonl").write_text(json.dumps(record) + "\n")

    outcome = execute(RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], DAY, DAY), env.instance)
    assert not outcome.success and "window_complete" in outcome.failed_checks[STG_ORDERS][DAY]
    assert fact_by_country(env, DAY) == expected_from_staging(env, DAY)


def test_staging_without_the_fact_is_refused(env):
    before = DeltaTable(str(env.settings.lake_dir / "staging/orders")).version()
    outcome = execute(RunPlan((STG_ORDERS,), LAST, LAST), env.instance)  # a day nothing holds
    assert not outcome.success and "without fct_daily_revenue" in (outcome.error or "")
    assert DeltaTable(str(env.settings.lake_dir / "staging/orders")).version() == before
