"""In a real browser: a 30-day range of raw_orders launched from the UI, stopped mid-job from the
run's page (Terminate) and from the backfill's page (Cancel). Each run reads Canceled within
30 s, with no step retry and no retry run, and publishes nothing: every day wholly before."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest
from playwright.sync_api import expect

from backfill_assets.cli.instance import prepare_instance_yaml
from backfill_assets.demo.generate import generate_feed
from backfill_assets_testkit.dagster_dev import (
    PROJECT_DIR,
    DagsterUI,
    running_dagster_dev,
    server_env,
)
from backfill_assets_tests.e2e import queries
from backfill_assets_tests.e2e.browser import Ui, chromium_page

pytestmark = pytest.mark.e2e

FIRST, LAST = date(2024, 1, 1), date(2024, 1, 30)
RANGE_TEXT = f"[{FIRST.isoformat()}...{LAST.isoformat()}]"
READY_TIMEOUT_S = 300
LAUNCH_TIMEOUT_S = 300  # the queued run started, its JVM up, its job writing
STOP_TIMEOUT_S = 30  # the click to Canceled: the bound the runbook promises
RETRY_WATCH_S = 20  # long enough for the daemon's run-retry pass to have acted
BACKFILL_TAG = "dagster/backfill"


@dataclass(frozen=True)
class Stopping:
    ui: Ui
    server: DagsterUI
    root: Path  # its landing, lake, instance and pause folder


@pytest.fixture(scope="module")
def stopping(tmp_path_factory, e2e_output, chromium_executable) -> Iterator[Stopping]:
    """`dagster dev` over 30 landed days whose raw writes wait mid-job (the test seam in the
    Spark task, as a long write would), and a browser on it."""
    root = tmp_path_factory.mktemp("stop")
    generate_feed(root / "landing", FIRST, LAST, orders_per_day=10, seed=31, max_lateness_days=0)
    home = root / "dagster_home"
    home.mkdir()
    prepare_instance_yaml(home, PROJECT_DIR / "dagster.yaml")
    (root / "pause").mkdir()
    env = server_env(home, root / "landing", root / "lake", FIRST.isoformat()) | {
        "BACKFILL_MAX_LATENESS_DAYS": "0",
        "BACKFILL_LAKE_PAUSE_DIR": str(root / "pause"),
        "BACKFILL_LAKE_PAUSE_AT": "mid_files",
    }
    with (
        running_dagster_dev(env, e2e_output / "dagster-dev-stop.log", READY_TIMEOUT_S) as server,
        chromium_page(chromium_executable) as page,
    ):
        yield Stopping(Ui(page, server.base_url, e2e_output, server.log_path), server, root)


def launch_raw_backfill(ui: Ui, root: Path) -> str:
    """raw_orders over the 30 days, launched as a person does; the backfill's id. A pause
    marker an earlier test's run left behind (a second task of its job) is cleared first."""
    for stale in (root / "pause").glob("*.reached"):
        stale.unlink()
    page = ui.page
    with ui.step("open raw_orders and its launch dialog"):
        ui.goto("/assets/raw_orders")
        page.get_by_role("button", name=re.compile(r"Materialize…")).first.click()
        dialog = page.get_by_role("dialog")
        expect(dialog).to_contain_text("Launch runs to materialize raw_orders")
        dialog.get_by_text("Show all partitions").click()  # the days are years old
        field = dialog.locator("input[placeholder^='ex: ']")
        field.fill(RANGE_TEXT)
        field.press("Enter")
        expect(dialog).to_contain_text("30 partitions")
    with ui.step("launch the backfill"):
        dialog.get_by_role("button", name="Launch backfill").click()
        toast = page.get_by_text(re.compile(r"Created backfill \w+"))
        expect(toast).to_be_visible()
        found = re.search(r"Created backfill (\w+)", toast.inner_text())
        assert found is not None
        return found.group(1)


