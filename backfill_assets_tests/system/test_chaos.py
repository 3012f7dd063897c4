"""The short version of the fault harness (bench/chaos.py): SIGKILLs of a real all-layer
backfill at seeded moments, each followed by a resume, checked against the reference.

Before runs released the runs of a killed process, the resume waited for ever on the dead
run's slot of the ``spark`` pool: this test hung and failed on its time limit.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
KILLS = 2

pytestmark = pytest.mark.slow


def test_kills_with_resume_leave_every_partition_equal_to_the_reference(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(PROJECT / "bench" / "chaos.py"),
            "--kills",
            str(KILLS),
            "--days",
            "2",
            "--orders-per-day",
            "40",
            "--fuzz-cases",
            "0",
            "--live-backfill-days",
            "0",
            "--seed",
            "5",
            "--run-timeout",
            "300",
            "--workdir",
            str(tmp_path / "chaos"),
        ],
        check=False,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=840,
    )
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = re.fullmatch(
        r"CHAOS kills=(\d+) torn=(\d+) duplicate_keys=(\d+) lost_rows=(\d+) "
        r"mismatched_partitions=(\d+) live_conflicts_retried=(\d+) fuzz_cases=(\d+) "
        r"crashes=(\d+)",
        lines[-1],
    )
    assert last, lines[-5:]
    kills, torn, duplicates, lost, mismatched, _, _, crashes = map(int, last.groups())
    assert (kills, torn, duplicates, lost, mismatched, crashes) == (KILLS, 0, 0, 0, 0, 0), (
        "\n".join(lines)
    )
    assert sum(line.startswith("kill ") for line in lines) == KILLS
