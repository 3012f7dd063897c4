"""In a real browser after `make demo`: `make ui`'s webserver on the demo's instance, lake and
landing zone, with the first partition the demo recorded. Every partition bar counts the demo's
days from the first partition to yesterday, as computed here from the landed files."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from deltalake import DeltaTable
from playwright.sync_api import expect

from backfill_assets.catalog import (
    CUSTOMER_LTV_TABLE,
    FACT_TABLE,
    FCT_DAILY_REVENUE,
    MONTHLY_REVENUE_TABLE,
    RAW_FX_RATES,
    RAW_ORDERS,
    STG_ORDERS,
)
from backfill_assets.transforms.columns import DESCRIPTIONS
from backfill_assets_testkit.dagster_dev import running_dagster_dev
from backfill_assets_testkit.reference import customer_ltv
from backfill_assets_tests.e2e.browser import expect_columns_described, partition_counts
from backfill_assets_tests.e2e.conftest import READY_TIMEOUT_S, Demo

pytestmark = pytest.mark.e2e

RAW, RATES, STG, FCT = (
    k.to_user_string() for k in (RAW_ORDERS, RAW_FX_RATES, STG_ORDERS, FCT_DAILY_REVENUE)
)
DEMO_DAYS = 60  # README: "the 60 days ending yesterday (UTC)"
LTV_COLUMNS = (
    "as_of_date",
    "customer_id",
    "orders",
    "paid_orders",
    "lifetime_revenue_usd",
    "first_order_date",
    "last_order_date",
)


@pytest.fixture(scope="module")
def dagster_ui(demo: Demo, e2e_output):
    """`make ui` after `make demo`: BACKFILL_START_DATE unset, the definitions start the
    partitions at the first partition the demo recorded."""
    with running_dagster_dev(
        demo.env(), e2e_output / "dagster-dev-demo.log", READY_TIMEOUT_S
    ) as ui:
        yield ui


def days_from(first: date, last: date) -> set[date]:
    return {first + timedelta(days=i) for i in range((last - first).days + 1)}


@pytest.fixture(scope="module")
def expected_bars(demo: Demo) -> dict[str, tuple[set[date], set[date]]]:
    """Per asset, (published days, held days), from the landing zone by the test oracle: raw
    orders by arrival date, rates by rate date, staging and fact by event date."""
    reference = demo.reference
    first = demo.first_partition
    arrivals = {d for d in reference.arrival_dates if d >= first}
    event_days = {
        rec.order["event_date"]
        for a in arrivals
        for rec in reference.records(a)
        if rec.reason is None and rec.order["event_date"] >= first
    }
    _, held = reference.staging(event_days)
    # The demo builds the rates of every day it backfills; a day without a rate file (a
    # weekend) is built too, with no rows.
    rate_days = days_from(first, max(event_days))
    return {
        RAW: (arrivals, set()),
        RATES: (rate_days, set()),
        STG: (event_days - held, held),
        FCT: (event_days - held, held),
    }


def test_demo_covers_the_60_days_ending_yesterday(demo: Demo):
    print(f"the demo took {demo.seconds:.0f}s")
    # Its first day is 59 days before yesterday, whatever its weekday (a weekend takes the
    # rates landed the Friday before, which the first partition reads).
    assert demo.first_partition == demo.yesterday - timedelta(days=DEMO_DAYS - 1)
    arrivals = demo.reference.arrival_dates
    assert (min(arrivals), max(arrivals)) == (demo.first_partition, demo.yesterday)


@pytest.mark.parametrize("asset", [RAW, RATES, STG, FCT])
def test_partition_bar_counts_the_demo_days(ui, asset, demo: Demo, expected_bars):
    """Read from the page against counts computed here: every partition from the recorded first
    one to yesterday is one of the demo's days (published, or failed if held) or missing."""
    published, held = expected_bars[asset]
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    partitions = (yesterday - demo.first_partition).days + 1
    page = ui.page
    with ui.step(f"{asset} partition bar after the demo"):
        ui.goto(f"/assets/{asset}?view=partitions")
        expect(page.get_by_text(f"{partitions} Partitions Selected", exact=True)).to_be_visible()
        shown = page.locator("input[placeholder^='ex: ']").first  # the bar's range
        expect(shown).to_have_value(
            f"[{demo.first_partition.isoformat()}...{yesterday.isoformat()}]"
        )
        assert partition_counts(page) == {
            "Failed": len(held),
            "Materialized": len(published),
            "Materializing": 0,
            "Missing": partitions - len(published) - len(held),
        }
        if asset == STG:
            ui.screenshot("demo-01-partition-bar", docs="demo-partition-bar.png")


def test_demo_days_are_all_published_none_missing(expected_bars, demo: Demo):
    """The issue's picture: after the demo, staging and fact hold every day to yesterday."""
    published, held = expected_bars[STG]
    assert held == set()
    assert published == days_from(demo.first_partition, demo.yesterday)


def test_ltv_and_the_months_are_current_after_the_correction_tour(demo: Demo):
    """The tour ends with a cutover; what sits downstream was rebuilt from the corrected days
    (the demo runs no daemon, so no sensor would)."""
    expected, held = customer_ltv(demo.reference, demo.first_partition, demo.yesterday)
    assert held is None
    ltv = DeltaTable(str(demo.lake / CUSTOMER_LTV_TABLE.path)).to_pyarrow_table().to_pylist()
    assert {tuple(r[c] for c in LTV_COLUMNS) for r in ltv} == expected
    revenue: dict[date, Decimal] = defaultdict(Decimal)
    for row in demo.reference.fact(days_from(demo.first_partition, demo.yesterday)):
        revenue[row.event_date.replace(day=1)] += row.revenue_usd
    months = DeltaTable(str(demo.lake / MONTHLY_REVENUE_TABLE.path)).to_pyarrow_table().to_pylist()
    built: dict[date, Decimal] = defaultdict(Decimal)
    for row in months:
        built[row["month"]] += row["revenue_usd"]
    # the demo's whole months that have ended
    complete = {
        m
        for m in revenue
        if m >= demo.first_partition
        and (m + timedelta(days=31)).replace(day=1) <= demo.yesterday + timedelta(days=1)
    }
    assert complete
    assert {m: built[m] for m in complete} == {m: revenue[m] for m in complete}


def test_fact_columns_are_described_after_the_demo(ui, demo: Demo):
    described = DESCRIPTIONS[FACT_TABLE.path][1]
    with ui.step(f"{FCT} overview after the demo: the Columns panel"):
        expect_columns_described(ui, FCT, described, ("revenue_usd", "paid_orders", "event_date"))
        ui.screenshot("demo-02-fact-columns")