def running_run(stopping: Stopping, backfill_id: str) -> str:
    """The backfill's one run, once its job waits mid-write (a marker an earlier test's run
    left is cleared before launching: ``launch_raw_backfill``)."""
    server = stopping.server
    marker = stopping.root / "pause" / "mid_files.1.reached"
    deadline = time.monotonic() + LAUNCH_TIMEOUT_S
    runs: list = []
    while not (marker.exists() and runs):
        assert time.monotonic() < deadline, f"no run reached its job:\n{server.log_tail()}"
        time.sleep(0.5)
        runs = queries.runs_tagged(server, **{BACKFILL_TAG: backfill_id})
    marker.unlink()  # the next run's worker counts its visits from 1 again
    [run] = runs
    assert run["status"] == "STARTED", run
    return run["runId"]


def assert_stopped_cleanly(stopping: Stopping, backfill_id: str, run_id: str) -> None:
    """The run alone (no retry run), canceled, no step retried, nothing published."""
    server = stopping.server
    time.sleep(RETRY_WATCH_S)
    runs = queries.runs_tagged(server, **{BACKFILL_TAG: backfill_id})
    assert [(r["runId"], r["status"]) for r in runs] == [(run_id, "CANCELED")]
    retries = server.graphql(STEP_RETRIES, runId=run_id)["logsForRun"]["events"]
    assert [e for e in retries if e["__typename"] == "ExecutionStepUpForRetryEvent"] == []
    lake = stopping.root / "lake"
    assert sorted(lake.glob("*/*/_delta_log/*.json")) == []  # no day of any table published


STEP_RETRIES = """query($runId: ID!) { logsForRun(runId: $runId) {
    ... on EventConnection { events { __typename } } } }"""


def test_terminate_on_the_run_page_cancels_it_within_30_seconds(stopping):
    ui = stopping.ui
    backfill_id = launch_raw_backfill(ui, stopping.root)
    run_id = running_run(stopping, backfill_id)
    page = ui.page
    with ui.step("terminate the run from its page"):
        ui.goto(f"/runs/{run_id}")
        page.get_by_role("button", name=re.compile(r"Terminate$")).click()  # beside its icon
        dialog = page.get_by_role("dialog")
        began = time.monotonic()
        dialog.get_by_role("button", name=re.compile(r"Terminate")).click()
    with ui.step("the run reads Canceled"):
        expect(page.get_by_text("Canceled", exact=True).first).to_be_visible(
            timeout=STOP_TIMEOUT_S * 1000
        )
        took = time.monotonic() - began
        ui.screenshot("stop-01-terminated-run")
    assert took <= STOP_TIMEOUT_S
    assert_stopped_cleanly(stopping, backfill_id, run_id)


def test_cancel_on_the_backfill_page_cancels_its_run(stopping):
    ui, server = stopping.ui, stopping.server
    backfill_id = launch_raw_backfill(ui, stopping.root)
    run_id = running_run(stopping, backfill_id)
    page = ui.page
    with ui.step("cancel the backfill from its page"):
        ui.goto(f"/runs/b/{backfill_id}")
        expect(page.get_by_text("Partitions targeted")).to_be_visible()
        page.get_by_role("button", name="expand_more").click()  # the page's menu
        page.get_by_text(re.compile(r"^Cancel backfill")).click()
        dialog = page.get_by_role("dialog")
        began = time.monotonic()
        dialog.get_by_role("button", name=re.compile(r"Cancel backfill")).click()
    with ui.step("the backfill and its run end canceled"):
        queries.wait_for_run(server, run_id, STOP_TIMEOUT_S)
        took = time.monotonic() - began
        status = queries.wait_for_backfill(server, backfill_id, STOP_TIMEOUT_S)
        page.reload()
        ui.screenshot("stop-02-canceled-backfill")
    assert took <= STOP_TIMEOUT_S
    assert status == "CANCELED"
    assert_stopped_cleanly(stopping, backfill_id, run_id)
