"""In a real browser: select staging and fact, backfill five days from the UI, see the bad day held,
then repair its rate and re-execute the failed run from failure: only that day is rebuilt."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import dagster as dg
import pytest
from deltalake import DeltaTable
from playwright.sync_api import expect

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import RAW_FX_RATES
from backfill_assets.cli.runner import execute, reexecute_from_failure
from backfill_assets.transforms.columns import DESCRIPTIONS
from backfill_assets_testkit.dagster_dev import PROJECT_DIR
from backfill_assets_testkit.reference import Reference
from backfill_assets_tests.e2e import queries
from backfill_assets_tests.e2e.browser import expect_columns_described, partition_counts
from backfill_assets_tests.e2e.landing_data import (
    DAYS,
    FEED_START,
    GOOD,
    HELD,
    LATENESS,
    PARTITION_START,
    RANGE_START,
    RANGE_TEXT,
)

pytestmark = pytest.mark.e2e

STG, FCT = "stg_orders", "fct_daily_revenue"
LTV, MONTHLY = "fct_customer_ltv", "rpt_monthly_revenue"
ENRICHED = "stg_orders_enriched"
ASSETS = ("raw_orders", "raw_fx_rates", STG, FCT, LTV, MONTHLY, ENRICHED)
SELECTION = f"key:{STG} or key:{FCT}"
BACKFILL_TIMEOUT_S = 420
STAGING_CHECKS = {
    "unique_order_ids",
    "one_row_per_valid_order",
    "fx_rate_present",
    "amount_usd_fits",
    "window_complete",
    "matches_contract_schema",
}


def node(page, key: str):
    """An asset's or a group's node in the graph: its title carries the name as a tooltip."""
    return page.locator(f'[data-tooltip="{key}"]')


def expand_all_groups(page) -> None:
    """The graph opens with its groups collapsed, or as last left; ⌥E expands them all (a second
    ⌥E would collapse them again)."""
    expect(node(page, "raw").or_(node(page, "raw_orders")).first).to_be_visible()
    if node(page, "raw_orders").count():
        return
    for _ in range(2):
        page.locator("body").press("Alt+KeyE")
        try:
            expect(node(page, "raw_orders")).to_be_visible()
            return
        except AssertionError:  # the key went nowhere: the graph had not taken focus yet
            if node(page, "raw").count() == 0:
                raise
    expect(node(page, "raw_orders")).to_be_visible()


@pytest.fixture(scope="module")
def launched(ui, dagster_ui):
    """The backfill as a person launches it; its id and status once the daemon has finished it."""
    page = ui.page
    with ui.step("open the asset graph"):
        ui.goto("/asset-groups")
        expand_all_groups(page)
    with ui.step("select stg_orders and fct_daily_revenue"):
        page.locator(".CodeMirror").first.click()  # "Search and filter assets"
        page.keyboard.type(SELECTION)
        page.keyboard.press("Enter")
        expect(node(page, "raw_orders")).to_have_count(0)
        node(page, FCT).click()
        node(page, STG).click(modifiers=["Shift"])
        materialize = page.get_by_role("button", name=re.compile(r"Materialize selected \(2\)"))
        expect(materialize).to_be_visible()
    with ui.step("choose the partition range in the launch dialog"):
        materialize.click()
        dialog = page.get_by_role("dialog")
        expect(dialog).to_contain_text("Launch runs to materialize 2 assets")
        show_all = dialog.get_by_text("Show all partitions")
        if show_all.count() and show_all.is_visible():  # the dialog opens on the last 90 days
            show_all.click()
        field = dialog.locator("input[placeholder^='ex: ']")
        field.fill(RANGE_TEXT)
        field.press("Enter")
        expect(dialog).to_contain_text("5 partitions")
        ui.screenshot("02-launch-dialog")
    with ui.step("launch the backfill"):
        dialog.get_by_role("button", name="Launch backfill").click()
        toast = page.get_by_text(re.compile(r"Created backfill \w+"))
        expect(toast).to_be_visible()
        backfill_id = re.search(r"Created backfill (\w+)", toast.inner_text()).group(1)
        page.get_by_role("link", name="View", exact=True).click()  # the toast's link
        expect(page).to_have_url(re.compile(rf"/runs/b/{backfill_id}"))
    with ui.step(f"wait for backfill {backfill_id} to finish"):
        status = queries.wait_for_backfill(dagster_ui, backfill_id, BACKFILL_TIMEOUT_S)
        page.reload()
        expect(page.get_by_text("Partitions targeted")).to_be_visible()
        ui.screenshot("03-backfill-finished")
    return {"id": backfill_id, "status": status}


# --- what the person sees -------------------------------------------------------------------


def test_asset_graph_shows_layers_kinds_descriptions_and_checks(ui, dagster_ui):
    nodes = queries.asset_nodes(dagster_ui)
    assert {k: n["groupName"] for k, n in nodes.items()} == {
        "raw_orders": "raw",
        "raw_fx_rates": "raw",
        STG: "staging",
        FCT: "fact",
        LTV: "fact",
        MONTHLY: "reports",
        ENRICHED: "staging",
        "corrections": "corrections",  # the corrections' list: observed, never materialized
    }
    assert nodes["corrections"]["description"] and nodes["corrections"]["isPartitioned"]
    for key, n in ((k, n) for k, n in nodes.items() if k in ASSETS):
        assert {"spark", "delta"} <= {k.lower() for k in n["kinds"]}, key
        assert n["description"] and n["isPartitioned"] and n["hasAssetChecks"], key

    page = ui.page
    with ui.step("asset graph with every group expanded"):
        ui.goto("/asset-groups")
        expand_all_groups(page)
        for asset in ASSETS:
            expect(node(page, asset)).to_be_visible()
        for group in ("raw", "staging", "fact", "reports"):
            expect(page.get_by_text(group, exact=True).first).to_be_visible()
        expect(page.get_by_text("Spark", exact=True)).to_have_count(len(ASSETS))
        expect(page.get_by_text("delta", exact=True)).to_have_count(len(ASSETS))
        # every node has the row; the corrections' list has no check ("-")
        expect(node(page, "corrections")).to_have_count(2)  # the group and its one asset
        expect(page.get_by_text("Asset checks", exact=True)).to_have_count(len(ASSETS) + 1)
        ui.screenshot("01-asset-graph", docs="asset-graph.png")
    with ui.step("an asset's description in the side panel"):
        node(page, STG).click()
        expect(page.get_by_text("Description", exact=True).first).to_be_visible()
        first_words = " ".join(nodes[STG]["description"].split()[:6])
        expect(page.get_by_text(first_words).first).to_be_visible()


def test_backfill_page_shows_four_of_five_days_succeeded(ui, launched):
    assert launched["status"] == "COMPLETED_FAILED"
    page = ui.page
    with ui.step("the finished backfill page"):
        ui.goto(f"/runs/b/{launched['id']}")
        expect(page.get_by_text(re.compile(rf"^{DAYS[0]}(\.\.\.|…){DAYS[-1]}$"))).to_be_visible()
        for asset in (STG, FCT):
            row = page.locator('[class*="VirtualizedTable_row"]').filter(
                has=page.locator(f'a[href="/assets/{asset}"]')
            )
            expect(row).to_have_count(1)
            counts = [int(x) for x in row.inner_text().split() if x.isdigit()]
            # Columns: partitions targeted, in progress, succeeded, failed.
            assert counts[-4:] == [5, 0, 4, 1], f"{asset}: {row.inner_text()!r}"


def test_held_day_shows_failed_with_the_reason(ui, launched, scenario):
    page = ui.page
    with ui.step("stg_orders partitions: failed and materialized only"):
        ui.goto(f"/assets/{STG}?view=partitions")
        expect(page.get_by_text("Failed (1)", exact=True)).to_be_visible()
        expect(page.get_by_text("Materialized (4)", exact=True)).to_be_visible()
        page.get_by_text(re.compile(r"^Missing \(\d+\)$")).click()
    good = GOOD[1]
    with ui.step(f"a good day, {good}, shows its row count"):
        page.get_by_text(good.isoformat(), exact=True).first.click()
        row = page.locator("tr").filter(has=page.get_by_text("dagster/row_count", exact=True))
        expect(row).to_have_count(1)
        expected = len(scenario.reference.staging([good])[0])
        assert row.inner_text().split()[-1] == str(expected), row.inner_text()
    with ui.step(f"the held day, {HELD}, failed and says why"):
        page.get_by_text(HELD.isoformat(), exact=True).first.click()
        expect(page.get_by_text("did not materialize this asset")).to_be_visible()
        ui.screenshot("04-held-partition")
        page.get_by_text("View logs", exact=True).click()
        expect(
            page.get_by_text(f"{HELD.isoformat()}: stg_orders.fx_rate_present").first
        ).to_be_visible()
        ui.screenshot("05-held-partition-logs")
        page.get_by_role("button", name="Done", exact=True).click()


def test_partition_bar_counts_every_day_from_the_first_partition(ui, launched):
    """Read from the page, against counts computed here from the scenario's days: four
    published, the held day failed, every other day since the first partition missing."""
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    every_day = (yesterday - PARTITION_START).days + 1
    page = ui.page
    with ui.step("stg_orders partition bar: every partition to yesterday"):
        ui.goto(f"/assets/{STG}?view=partitions")
        expect(page.get_by_text(f"Missing ({every_day - len(DAYS)})", exact=True)).to_be_visible()
        assert partition_counts(page) == {
            "Failed": 1,
            "Materialized": len(GOOD),
            "Materializing": 0,
            "Missing": every_day - len(DAYS),
        }
    shown = f"[{FEED_START.isoformat()}...{DAYS[-1].isoformat()}]"
    with ui.step(f"the bar over {shown}: the feed's days, the held one failed"):
        field = page.locator("input[placeholder^='ex: ']").first
        field.fill(shown)
        field.press("Enter")
        before_range = (RANGE_START - FEED_START).days
        expect(page.get_by_text(f"Missing ({before_range})", exact=True)).to_be_visible()
        assert partition_counts(page) == {
            "Failed": 1,
            "Materialized": len(GOOD),
            "Materializing": 0,
            "Missing": before_range,
        }
        page.get_by_text(HELD.isoformat(), exact=True).first.click()
        expect(page.get_by_text("did not materialize this asset")).to_be_visible()
        ui.screenshot("04b-partition-bar", docs="held-day.png")


def test_asset_page_columns_describe_each_field_from_the_contract(ui, launched):
    described = DESCRIPTIONS["staging/orders"][1]
    with ui.step("stg_orders overview: the Columns panel with descriptions"):
        expect_columns_described(ui, STG, described, ("amount_usd", "order_id", "usd_per_unit"))
        ui.screenshot("04c-asset-columns", docs="asset-columns.png")
    # The words the UI shows are the contract's.
    contract = (PROJECT_DIR / "docs" / "contract.md").read_text(encoding="utf-8")
    assert (
        "rounded half-up to the cent" in described["amount_usd"]
        and "rounded half-up to the cent" in contract
    )


def test_check_history_shows_one_failed_evaluation(ui, launched):
    page = ui.page
    with ui.step("fx_rate_present's execution history"):
        ui.goto(f"/assets/{STG}?view=checks&checkDetail=fx_rate_present")
        page.get_by_text("Execution history", exact=True).click()
        history = page.locator("tr")
        expect(history.filter(has=page.get_by_text("Failed", exact=True))).to_have_count(1)
        expect(history.filter(has=page.get_by_text("Passed", exact=True))).to_have_count(len(GOOD))
        ui.screenshot("06-check-history")


def test_sensor_and_schedule_switch_on_and_off(ui, dagster_ui, launched):
    # After the backfill: a running sensor must not start runs while it is being asserted.
    assert queries.automation_states(dagster_ui) == {
        "daily_refresh": "STOPPED",
        "late_data_sensor": "STOPPED",
        "daily_refresh_follow_up": "RUNNING",  # on by default; it acts on the schedule's runs only
        "downstream_refresh": "RUNNING",  # on by default; it rebuilds LTV and months after changes
        "weekly_lake_maintenance": "STOPPED",
        "release_dead_runs": "RUNNING",  # on by default: it fails only runs whose process died
        "correction_requests": "RUNNING",  # on by default: it acts only on requested corrections
    }
    page = ui.page
    with ui.step("automation page"):
        ui.goto("/automation")
        for name, kind in (("daily_refresh", "schedules"), ("late_data_sensor", "sensors")):
            # The row is the list item holding the link to its own page: one, whatever else
            # shares its name (daily_refresh_follow_up) or its container.
            row = page.locator("[data-index]").filter(
                has=page.locator(f'a[href$="/{kind}/{name}"]')
            )
            expect(row).to_have_count(1)
            switch = row.locator("label[class*=formatSwitch]")
            expect(switch).to_have_count(1)
            switch.click()
            expect(switch.locator("input")).to_be_checked()
            queries.wait_for_state(dagster_ui, name, "RUNNING")
            ui.screenshot(f"07-automation-{name}-on")
            switch.click()
            expect(switch.locator("input")).not_to_be_checked()
            queries.wait_for_state(dagster_ui, name, "STOPPED")


# --- the same outcome through the GraphQL API and in the lake --------------------------------


def test_graphql_backfill_counts(dagster_ui, launched):
    status, counts = queries.backfill_counts(dagster_ui, launched["id"])
    assert status == "COMPLETED_FAILED"
    assert counts == {STG: (5, 0, 4, 1), FCT: (5, 0, 4, 1)}


def test_graphql_materialized_partitions_are_the_four_good_days(dagster_ui, launched):
    stg, fct = queries.partition_days(dagster_ui, STG), queries.partition_days(dagster_ui, FCT)
    assert stg["MATERIALIZED"] == set(GOOD) == fct["MATERIALIZED"]
    assert stg["FAILED"] == {HELD}


def test_graphql_checks_per_partition(dagster_ui, launched):
    fx = queries.check_results(dagster_ui, STG, "fx_rate_present")
    assert fx == {**{d: ["SUCCEEDED"] for d in GOOD}, HELD: ["FAILED"]}
    for check in STAGING_CHECKS - {"fx_rate_present"}:
        results = queries.check_results(dagster_ui, STG, check)
        assert {d: results.get(d) for d in GOOD} == {d: ["SUCCEEDED"] for d in GOOD}, check
    totals = queries.check_results(dagster_ui, FCT, "totals_match_staging")
    assert {d: totals.get(d) for d in GOOD} == {d: ["SUCCEEDED"] for d in GOOD}
    # The held day's fact was never built, so never evaluated: Dagster resolves the planned
    # check of the failed step as EXECUTION_FAILED, never as a pass or a fail.
    assert not {"SUCCEEDED", "FAILED"} & set(totals.get(HELD, [])), totals.get(HELD)


def test_graphql_plotted_numbers_match_the_landed_records(dagster_ui, scenario, launched):
    reference = scenario.reference
    fact = queries.numeric_metadata(dagster_ui, FCT, DAYS)
    assert set(fact) == set(GOOD)
    for day in GOOD:
        expected = reference.fact([day])
        assert Decimal(str(fact[day]["revenue_usd"])) == sum(
            (f.revenue_usd for f in expected), Decimal(0)
        )
        assert fact[day]["dagster/row_count"] == len(expected)
    arrivals = [d for d in reference.arrival_dates if d >= DAYS[0]]
    raw = queries.numeric_metadata(dagster_ui, "raw_orders", arrivals)
    assert {d: raw[d]["quarantined"] for d in arrivals} == {
        d: len(reference.quarantine([d])) for d in arrivals
    }


def test_lake_has_staging_and_fact_only_for_the_good_days(scenario, launched):
    def rows(table):
        return DeltaTable(str(scenario.lake / table)).to_pyarrow_table().to_pylist()

    staging = rows("staging/orders")
    expected_staging, _ = scenario.reference.staging(GOOD)
    assert Counter(r["event_date"] for r in staging) == Counter(
        r.event_date for r in expected_staging
    )
    fact = {
        (r["event_date"], r["country"]): (r["orders"], r["paid_orders"], r["revenue_usd"])
        for r in rows("fact/daily_revenue")
    }
    expected_fact = {
        (f.event_date, f.country): (f.orders, f.paid_orders, f.revenue_usd)
        for f in scenario.reference.fact(GOOD)
    }
    assert fact == expected_fact
    assert {d for d, _ in fact} == set(GOOD)


# --- too early, from the command line: the held day is held again ---------------------------


def test_a_cli_reexecution_shows_among_the_failed_runs_reexecutions(ui, scenario, launched):
    """`backfill-assets reexecute` before the rate is repaired: the attempt fails as its parent
    did, and the parent's page lists it in the run group, as it lists one started in the UI."""
    from backfill_assets_tests.e2e.conftest import scenario_env

    instance = dg.DagsterInstance.from_config(str(scenario.home))
    try:
        [failed] = instance.get_runs(
            filters=dg.RunsFilter(tags={"dagster/backfill": launched["id"]})
        )
        with scenario_env(scenario):
            retry = reexecute_from_failure(instance, failed.run_id)
    finally:
        instance.dispose()
    assert not retry.success and set(retry.held) == {HELD}

    page = ui.page
    with ui.step(f"the failed run {failed.run_id[:8]} lists the CLI's re-execution"):
        ui.goto(f"/runs/{failed.run_id}")
        expect(page.get_by_text("Re-executions (1)", exact=True)).to_be_visible()
        expect(page.locator(f'a[href="/runs/{retry.run_id}"]')).to_be_visible()
        ui.screenshot("07b-cli-reexecution-in-run-group")
    with ui.step(f"the re-execution {retry.run_id[:8]} names the failed run its root"):
        ui.goto(f"/runs/{retry.run_id}")
        root = page.locator(f'a[href="/runs/{failed.run_id}"]').filter(has_text="ROOT")
        expect(root).to_be_visible()


