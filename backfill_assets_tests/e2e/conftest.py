"""Fixtures for the browser test: a landing zone with a held day, its raw layer, `dagster dev`, Chromium."""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from backfill_assets.catalog import RAW_FX_RATES, RAW_ORDERS
from backfill_assets.cli.planning import RunPlan
from backfill_assets.cli.runner import execute
from backfill_assets_tests.e2e.browser import Ui, chromium_page, chromium_path
from backfill_assets_tests.e2e.landing_data import (
    DAYS,
    HELD,
    LATENESS,
    PARTITION_START,
    raw_ranges,
    write_landing,
)
from backfill_assets_tests.e2e.servers import PROJECT_DIR, DagsterUI, server_env, start_dagster_dev
from backfill_assets_tests.reference import Reference

READY_TIMEOUT_S = 300


@dataclass(frozen=True)
class Scenario:
    landing: Path
    lake: Path
    home: Path
    reference: Reference

    def env(self) -> dict[str, str]:
        return server_env(self.home, self.landing, self.lake, PARTITION_START.isoformat())


@pytest.fixture(scope="module")
def e2e_output() -> Path:
    """Screenshots and the server log: $BACKFILL_E2E_OUTPUT, else test-output/e2e in the project."""
    out = Path(os.environ.get("BACKFILL_E2E_OUTPUT") or PROJECT_DIR / "test-output" / "e2e")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.png"):
        old.unlink()
    print(f"\ne2e output (screenshots, dagster-dev.log): {out}")
    return out


@pytest.fixture(scope="module")
def chromium_executable() -> str:
    path = chromium_path()
    if path is None:
        pytest.fail("Debian's chromium is not installed: `apt-get install -y chromium` (.ci/run does it)")
    return path


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Scenario:
    root = tmp_path_factory.mktemp("e2e")
    landing = root / "landing"
    write_landing(landing)
    reference = Reference(landing, LATENESS)
    # The oracle, not the pipeline, says which day of the range must be held.
    assert reference.staging(DAYS)[1] == {HELD}
    home = root / "dagster_home"
    home.mkdir()
    shutil.copy(PROJECT_DIR / "dagster.yaml", home / "dagster.yaml")
    return Scenario(landing, root / "lake", home, reference)


@contextlib.contextmanager
def scenario_env(scenario: Scenario):
    """This process's environment pointed at the scenario, for runs executed in the test process."""
    with pytest.MonkeyPatch.context() as mp:
        for key, value in scenario.env().items():
            if key.startswith(("BACKFILL_", "DAGSTER_HOME")):
                mp.setenv(key, value)
        yield


def build_raw(scenario: Scenario, instance: dg.DagsterInstance) -> None:
    """raw_orders and raw_fx_rates for what staging of the range reads, as real runs in the instance."""
    arrivals, rates = raw_ranges(scenario.reference.arrival_dates)
    with scenario_env(scenario):
        for plan in (RunPlan((RAW_ORDERS,), *arrivals), RunPlan((RAW_FX_RATES,), *rates)):
            outcome = execute(plan, instance)
            assert outcome.success, f"raw {plan}: {outcome.error}"


@pytest.fixture(scope="module")
def dagster_ui(scenario, spark, e2e_output, chromium_executable):
    """`dagster dev` on a free 127.0.0.1 port; the raw layer is built in this process meanwhile."""
    # The instance's storage exists before two processes open it.
    instance = dg.DagsterInstance.from_config(str(scenario.home))
    ui = start_dagster_dev(scenario.env(), e2e_output / "dagster-dev.log")
    try:
        try:
            build_raw(scenario, instance)
        finally:
            instance.dispose()
        ui.wait_until_ready(READY_TIMEOUT_S)
        print(f"dagster dev: {ui.base_url} (DAGSTER_HOME={scenario.home})")
        yield ui
    finally:
        ui.stop()


@pytest.fixture(scope="module")
def ui(dagster_ui: DagsterUI, chromium_executable: str, e2e_output: Path):
    with chromium_page(chromium_executable) as page:
        yield Ui(page, dagster_ui.base_url, e2e_output, server_log=dagster_ui.log_path)
