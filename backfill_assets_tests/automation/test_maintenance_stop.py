"""Terminate (SIGTERM) during the weekly maintenance: the run's step fails without retry, saying
so; the commit under way lands whole; no later step or table is touched."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from backfill_assets.catalog import LAKE_TABLES
from backfill_assets_testkit.processes import kill_group, log_tail, start, subprocess_env
from backfill_assets_tests.lake.lake_support import wait_for

pytestmark = pytest.mark.slow
DAYS = ["2024-01-01", "2024-01-02"]
STOP_SECONDS = 60


def small_files(path, column: str) -> None:
    """Three small files per day: something for compaction to do."""
    for n in range(3):
        write_deltalake(
            str(path),
            pa.table({column: pa.array(DAYS).cast(pa.date32()), "n": [n] * len(DAYS)}),
            mode="overwrite" if n == 0 else "append",
            partition_by=[column],
        )


def operations(path) -> list[str]:
    return [h["operation"] for h in reversed(DeltaTable(str(path)).history())]


def test_sigterm_during_maintenance_lands_the_commit_under_way_and_starts_nothing_after(
    tmp_path, monkeypatch
):
    lake = tmp_path / "lake"
    first, second = LAKE_TABLES[0], LAKE_TABLES[1]
    for table in (first, second):
        small_files(lake / table.path, table.partition_column)
    before = {t.path: operations(lake / t.path) for t in (first, second)}
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    env = subprocess_env(
        BACKFILL_LAKE_PAUSE_DIR=str(pauses),
        BACKFILL_LAKE_PAUSE_AT="before_commit",
        BACKFILL_LAKE_ENGINE="delta-rs",
        BACKFILL_SPARK_SHUFFLE_PARTITIONS="2",
    )
    env.pop("BACKFILL_RETENTION_DAYS", None)
    log = tmp_path / "child.log"
    child = start(
        [sys.executable, "-m", "backfill_assets_tests.automation.maintenance_child", str(lake)],
        env,
        log,
    )
    try:
        # The first table's compaction, paused just before its commit.
        wait_for(pauses / "before_commit.1.reached", [child], 300)
        child.send_signal(signal.SIGTERM)
        time.sleep(1)  # the signal handled while the commit is still paused
        (pauses / "before_commit.1.resume").touch()
        child.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"maintenance did not stop within {STOP_SECONDS} s:\n{log_tail(log)}")
    finally:
        kill_group(child)
    lines = [line for line in log.read_text().splitlines() if line.startswith("{")]
    assert lines, log_tail(log)
    said = json.loads(lines[-1])
    assert said["success"] is False and said["retries"] == 0
    [failure] = said["failures"]
    assert "stopped by SIGTERM" in (failure["description"] or ""), failure
    # The compaction under way landed whole; the checkpoint after it was not written.
    done = operations(lake / first.path)
    assert done[: len(before[first.path])] == before[first.path]
    new = done[len(before[first.path]) :]  # the retention properties, the vacuum, the compaction
    assert new[-1] == "OPTIMIZE" and new.count("OPTIMIZE") == 1, new
    assert set(new) <= {"SET TBLPROPERTIES", "VACUUM START", "VACUUM END", "OPTIMIZE"}, new
    assert not (lake / first.path / "_delta_log" / "_last_checkpoint").exists()
    compacted = DeltaTable(str(lake / first.path))
    assert len(compacted.file_uris()) == len(DAYS)
    assert sorted(r["n"] for r in compacted.to_pyarrow_table().to_pylist()) == [0, 0, 1, 1, 2, 2]
    # The second table was not touched at all.
    assert operations(lake / second.path) == before[second.path]
    assert len(DeltaTable(str(lake / second.path)).file_uris()) == 3 * len(DAYS)