# --- after the data is repaired: re-execute from failure in the UI ----------------------------


def _lake_rows(scenario, table: str) -> list[dict]:
    return DeltaTable(str(scenario.lake / table)).to_pyarrow_table().to_pylist()


def _wait_for_run(instance: dg.DagsterInstance, run_id: str, timeout: float) -> dg.DagsterRun:
    import time

    deadline = time.monotonic() + timeout
    while True:
        run = instance.get_run_by_id(run_id)
        assert run is not None, f"no run {run_id}"
        if run.is_finished:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still {run.status} after {timeout:.0f}s")
        time.sleep(1)


def test_reexecute_from_failure_in_the_ui_rebuilds_only_the_held_day(
    ui, dagster_ui, scenario, launched
):
    from backfill_assets_tests.e2e.conftest import scenario_env

    before = {
        d: [r for r in _lake_rows(scenario, "fact/daily_revenue") if r["event_date"] == d]
        for d in GOOD
    }
    folder = scenario.landing / "fx_rates" / f"rate_date={HELD.isoformat()}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "zz_eur_restated.csv").write_text("currency,usd_per_unit\nEUR,1.09500000\n")
    instance = dg.DagsterInstance.from_config(str(scenario.home))
    try:
        with scenario_env(scenario):  # the repaired rate reaches raw, as an operator would build it
            assert execute(RunPlan((RAW_FX_RATES,), HELD, HELD), instance).success
        [failed] = instance.get_runs(
            filters=dg.RunsFilter(tags={"dagster/backfill": launched["id"]})
        )
        assert failed.status == dg.DagsterRunStatus.FAILURE

        page = ui.page
        with ui.step(f"re-execute run {failed.run_id[:8]} from failure"):
            ui.goto(f"/runs/{failed.run_id}")
            page.locator('button[class*="dropdownArrow"]').first.click()
            page.get_by_text("From failure", exact=True).click()  # the menu under the arrow
            # The run belongs to a (completed) backfill: Dagster asks to confirm.
            dialog = page.get_by_role("dialog").filter(has_text="Re-execution within backfill")
            expect(dialog).to_be_visible()
            ui.screenshot("08-reexecute-within-backfill")
            dialog.get_by_role("button", name="Confirm").click()
            page.wait_for_url(lambda url: "/runs/" in url and failed.run_id not in url)
            new_id = page.url.rstrip("/").split("/runs/")[1].split("?")[0]
        with ui.step(f"wait for re-execution {new_id[:8]}"):
            run = _wait_for_run(instance, new_id, BACKFILL_TIMEOUT_S)
            page.reload()
            ui.screenshot("09-reexecuted-from-failure")
        assert run.status == dg.DagsterRunStatus.SUCCESS
        assert run.parent_run_id == failed.run_id
        rebuilt = Counter(
            (e.dagster_event.asset_key.to_user_string(), e.dagster_event.partition)
            for e in instance.all_logs(new_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
        )
        assert rebuilt == {(STG, HELD.isoformat()): 1, (FCT, HELD.isoformat()): 1}
    finally:
        instance.dispose()

    assert queries.partition_days(dagster_ui, STG)["MATERIALIZED"] == set(DAYS)
    repaired = Reference(scenario.landing, LATENESS)
    assert repaired.staging([HELD])[1] == set()  # the oracle now prices every order of the day
    fact = _lake_rows(scenario, "fact/daily_revenue")
    assert {
        (r["country"], r["orders"], r["revenue_usd"]) for r in fact if r["event_date"] == HELD
    } == {(f.country, f.orders, f.revenue_usd) for f in repaired.fact([HELD])}
    assert {d: [r for r in fact if r["event_date"] == d] for d in GOOD} == before  # untouched
