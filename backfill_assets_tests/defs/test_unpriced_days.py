"""A day the contract fails for pricing, in a real pipeline run: an order whose currency has no
rate on its day holds that day under ``fx_rate_present``, an order whose amount_usd does not fit
DECIMAL(18,2) holds its day under ``amount_usd_fits``; each check names its orders, and the
neighbouring day publishes. A day whose orders each fit but whose paid revenue in a country does
not publishes its staging and holds its fact (``totals_match_staging``)."""

from __future__ import annotations

import contextlib
import io
from datetime import date
from decimal import Decimal

import dagster as dg
import pytest
from dagster._core.events import DagsterEventType

from backfill_assets.catalog import STG_ORDERS
from backfill_assets.cli.main import run_backfill
from backfill_assets_testkit.contract_feed import land, order
from backfill_assets_testkit.pipeline_env import pipeline_env
from backfill_assets_testkit.reference import Reference

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

PRICED, NO_RATE, TOO_LARGE = date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)
SUM_TOO_LARGE = date(2024, 1, 4)
DAYS = (PRICED, NO_RATE, TOO_LARGE, SUM_TOO_LARGE)
# XAG at 6,000 USD: 999,999,999,999.99 of it is 5,999,999,999,999,940.00 USD, which fits
# DECIMAL(18,2) (up to 9,999,999,999,999,999.99); two such paid orders do not.
BIG_XAG = '"999999999999.99"'
CHECKS = ("fx_rate_present", "amount_usd_fits")


def orders_of(day: date, *lines: str) -> tuple[str, str]:
    return f"orders/arrival_date={day}/a.jsonl", "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def held_run(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("unpriced")
    with pipeline_env(root, start_date=PRICED.isoformat()) as env:
        landing = env.settings.landing_dir
        # XAU at 100,000 USD: 999,999,999,999.99 of it is 1e17 USD, past DECIMAL(18,2)
        land(
            landing,
            f"fx_rates/rate_date={PRICED}/r.csv",
            "currency,usd_per_unit\nEUR,1.1\nXAU,100000\nXAG,6000\n",
        )
        for day, extra in (
            (PRICED, None),
            (NO_RATE, order("no-rate", event=f"{NO_RATE}T09:00:00Z", currency="JPY")),
            (
                TOO_LARGE,
                order(
                    "too-large",
                    event=f"{TOO_LARGE}T09:00:00Z",
                    currency="XAU",
                    amount='"999999999999.99"',
                ),
            ),
            (
                SUM_TOO_LARGE,
                order("big-1", event=f"{SUM_TOO_LARGE}T09:00:00Z", currency="XAG", amount=BIG_XAG),
            ),
        ):
            lines = [order(f"ok-{day.day}", event=f"{day}T08:00:00Z")] + ([extra] if extra else [])
            if day == SUM_TOO_LARGE:
                big = order("big-2", event=f"{day}T09:30:00Z", currency="XAG", amount=BIG_XAG)
                lines.append(big)
            land(landing, *orders_of(day, *lines))
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = run_backfill(env.settings, PRICED, SUM_TOO_LARGE)
        yield env, code, out.getvalue()


def test_the_reference_holds_the_two_days(held_run):
    env, _, _ = held_run
    _, held = Reference(env.settings.landing_dir).staging(list(DAYS))
    assert held == {NO_RATE, TOO_LARGE}


def evaluations(instance: dg.DagsterInstance) -> dict[tuple[str, date], tuple[bool, dict]]:
    """(check, day) -> (passed, metadata) of staging's pricing checks, over every run."""
    found: dict[tuple[str, date], tuple[bool, dict]] = {}
    for run in instance.get_runs():
        for record in instance.all_logs(
            run.run_id, of_type=DagsterEventType.ASSET_CHECK_EVALUATION
        ):
            assert record.dagster_event is not None
            ev = record.dagster_event.asset_check_evaluation_data
            if ev.asset_key == STG_ORDERS and ev.check_name in CHECKS and ev.partition:
                meta = {k: v.value for k, v in ev.metadata.items()}
                found[(ev.check_name, date.fromisoformat(ev.partition))] = (ev.passed, meta)
    return found


def test_each_day_is_held_under_its_own_check_naming_its_order(held_run):
    env, code, output = held_run
    assert code == 1, output
    found = evaluations(env.instance)
    assert set(found) == {(name, day) for name in CHECKS for day in DAYS}
    failed = {key: meta for key, (passed, meta) in found.items() if not passed}
    assert set(failed) == {("fx_rate_present", NO_RATE), ("amount_usd_fits", TOO_LARGE)}
    assert failed[("fx_rate_present", NO_RATE)]["first_offending_orders"] == ["no-rate:JPY"]
    assert failed[("amount_usd_fits", TOO_LARGE)]["first_offending_orders"] == ["too-large:XAU"]
    # each held day names its own check; the priced day and its fact are published
    assert "2024-01-02: stg_orders.fx_rate_present" in output, output
    assert "2024-01-03: stg_orders.amount_usd_fits" in output, output
    assert {r["order_id"] for r in env.rows("staging/orders")} == {"ok-1", "ok-4", "big-1", "big-2"}
    assert {r["event_date"] for r in env.rows("fact/daily_revenue")} == {PRICED}


def test_a_days_paid_revenue_past_decimal_18_2_holds_its_fact_not_its_staging(held_run):
    env, code, output = held_run
    assert code == 1, output
    staged = {r["order_id"]: r["amount_usd"] for r in env.rows("staging/orders")}
    each = Decimal("999999999999.99") * 6000
    assert (staged["big-1"], staged["big-2"]) == (each, each)
    assert staged["big-1"] + staged["big-2"] > Decimal("9999999999999999.99")
    assert f"fct_daily_revenue {SUM_TOO_LARGE}: totals_match_staging" in output, output
    assert SUM_TOO_LARGE not in {r["event_date"] for r in env.rows("fact/daily_revenue")}
