"""`backfill-assets maintain`, end to end in its own process, on a small lake of real Delta
tables written by delta-rs: every catalog table vacuumed with the retention honoured, its small
files compacted with every row kept, a checkpoint written; a retention below the floor refused."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from backfill_assets.catalog import LAKE_TABLES

REPO = Path(__file__).resolve().parents[2]
DAY_S = 24 * 3600


def run_maintain(lake_dir: Path, retention: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKFILL_")}
    env.update(
        {
            "BACKFILL_LAKE_DIR": str(lake_dir),
            "BACKFILL_LANDING_DIR": str(lake_dir.parent),
            "PYTHONPATH": str(REPO),
        }
    )
    if retention is not None:
        env["BACKFILL_RETENTION_DAYS"] = retention
    return subprocess.run(
        [sys.executable, "-m", "backfill_assets.cli", "maintain"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def small_table(path: Path, column: str, days: list[dt.date], appends: int) -> list[tuple]:
    """A table of ``days``: one overwrite, then ``appends`` appends (small files); its rows."""
    rows = []
    for n in range(appends + 1):
        batch = [(day, n * 100 + i) for day in days for i in range(n + 1)]
        rows += batch
        write_deltalake(
            str(path),
            pa.table({column: [d for d, _ in batch], "n": [i for _, i in batch]}),
            mode="overwrite" if n == 0 else "append",
            partition_by=[column],
        )
    return rows


def data_files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.glob("*=*/*.parquet")}


def test_maintain_compacts_checkpoints_and_vacuums_every_table_past_retention_only(tmp_path):
    lake_dir = tmp_path / "lake"
    days = [dt.date(2024, 1, 1), dt.date(2024, 1, 2)]
    expected, orphans = {}, {}
    for table in LAKE_TABLES[:2]:
        path = lake_dir / table.path
        rows = small_table(path, table.partition_column, days, appends=3)
        expected[table.path] = Counter(day for day, _ in rows)
        folder = path / f"{table.partition_column}=2024-01-01"
        for name, age_days in (("part-killed-old.parquet", 15), ("part-killed-young.parquet", 13)):
            (folder / name).write_bytes(b"left by a killed writer")
            stamp = time.time() - age_days * DAY_S
            os.utime(folder / name, (stamp, stamp))
        orphans[table.path] = folder
    before = {t.path: DeltaTable(str(lake_dir / t.path)).version() for t in LAKE_TABLES[:2]}

    done = run_maintain(lake_dir, None)  # the default retention, 14 days
    assert done.returncode == 0, done.stdout + done.stderr
    assert "retention 14 days" in done.stdout
    for table in LAKE_TABLES:
        assert any(line.startswith(f"{table.path}:") for line in done.stdout.splitlines())

    for table in LAKE_TABLES[:2]:
        path = lake_dir / table.path
        delta = DeltaTable(str(path))
        newer = [
            json.loads(h.get("userMetadata") or "{}")
            for h in delta.history()
            if h["version"] > before[table.path]
        ]  # vacuum's own commits, and one more:
        [compaction] = [m for m in newer if m.get("operation") == "compact"]
        assert compaction["run_id"].startswith("maintain-")
        assert len(delta.file_uris()) == len(days)  # one file per day left in the table
        got = Counter(r[table.partition_column] for r in delta.to_pyarrow_table().to_pylist())
        assert got == expected[table.path]
        assert not (orphans[table.path] / "part-killed-old.parquet").exists()  # past retention
        assert (orphans[table.path] / "part-killed-young.parquet").exists()
        # the compacted-away files are tombstoned now: kept until they are older than 14 days
        assert len(data_files(path)) == 4 * len(days) + len(days) + 1
        log_dir = path / "_delta_log"
        assert json.loads((log_dir / "_last_checkpoint").read_text())["version"] == delta.version()
        assert (log_dir / f"{delta.version():020d}.checkpoint.parquet").is_file()


def test_maintain_refuses_a_retention_below_the_floor_and_touches_nothing(tmp_path):
    lake_dir = tmp_path / "lake"
    table = LAKE_TABLES[0]
    small_table(lake_dir / table.path, table.partition_column, [dt.date(2024, 1, 1)], appends=2)
    files = data_files(lake_dir / table.path)
    refused = run_maintain(lake_dir, "3")
    assert refused.returncode == 2
    assert "at least 7 days" in refused.stderr and "in-flight writers" in refused.stderr
    assert DeltaTable(str(lake_dir / table.path)).version() == 2
    assert data_files(lake_dir / table.path) == files
