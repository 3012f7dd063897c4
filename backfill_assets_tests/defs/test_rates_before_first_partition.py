"""The rates landed in the rate window before the first partition are read: a first partition on
a Saturday takes Friday's rate, and so does a Monday whose only rate landed that Friday; staging
and fact equal the reference implementation's."""

from __future__ import annotations

import contextlib
import io
import shutil
from datetime import date, timedelta

import pytest

from backfill_assets.catalog import FCT_DAILY_REVENUE, RAW_FX_RATES, STG_ORDERS
from backfill_assets.cli.main import run_backfill
from backfill_assets.days import days_between
from backfill_assets.demo.generate import generate_feed
from backfill_assets_testkit.pipeline_env import pipeline_env
from backfill_assets_testkit.reference import Reference

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

FIRST = date(2024, 1, 6)  # a Saturday, the first partition; the feed's rates start on Wednesday
FRIDAY = FIRST - timedelta(days=1)
MONDAY = date(2024, 1, 8)  # its rate folder is removed: only the Friday before reaches it
END = date(2024, 1, 9)
DAYS = days_between(FIRST, END)


def published(env, key) -> set[date]:
    return {date.fromisoformat(p) for p in env.instance.get_materialized_partitions(key)}


def test_the_first_days_take_the_rates_landed_before_the_first_partition(tmp_path, spark):
    with pipeline_env(tmp_path, start_date=FIRST.isoformat()) as env:
        landing = env.settings.landing_dir
        generate_feed(landing, FIRST, END, orders_per_day=12, seed=3)
        shutil.rmtree(landing / "fx_rates" / f"rate_date={MONDAY}")
        reference = Reference(landing, env.settings.max_lateness_days)
        expected, held = reference.staging(DAYS)
        assert held == set()  # the contract: Friday's rates are within 7 days of Sat .. Mon
        monday = [s for s in expected if s.event_date == MONDAY and s.currency != "USD"]
        assert monday and all(s.usd_per_unit == reference.rate(s.currency, FRIDAY) for s in monday)
        assert {s.event_date for s in expected} == set(DAYS)

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = run_backfill(env.settings, FIRST, END)
        assert code == 0, out.getvalue()

        actual = {(r["event_date"], r["order_id"]): r for r in env.rows("staging/orders")}
        assert len(actual) == len(expected)
        for row in expected:
            got = actual[(row.event_date, row.order_id)]
            assert (got["currency"], got["amount"], got["usd_per_unit"], got["amount_usd"]) == (
                row.currency,
                row.amount,
                row.usd_per_unit,
                row.amount_usd,
            )
        fact = {
            (r["event_date"], r["country"]): (r["orders"], r["paid_orders"], r["revenue_usd"])
            for r in env.rows("fact/daily_revenue")
        }
        assert fact == {
            (f.event_date, f.country): (f.orders, f.paid_orders, f.revenue_usd)
            for f in reference.fact(DAYS)
        }
        assert published(env, STG_ORDERS) == published(env, FCT_DAILY_REVENUE) == set(DAYS)
        # raw_fx_rates keeps its daily partitions; the first one holds the window before it
        assert published(env, RAW_FX_RATES) == set(DAYS)
        rate_dates = {r["rate_date"] for r in env.rows("raw/fx_rates")}
        assert rate_dates == {FIRST - timedelta(days=3), FIRST - timedelta(days=2), FRIDAY, END}
