"""A small lake holding one correction, staged and diffed beside production: the two corrected
tables, three days each, written with Spark on delta-rs; the rows each side holds are written
here, so the tests know them without asking the code under test."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

from deltalake import DeltaTable

from backfill_assets.corrections import registry
from backfill_assets.corrections.diff import CORRECTED
from backfill_assets.corrections.registry import Correction, State
from backfill_assets.lake import CommitInfo, Lake
from backfill_assets_testkit.processes import REPO

D1, D2, D3 = dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)
DAYS = [D1, D2, D3]
FIXED = [D1, D2]  # the days the correction restates
CID = "fix-1"
SCHEMA = "event_date date, key string, n int"
TABLES = [t.path for t in CORRECTED]


def production_rows(table: str) -> set[tuple]:
    """What production holds before any cutover: two rows a day."""
    return {(d, f"{table}:{d.day}:{k}", 10 * d.day + k) for d in DAYS for k in (1, 2)}


def corrected_rows(table: str) -> set[tuple]:
    """What the correction stages for its days: one row changed, one removed, one added."""
    return {(d, f"{table}:{d.day}:1", 100 * d.day) for d in FIXED} | {
        (d, f"{table}:{d.day}:3", 7) for d in FIXED
    }


def after_cutover(table: str) -> set[tuple]:
    return {r for r in production_rows(table) if r[0] not in FIXED} | corrected_rows(table)


def rows(root: Path, table: str) -> set[tuple]:
    """The table's rows now, read by delta-rs directly."""
    found = DeltaTable(str(root / table)).to_pyarrow_table().to_pylist()
    return {(r["event_date"], r["key"], r["n"]) for r in found}


def build(root: Path, spark) -> None:
    """Production at version 0 of each table, the correction staged as ``CID`` and diffed."""
    lake = Lake(root, spark, engine="delta-rs")
    production = CommitInfo(run_id="prod", code_version="abc123")
    for table in TABLES:
        frame = spark.createDataFrame(sorted(production_rows(table)), SCHEMA)
        lake.replace_partitions(table, frame, "event_date", DAYS, production)
        staged = spark.createDataFrame(sorted(corrected_rows(table)), SCHEMA)
        fix = CommitInfo(run_id="fix-run", code_version="abc123", input_versions={"raw/x": 1})
        lake.staging.stage(table, staged, "event_date", FIXED, fix, stage_id=CID)
    c = Correction(
        id=CID,
        reason="rates restated",
        created_by="tester",
        created_at=registry.now(),
        start=D1.isoformat(),
        end=D2.isoformat(),
        code_version="abc123",
        state=State.DIFFED,
        runs=[
            {
                "run_id": "fix-run",
                "table": t,
                "code_version": "abc123",
                "input_versions": {"raw/x": 1},
                "days": [d.isoformat() for d in FIXED],
            }
            for t in TABLES
        ],
        diff={
            "at": registry.now(),
            "versions": dict.fromkeys(TABLES, 0),
            "days": {d.isoformat(): {"revenue_pct": 1.0, "changed": True} for d in FIXED},
            "rebuilt": {},
            "files": {t: staged_files(root, t) for t in TABLES},
        },
    )
    for t in TABLES:
        c.table(t).staged.update({d.isoformat(): "fix-run" for d in FIXED})
    registry.save(root, c, create=True)


def staged_files(root: Path, table: str, stage_id: str = CID) -> dict[str, list[str]]:
    """Per day, the files the staged version's manifest names (read from its JSON here)."""
    manifest = json.loads((root / table / "_staged" / f"{stage_id}.json").read_text())
    found: dict[str, list[str]] = {}
    for f in manifest["files"]:
        found.setdefault(f["partition"], []).append(f["path"])
    return {day: sorted(paths) for day, paths in sorted(found.items())}


def copy(template: Path, to: Path) -> Lake:
    shutil.copytree(template, to)
    return Lake(to, None, engine="delta-rs")


def unreferenced_files(root: Path, table: str) -> set[str]:
    """Data files under the table that no commit of its Delta log ever added: staged files, or
    a writer's orphans (the log's own JSON lines read here, not through the lake layer)."""
    added = set()
    for commit_file in (root / table / "_delta_log").glob("*.json"):
        for line in commit_file.read_text().splitlines():
            add = json.loads(line).get("add")
            if add is not None:
                added.add(os.path.normpath(unquote(add["path"])))
    on_disk = {str(p.relative_to(root / table)) for p in (root / table).glob("*=*/*.parquet")}
    return on_disk - added


CUTOVER_CHILD = """
import sys
from backfill_assets.corrections import lifecycle
from backfill_assets.lake import Lake
lifecycle.cutover(Lake(sys.argv[1], None, engine="delta-rs"), sys.argv[2])
"""


def start_child(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``python -c code args`` from the repository, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_cutover(root: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The cutover of ``CID`` on the lake at ``root``, in a child process."""
    return start_child(CUTOVER_CHILD, str(root), CID, env=env)
