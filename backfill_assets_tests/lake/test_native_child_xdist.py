"""The native child (``conftest.py``) and pytest-xdist: a worker does not start a child of its
own (each would run every selected delta-spark case once more, with a JVM each); such a case
fails there, saying how to run it."""

from __future__ import annotations

import sys

from backfill_assets_testkit.processes import REPO, kill_group, start, subprocess_env
from backfill_assets_tests.lake.lake_support import NATIVE_ENV

CASE = (
    "backfill_assets_tests/lake/test_lake_contract.py"
    "::test_lake_rewrite_replaces_partition_not_appends[delta-spark]"
)


def test_a_delta_spark_case_in_an_xdist_worker_fails_naming_the_way_to_run_it(tmp_path):
    env = {k: v for k, v in subprocess_env().items() if not k.startswith("PYTEST_XDIST")}
    env.pop(NATIVE_ENV, None)  # a pytest of its own, not this one's child or worker
    log = tmp_path / "pytest.log"
    pytest = [sys.executable, "-m", "pytest", CASE, "-n", "2", "-p", "no:cacheprovider", "-q"]
    proc = start(pytest, env, log, cwd=REPO)
    try:
        proc.wait(timeout=600)
    finally:
        kill_group(proc)  # its workers too, on a time-out as well
    output = log.read_text(errors="replace")
    assert proc.returncode == 1, output
    assert "1 error" in output, output  # at its set-up: no JVM was started
    assert "run them without -n (`make test` does)" in output, output
