"""In a real browser, on the real webserver and daemon: a correction from the Dagster UI alone.

The rate provider restates two days of EUR rates. An engineer starts the correction from
``correction_start_job``'s form; the ``correction_requests`` sensor runs raw over the range,
then builds the correction. The engineer reads the diff's totals on the correction's page, cuts
it over, rolls it back and discards it, each from its job's form. Every number read from the
page is compared with the reference implementation on the original or the restated landing."""

from __future__ import annotations

import re
import shutil
import time
from datetime import date, timedelta
from decimal import Decimal

import dagster as dg
import pytest
from playwright.sync_api import expect

from backfill_assets.catalog import (
    BACKFILL_JOB,
    CORRECTION_CUTOVER_JOB,
    CORRECTION_DIFF_JOB,
    CORRECTION_DISCARD_JOB,
    CORRECTION_JOB,
    CORRECTION_ROLLBACK_JOB,
    CORRECTION_START_JOB,
    CORRECTION_TAG,
    PLAN_TAG,
)
from backfill_assets.cli.backfill import run_backfill
from backfill_assets.cli.instance import prepare_instance_yaml
from backfill_assets.demo.generate import generate_feed, restate_rates
from backfill_assets.settings import Settings
from backfill_assets_testkit.dagster_dev import PROJECT_DIR, running_dagster_dev
from backfill_assets_testkit.reference import Reference
from backfill_assets_tests.e2e import queries
from backfill_assets_tests.e2e.browser import Ui, chromium_page
from backfill_assets_tests.e2e.conftest import READY_TIMEOUT_S, Scenario, scenario_env

pytestmark = pytest.mark.e2e

FEED_START, FEED_END = date(2024, 1, 1), date(2024, 1, 9)
START, END = date(2024, 1, 2), date(2024, 1, 7)  # production
FIX_START, FIX_END = date(2024, 1, 3), date(2024, 1, 5)  # the correction
RESTATED = (date(2024, 1, 3), date(2024, 1, 4))  # the rate dates the provider restates
FACTOR = Decimal("1.03")  # within the cutover's guardrail
CID = "eur-restated-in-the-ui"
REASON = "the provider restated EUR rates of Jan 3 and 4"
RUN_TIMEOUT_S = 420
FIXED = [FIX_START + timedelta(days=i) for i in range((FIX_END - FIX_START).days + 1)]


@pytest.fixture(scope="module")
def tour(tmp_path_factory) -> Scenario:
    root = tmp_path_factory.mktemp("ui-correction")
    landing = root / "landing"
    generate_feed(landing, FEED_START, FEED_END, orders_per_day=20, seed=29)
    shutil.copytree(landing, root / "original_landing")
    home = root / "dagster_home"
    home.mkdir()
    prepare_instance_yaml(home, PROJECT_DIR / "dagster.yaml")  # as `make setup` prepares one
    return Scenario(landing, root / "lake", home, Reference(landing), FEED_START)


@pytest.fixture(scope="module")
def original(tour) -> Reference:
    return Reference(tour.landing.parent / "original_landing")


@pytest.fixture(scope="module")
def server(tour, spark, e2e_output, chromium_executable):
    """`dagster dev` with the sensors ticking every 5 s; production is backfilled over
    START..END from the command line's code path while it starts."""

    def production() -> None:
        with scenario_env(tour):
            assert run_backfill(Settings.from_env(), START, END) == 0

    dg.DagsterInstance.from_config(str(tour.home)).dispose()  # its storage, before two open it
    env = {**tour.env(), "BACKFILL_SENSOR_INTERVAL_SECONDS": "5"}
    with running_dagster_dev(
        env, e2e_output / "dagster-dev-correction.log", READY_TIMEOUT_S, meanwhile=production
    ) as ui:
        yield ui


@pytest.fixture(scope="module")
def ui(server, chromium_executable, e2e_output):
    with chromium_page(chromium_executable) as page:
        yield Ui(page, server.base_url, e2e_output, server_log=server.log_path)


