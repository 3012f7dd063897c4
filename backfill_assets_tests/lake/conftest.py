"""Lake test fixtures: the engine-parametrised ``lake`` and the native delta-spark delegation.

The native engine needs a Spark session with Delta's jars, which the shared
session has not. When the jars exist, each ``delta-spark`` contract test is run
for real in one child pytest (``BACKFILL_LAKE_NATIVE_SESSION=1``) whose session
has them, and the parent's test passes or fails with the child's outcome.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from backfill_assets_tests.lake.lake_support import (
    NATIVE_ENV,
    NO_JARS,
    REPO,
    delta_jars,
    native_spark_conf,
    subprocess_env,
)

ENGINES = ["delta-rs", "delta-spark"]
IN_NATIVE_CHILD = os.environ.get(NATIVE_ENV) == "1"


@pytest.fixture(scope="session")
def native_spark():
    """Only inside the child pytest: a session with Delta's extension and jars."""
    from backfill_assets.spark_session import build_session

    session = build_session(native_spark_conf(delta_jars()))
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def native_outcomes(tmp_path_factory):
    """Run the delta-spark contract tests once in a child pytest; test name -> (outcome, text)."""
    report = tmp_path_factory.mktemp("native") / "report.xml"
    module = os.path.join(os.path.dirname(__file__), "test_lake_contract.py")
    subprocess.run(
        [sys.executable, "-m", "pytest", module, "-k", "delta-spark", "-p", "no:cacheprovider",
         "-q", f"--junitxml={report}"],
        cwd=REPO, env=subprocess_env(**{NATIVE_ENV: "1"}), capture_output=True, timeout=900,
        check=False,  # failures are read from the report, test by test
    )
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            outcomes[case.get("name")] = ("failed", bad.get("message", "") + (bad.text or ""))
        elif skipped is not None:
            outcomes[case.get("name")] = ("skipped", skipped.get("message", ""))
        else:
            outcomes[case.get("name")] = ("passed", "")
    return outcomes


@pytest.fixture(params=ENGINES)
def lake(request, tmp_path):
    from backfill_assets.lake import Lake

    if request.param == "delta-rs":
        return Lake(tmp_path / "lake", request.getfixturevalue("spark"), engine="delta-rs")
    if not delta_jars():
        pytest.skip(NO_JARS)
    if IN_NATIVE_CHILD:
        return Lake(tmp_path / "lake", request.getfixturevalue("native_spark"),
                    engine="delta-spark")
    return _NativeTwin(request.getfixturevalue("native_outcomes"))


class _NativeTwin:
    """Stands in for a Lake in the parent: the test's body ran in the native child."""

    def __init__(self, outcomes: dict[str, tuple[str, str]]) -> None:
        self.outcomes = outcomes


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """In the parent, a delta-spark test takes the outcome its twin had in the child."""
    twin = pyfuncitem.funcargs.get("lake")
    if not isinstance(twin, _NativeTwin):
        return None
    outcome, text = twin.outcomes.get(
        pyfuncitem.name, ("failed", "test did not run in the native child"))
    if outcome == "failed":
        pytest.fail(f"native delta-spark run failed:\n{text}", pytrace=False)
    if outcome == "skipped":
        pytest.skip(text)
    return True
