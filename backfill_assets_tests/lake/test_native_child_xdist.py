"""The native child (``conftest.py``) and pytest-xdist: a worker does not start a child of its
own (each would run every selected delta-spark case once more, with a JVM each); such a case
fails there, saying how to run it."""

from __future__ import annotations

import subprocess
import sys

from backfill_assets_testkit.processes import REPO, subprocess_env
from backfill_assets_tests.lake.lake_support import NATIVE_ENV

CASE = (
    "backfill_assets_tests/lake/test_lake_contract.py"
    "::test_lake_rewrite_replaces_partition_not_appends[delta-spark]"
)


def test_a_delta_spark_case_in_an_xdist_worker_fails_naming_the_way_to_run_it():
    env = {k: v for k, v in subprocess_env().items() if not k.startswith("PYTEST_XDIST")}
    env.pop(NATIVE_ENV, None)  # a pytest of its own, not this one's child or worker
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", CASE, "-n", "2", "-p", "no:cacheprovider", "-q"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    assert "1 error" in output, output  # at its set-up: no JVM was started
    assert "run them without -n (`make test` does)" in output, output