def launch(ui: Ui, server, job: str, op: str, config: dict, shot: str | None = None) -> str:
    """Fill in ``job``'s form in the Launchpad as YAML, launch it; the run's id."""
    page = ui.page
    lines = [f"ops:\n  {op}:\n    config:"]
    lines += [f"      {k}: {_yaml(v)}" for k, v in config.items()]
    text = "\n".join(lines) + "\n"
    with ui.step(f"the {job} form"):
        ui.goto(f"/locations/{queries.location_name(server)}/jobs/{job}/playground")
        editor = page.locator(".CodeMirror").first
        expect(editor).to_be_visible()
        editor.click()
        page.keyboard.press("Control+A")
        page.keyboard.insert_text(text)
        button = page.get_by_role("button", name="Launch Run")
        expect(button).to_be_enabled()
        if shot:
            ui.screenshot(f"c-{job}", docs=shot)
    with ui.step(f"launch {job}"):
        button.click()
        page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}"))
        found = re.search(r"/runs/([0-9a-f-]{36})", page.url)
        assert found is not None, page.url
        return found.group(1)


def _yaml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return '"' + str(value).replace('"', '\\"') + '"'


def run_succeeds(ui: Ui, server, run_id: str) -> None:
    with ui.step(f"wait for run {run_id[:8]}"):
        run = queries.wait_for_run(server, run_id, RUN_TIMEOUT_S)
        ui.goto(f"/runs/{run_id}")
        assert run["status"] == "SUCCESS", run


def metadata_row(page, label: str) -> str:
    """The value of the metadata entry ``label`` in the event shown."""
    row = page.locator(f"xpath=//tr[not(ancestor::tr)][td[1][normalize-space(.)='{label}']]")
    expect(row).to_have_count(1)
    return row.locator("xpath=td[2]").inner_text().strip()


def totals(reference: Reference) -> tuple[int, int, Decimal]:
    """Orders, paid orders and revenue of the corrected days, per the reference."""
    fact = reference.fact(FIXED)
    return (
        sum(f.orders for f in fact),
        sum(f.paid_orders for f in fact),
        sum((f.revenue_usd for f in fact), Decimal(0)),
    )


def correction_state(ui: Ui) -> str:
    """The correction's state, as its latest observation on the ``corrections`` asset shows."""
    ui.goto(f"/assets/corrections?view=events&partition={CID}")
    return metadata_row(ui.page, "state")


def marker_shown(ui: Ui, shot: str | None = None) -> set[str]:
    """The "correction pending" marker of each corrected day's staging partition, on its
    latest event."""
    shown = set()
    for day in FIXED:
        ui.goto(f"/assets/stg_orders?view=events&partition={day}")
        shown.add(metadata_row(ui.page, "correction_pending"))
        if shot and day == FIXED[0]:
            ui.screenshot(shot)
    return shown


def fact_shown(
    ui: Ui, action: str, shot: str | None = None
) -> dict[date, tuple[int, int, Decimal]]:
    """Per corrected day, the fact's figures on its latest event: the ``action``'s commit; a
    screenshot ``shot`` of the first restated day."""
    shown = {}
    for day in FIXED:
        with ui.step(f"fct_daily_revenue of {day} after the {action}"):
            ui.goto(f"/assets/fct_daily_revenue?view=events&partition={day}")
            assert metadata_row(ui.page, "correction_action") == action
            shown[day] = (
                int(metadata_row(ui.page, "orders")),
                int(metadata_row(ui.page, "paid_orders")),
                Decimal(metadata_row(ui.page, "revenue_usd_exact")),
            )
            if shot and day == RESTATED[0]:
                ui.screenshot(f"c-fact-after-{action}", docs=shot)
    return shown


def per_day(reference: Reference) -> dict[date, tuple[int, int, Decimal]]:
    out = {}
    for day in FIXED:
        fact = reference.fact([day])
        out[day] = (
            sum(f.orders for f in fact),
            sum(f.paid_orders for f in fact),
            sum((f.revenue_usd for f in fact), Decimal(0)),
        )
    return out


