"""A run with ``--skip-allowlist`` (``make test``'s) fails when a test was skipped that the list
does not name, printing each, and passes when every skip is listed; a line with no reason is
refused. The repository's own list is well formed and ``make test`` passes it."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

from backfill_assets_testkit.processes import REPO, subprocess_env
from backfill_assets_testkit.skip_allowlist import read_allowlist

PROBES = """
import pytest

def test_passes():
    pass

def test_skips_listed():
    pytest.skip("does not apply here")

@pytest.mark.parametrize("case", ["a", "b"])
def test_skips_by_pattern(case):
    pytest.skip("neither applies")

@pytest.mark.skipif(True, reason="a dependency is missing")
def test_skips_unlisted():
    pass

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    assert False
"""


def run_probes(tmp_path: Path, allowlist: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_probes.py").write_text(textwrap.dedent(PROBES))
    (tmp_path / "allow.txt").write_text(textwrap.dedent(allowlist))
    plugin = ["-p", "backfill_assets_testkit.skip_allowlist", "--skip-allowlist=allow.txt"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "test_probes.py", "-p", "no:cacheprovider", *plugin],
        cwd=tmp_path,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


LISTED = """
    # comments and blank lines are allowed

    test_probes.py::test_skips_listed  # the case does not apply
    test_probes.py::test_skips_by_pattern[*]  # nor do these
"""


def test_a_skip_not_on_the_list_fails_the_run_naming_it(tmp_path):
    done = run_probes(tmp_path, LISTED)
    assert done.returncode == 1, done.stdout
    refused = re.findall(r"^SKIPPED (\S+): (.*)$", done.stdout, re.MULTILINE)
    assert refused == [("test_probes.py::test_skips_unlisted", "a dependency is missing")]
    assert "1 passed, 4 skipped, 1 xfailed" in done.stdout


def test_a_run_whose_skips_are_all_listed_passes(tmp_path):
    done = run_probes(tmp_path, LISTED + "    test_probes.py::test_skips_unlisted  # probe\n")
    assert done.returncode == 0, done.stdout
    assert "SKIPPED test_probes" not in done.stdout


def test_a_line_without_a_reason_is_refused(tmp_path):
    done = run_probes(tmp_path, "test_probes.py::test_skips_listed\n")
    assert done.returncode == 4  # pytest's usage error
    assert "allow.txt:1: each line is `<node id or pattern>  # <reason>`" in done.stderr


def test_make_test_checks_the_repositorys_list():
    entries = read_allowlist(REPO / ".ci" / "skip-allowlist.txt")
    assert entries and all(entry.reason for entry in entries)
    recipe = (REPO / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "-m pytest --skip-allowlist=.ci/skip-allowlist.txt" in recipe
