"""Staging's window check covers rates too: a rate file landed after raw_fx_rates was built holds
the event days whose rate it may set, until raw is rebuilt; then they publish at the new rate."""

from __future__ import annotations

import contextlib
import io
from datetime import date, timedelta

import pytest

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import FCT_DAILY_REVENUE, RAW_FX_RATES, STG_ORDERS
from backfill_assets.cli.main import run_backfill
from backfill_assets.cli.runner import execute
from backfill_assets.days import days_between, last_partition
from backfill_assets.demo.generate import generate_feed
from backfill_assets_testkit.pipeline_env import pipeline_env
from backfill_assets_testkit.reference import Reference

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

FIRST, LAST = date(2024, 1, 1), date(2024, 1, 3)
RESTATED = date(2024, 1, 2)  # a Tuesday: rate files landed for it


def staging_by_day(env, days) -> dict:
    return {
        (r["event_date"], r["order_id"]): (r["usd_per_unit"], r["amount_usd"])
        for r in env.rows("staging/orders")
        if r["event_date"] in days
    }


def test_a_rate_file_landed_after_raw_holds_its_days_until_raw_is_rebuilt(tmp_path, spark):
    with pipeline_env(tmp_path, start_date="2023-12-20") as env:
        landing = env.settings.landing_dir
        generate_feed(landing, FIRST, LAST, orders_per_day=12, seed=5)
        with contextlib.redirect_stdout(io.StringIO()):
            assert run_backfill(env.settings, FIRST, LAST) == 0
        days = [RESTATED, LAST]
        before = staging_by_day(env, days)
        old = Reference(landing, env.settings.max_lateness_days).staging(days)[0]
        assert any(s.currency == "EUR" for s in old)

        folder = landing / "fx_rates" / f"rate_date={RESTATED}"
        (folder / "zz-restated.csv").write_text("currency,usd_per_unit\nEUR,1.50000000\n")
        new, held = Reference(landing, env.settings.max_lateness_days).staging(days)
        assert held == set()
        assert {(s.event_date, s.order_id): s.amount_usd for s in new} != {
            (s.event_date, s.order_id): s.amount_usd for s in old
        }

        stale = execute(RunPlan((STG_ORDERS, FCT_DAILY_REVENUE), RESTATED, LAST), env.instance)
        assert not stale.success
        assert stale.failed_checks[STG_ORDERS] == {
            RESTATED: ["window_complete"],
            LAST: ["window_complete"],
        }
        assert staging_by_day(env, days) == before  # nothing published at the superseded rate

        assert execute(RunPlan((RAW_FX_RATES,), RESTATED, RESTATED), env.instance).success
        fresh = execute(RunPlan((STG_ORDERS, FCT_DAILY_REVENUE), RESTATED, LAST), env.instance)
        assert fresh.success, fresh.error
        assert staging_by_day(env, days) == {
            (s.event_date, s.order_id): (s.usd_per_unit, s.amount_usd) for s in new
        }


def test_arrivals_not_yet_partitions_hold_no_day_and_wait_for_their_partition(tmp_path, spark):
    """A folder dated today (or later) is no daily partition yet: raw cannot build it. It held
    every event day whose window it falls in, the whole last week, in production, where
    today's folder is always there. Those days publish from the raw partitions there are; the
    folder's records join them once it is a partition (the daily refresh, the late-data lane)."""
    yesterday = last_partition()
    first = yesterday - timedelta(days=2)
    days = days_between(first, yesterday)
    with pipeline_env(tmp_path / "run", start_date=str(first - timedelta(days=3))) as env:
        landing = env.settings.landing_dir
        generate_feed(landing, first, yesterday, orders_per_day=12, seed=5)
        later = [p for p in (landing / "orders").iterdir() if p.name > f"arrival_date={yesterday}"]
        assert any(f.stat().st_size for p in later for f in p.iterdir())  # today's has records
        with contextlib.redirect_stdout(io.StringIO()):
            assert run_backfill(env.settings, first, yesterday) == 0

        as_of = tmp_path / "as-of-yesterday"  # the same feed, as it stood yesterday
        generate_feed(as_of, first, yesterday, orders_per_day=12, seed=5, last_arrival=yesterday)
        expected, held = Reference(as_of, env.settings.max_lateness_days).staging(days)
        assert held == set()
        assert staging_by_day(env, days) == {
            (s.event_date, s.order_id): (s.usd_per_unit, s.amount_usd) for s in expected
        }
