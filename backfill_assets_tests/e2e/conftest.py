"""Fixtures for the browser tests: a landing zone with a held day and its raw layer, or what
`make demo` leaves; `dagster dev` on either; Chromium."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from backfill_assets.backfill_plan import RunPlan
from backfill_assets.catalog import RAW_FX_RATES, RAW_ORDERS
from backfill_assets.cli.instance import prepare_instance_yaml
from backfill_assets.cli.runner import execute
from backfill_assets.settings import FIRST_PARTITION_FILE
from backfill_assets_testkit.dagster_dev import (
    PROJECT_DIR,
    DagsterUI,
    running_dagster_dev,
    server_env,
)
from backfill_assets_testkit.reference import Reference
from backfill_assets_tests.e2e.browser import Ui, chromium_page, chromium_path
from backfill_assets_tests.e2e.landing_data import (
    DAYS,
    HELD,
    LATENESS,
    PARTITION_START,
    raw_ranges,
    write_landing,
)

READY_TIMEOUT_S = 300
DEMO_TIMEOUT_S = 900


@dataclass(frozen=True)
class Scenario:
    landing: Path
    lake: Path
    home: Path
    reference: Reference
    first_partition: date = PARTITION_START

    def env(self) -> dict[str, str]:
        return server_env(self.home, self.landing, self.lake, self.first_partition.isoformat())


@dataclass(frozen=True, kw_only=True)
class Demo(Scenario):
    """What `make demo` left: its first partition as recorded in the instance, when it ran."""

    yesterday: date  # UTC, when the demo started
    seconds: float

    def env(self) -> dict[str, str]:
        """As `make ui` leaves it: BACKFILL_START_DATE unset, the recorded date decides."""
        return server_env(self.home, self.landing, self.lake, None)


@pytest.fixture(scope="session")
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
        pytest.fail(
            "Debian's chromium is not installed: `apt-get install -y chromium` (.ci/run does it)"
        )
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
    prepare_instance_yaml(home, PROJECT_DIR / "dagster.yaml")  # as `make setup` prepares one
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
    """raw_orders and raw_fx_rates for what staging of the range reads, as real runs in the
    instance."""
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

    def raw_layer() -> None:
        try:
            build_raw(scenario, instance)
        finally:
            instance.dispose()

    with running_dagster_dev(
        scenario.env(), e2e_output / "dagster-dev.log", READY_TIMEOUT_S, meanwhile=raw_layer
    ) as ui:
        yield ui


@pytest.fixture(scope="module")
def demo(tmp_path_factory, e2e_output, chromium_executable) -> Demo:
    """`make demo` in a fresh instance, landing zone and lake: `make setup`'s instance step, then
    the demo with its defaults, each a process of its own as make runs it."""
    root = tmp_path_factory.mktemp("demo")
    home, landing, lake = root / "dagster_home", root / "landing", root / "lake"
    env = server_env(home, landing, lake, None)  # the demo chooses its first partition
    log = e2e_output / "demo.log"
    yesterday, began = datetime.now(UTC).date() - timedelta(days=1), time.monotonic()
    with open(log, "wb") as out:
        for args in (
            ["backfill_assets.cli.instance", "dagster.yaml", str(home)],
            ["backfill_assets.cli", "demo"],
        ):
            done = subprocess.run(
                [sys.executable, "-m", *args],
                cwd=PROJECT_DIR,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=DEMO_TIMEOUT_S,
                check=False,
            )
            if done.returncode:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
                pytest.fail(f"{' '.join(args)} exited with {done.returncode}; {log}:\n{tail}")
    seconds = time.monotonic() - began
    print(f"make demo's steps took {seconds:.0f}s; output in {log}")
    first = date.fromisoformat((lake / FIRST_PARTITION_FILE).read_text(encoding="utf-8").strip())
    return Demo(
        landing, lake, home, Reference(landing), first, yesterday=yesterday, seconds=seconds
    )


@pytest.fixture(scope="module")
def ui(dagster_ui: DagsterUI, chromium_executable: str, e2e_output: Path):
    with chromium_page(chromium_executable) as page:
        yield Ui(page, dagster_ui.base_url, e2e_output, server_log=dagster_ui.log_path)
