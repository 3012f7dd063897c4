"""The side lane (``side_lane.py``): a project of five probe tests, run by a real pytest with the
lane's hooks. The ``e2e`` and ``beside`` ones run in one other process, and the parent reports
each one's own outcome from there; alone, they run in the parent."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from backfill_assets_testkit.processes import kill_group, start, subprocess_env

CONFTEST = """
from backfill_assets_testkit.side_lane import (  # noqa: F401
    pytest_collection_modifyitems,
    pytest_runtest_protocol,
    pytest_unconfigure,
)


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: runs in the lane")
    config.addinivalue_line("markers", "beside: runs in the lane")
"""

PROBES = """
import os
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def ran(name):
    (HERE / f"{name}.pid").write_text(str(os.getpid()))
    with open(HERE / "runs.txt", "a") as runs:
        runs.write(f"{name}\\n")


def test_plain():
    ran("plain")


@pytest.mark.e2e
def test_passes():
    ran("passes")


@pytest.mark.e2e
def test_fails():
    ran("fails")
    assert 1 + 1 == 3, "the sums differ"


@pytest.mark.beside
def test_beside():
    ran("beside")


@pytest.mark.e2e
def test_skips():
    pytest.skip("no browser here")
"""


def run_probes(root: Path, *args: str) -> tuple[subprocess.Popen, str, dict[str, tuple]]:
    """pytest over the probes in ``root``: the finished process, its output, and each case's
    (outcome, text) as the parent's own JUnit report gives them."""
    (root / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (root / "test_probes.py").write_text(textwrap.dedent(PROBES))
    env = {k: v for k, v in subprocess_env().items() if not k.startswith("PYTEST_XDIST")}
    env.pop("BACKFILL_SIDE_LANE", None)  # a pytest of its own, not this one's lane or worker
    log = root / "pytest.log"
    pytest = [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider"]
    proc = start([*pytest, "--junitxml=report.xml"], env, log, cwd=root)
    try:
        proc.wait(timeout=300)
    finally:
        kill_group(proc)  # its whole group, the lane's child included, on a time-out too
    output = log.read_text(errors="replace")
    cases = {}
    for case in ET.parse(root / "report.xml").getroot().iter("testcase"):
        found = [child for child in case if child.tag in ("failure", "error", "skipped")]
        tag = found[0].tag if found else "passed"
        text = (found[0].get("message", "") + (found[0].text or "")) if found else ""
        cases[case.attrib["name"]] = (tag, text)
    return proc, output, cases


def pids(root: Path) -> dict[str, int]:
    return {path.stem: int(path.read_text()) for path in root.glob("*.pid")}


def test_the_lanes_tests_run_in_one_other_process_and_report_their_own_outcomes(tmp_path):
    proc, output, cases = run_probes(tmp_path)

    assert proc.returncode == 1, output  # one failure
    assert cases["test_plain"] == ("passed", "")
    assert cases["test_passes"] == ("passed", "")
    assert cases["test_fails"][0] == "failure"
    assert "the sums differ" in cases["test_fails"][1]
    assert cases["test_skips"][0] == "skipped"
    assert "no browser here" in cases["test_skips"][1]
    ran = pids(tmp_path)
    assert ran["plain"] == proc.pid
    assert cases["test_beside"] == ("passed", "")
    assert ran["passes"] == ran["fails"] == ran["beside"] != ran["plain"]


def test_alone_the_lanes_tests_run_in_the_parent(tmp_path):
    proc, output, cases = run_probes(tmp_path, "-m", "e2e or beside")

    assert proc.returncode == 1, output
    assert cases["test_passes"] == ("passed", "")
    assert cases["test_fails"][0] == "failure"
    ran = pids(tmp_path)
    assert "plain" not in ran
    assert ran["passes"] == ran["fails"] == ran["beside"] == proc.pid


def test_in_xdist_workers_the_lanes_tests_run_once_each_in_the_workers(tmp_path):
    """`pytest -n 2`: xdist's workers are the lanes; none starts a child of its own (each would
    run every test of the lane once more)."""
    proc, output, cases = run_probes(tmp_path, "-n", "2")

    assert proc.returncode == 1, output
    assert cases["test_passes"] == ("passed", "")
    assert cases["test_fails"][0] == "failure"
    assert cases["test_beside"] == ("passed", "")
    runs = Counter((tmp_path / "runs.txt").read_text().split())
    assert runs == {"plain": 1, "passes": 1, "fails": 1, "beside": 1}, output