def test_a_correction_from_the_ui_alone(ui, server, tour, original):
    page = ui.page
    # 1. the provider restates two days of EUR rates: new files land beside the originals
    assert restate_rates(tour.landing, "EUR", *RESTATED, FACTOR) == 2
    restated = Reference(tour.landing)
    assert per_day(restated) != per_day(original), "the restatement changes no corrected day"

    # 2. the correction from its form; the sensor runs raw over the range, then builds it
    form = {"start": FIX_START, "end": FIX_END, "reason": REASON, "correction_id": CID}
    request = launch(
        ui, server, CORRECTION_START_JOB, "request_correction", form, "correction-form.png"
    )
    run_succeeds(ui, server, request)
    with ui.step("the sensor runs raw over the range, then builds the correction"):
        raw = queries.wait_for_runs(server, BACKFILL_JOB, 2, RUN_TIMEOUT_S, **{PLAN_TAG: request})
        assert [r["status"] for r in raw] == ["SUCCESS", "SUCCESS"], raw
        [build] = queries.wait_for_runs(
            server, CORRECTION_JOB, 1, RUN_TIMEOUT_S, **{CORRECTION_TAG: CID}
        )
        assert build["status"] == "SUCCESS", build
    assert correction_state(ui) == "staged"
    with ui.step("each corrected day's staging partition shows the correction pending"):
        assert marker_shown(ui, "c-pending-marker") == {CID}

    # 3. the diff; its totals read from the correction's report on its page
    run_succeeds(
        ui,
        server,
        launch(ui, server, CORRECTION_DIFF_JOB, "diff_correction", {"correction_id": CID}),
    )
    with ui.step("the diff's totals on the correction's page"):
        assert correction_state(ui) == "diffed"
        # Dagster shows a long markdown value behind a button, in a dialog
        button = page.get_by_text("[Show Markdown]", exact=True)
        if button.count():
            button.first.click()
        row = page.locator("xpath=//tr[td[1][normalize-space(.)='total']]")
        expect(row).to_have_count(1)
        cells = row.inner_text().split()
        ui.screenshot("c-correction-report", docs="correction-report.png")
        page.keyboard.press("Escape")
    (orders_b, orders_a, paid_b, paid_a, revenue_b, revenue_a, delta) = cells[1:8]
    assert (int(orders_b), int(paid_b), Decimal(revenue_b)) == totals(original)
    assert (int(orders_a), int(paid_a), Decimal(revenue_a)) == totals(restated)
    assert Decimal(delta) == totals(restated)[2] - totals(original)[2]

    # 4. cutover: the fact's figures the UI shows are the restated landing's
    cutover = launch(
        ui, server, CORRECTION_CUTOVER_JOB, "cut_over_correction", {"correction_id": CID}
    )
    run_succeeds(ui, server, cutover)
    assert correction_state(ui) == "cut over"
    assert fact_shown(ui, "cutover", "correction-cutover.png") == per_day(restated)

    # 5. rollback: the original's again
    rollback = launch(
        ui, server, CORRECTION_ROLLBACK_JOB, "roll_back_correction", {"correction_id": CID}
    )
    run_succeeds(ui, server, rollback)
    assert correction_state(ui) == "rolled back"
    assert fact_shown(ui, "rollback") == per_day(original)

    # 6. discard
    discard = launch(
        ui, server, CORRECTION_DISCARD_JOB, "discard_correction", {"correction_id": CID}
    )
    run_succeeds(ui, server, discard)
    assert correction_state(ui) == "discarded"
    with ui.step("no correction pending on its days any more"):
        assert marker_shown(ui) == {"none"}
    # every action is a run tagged with the correction's id
    tagged = {r["jobName"] for r in queries.runs_tagged(server, **{CORRECTION_TAG: CID})}
    assert {
        CORRECTION_START_JOB,
        CORRECTION_JOB,
        CORRECTION_DIFF_JOB,
        CORRECTION_CUTOVER_JOB,
        CORRECTION_ROLLBACK_JOB,
        CORRECTION_DISCARD_JOB,
    } <= tagged


def test_a_form_without_a_reason_fails_its_run_saying_so_and_builds_nothing(ui, server, tour):
    form = {"start": FIX_START, "end": FIX_END, "reason": " ", "correction_id": "no-reason"}
    run_id = launch(ui, server, CORRECTION_START_JOB, "request_correction", form)
    with ui.step("the refused request's run"):
        run = queries.wait_for_run(server, run_id, RUN_TIMEOUT_S)
        assert run["status"] == "FAILURE", run
        ui.goto(f"/runs/{run_id}")
        expect(ui.page.get_by_text(re.compile("needs a reason")).first).to_be_visible()
        expect(ui.page.get_by_text(re.compile("Nothing was built")).first).to_be_visible()
    time.sleep(10)  # two sensor intervals: the sensor asks for nothing on a failed request
    assert queries.runs_tagged(server, **{PLAN_TAG: run_id}) == []
    assert not (tour.lake / "_corrections" / "no-reason.json").exists()
