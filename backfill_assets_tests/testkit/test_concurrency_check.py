"""The concurrency harness's checker on a Delta log written here by hand: a correction's cutover
undone by its journal puts a day back as it was, which is no revert; a commit of nobody's
that does the same is one."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from backfill_assets_testkit import concurrency_harness as h

TABLE = h.TABLES[0]
DAY = dt.date(2024, 1, 1)
SEED, FIX = "a" * 32, "c" * 32
CID = "fix-1"


def data_file(table_dir: Path, name: str, tag: str) -> str:
    """A Parquet file of ``tag``'s rows of DAY (the partition column in its path only)."""
    rows = h.rows_for(TABLE, DAY, tag)
    path = f"{h.COLUMN}={DAY.isoformat()}/{name}.parquet"
    (table_dir / path).parent.mkdir(parents=True, exist_ok=True)
    columns = {"order_id": [r[1] for r in rows], "tag": [r[2] for r in rows]}
    pq.write_table(pa.table(columns), table_dir / path)
    return path


def commit(
    table_dir: Path,
    version: int,
    metadata: dict,
    adds: tuple | list = (),
    removes: tuple | list = (),
) -> None:
    """Commit file ``version``: the table's protocol and schema first, ``metadata`` as its
    userMetadata, and ``adds`` and ``removes`` of DAY."""
    lines: list[dict] = []
    if version == 0:
        schema = {
            "type": "struct",
            "fields": [
                {"name": n, "type": t, "nullable": True, "metadata": {}}
                for n, t in ((h.COLUMN, "date"), ("order_id", "string"), ("tag", "string"))
            ],
        }
        lines.append({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
        lines.append(
            {
                "metaData": {
                    "id": "t",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps(schema),
                    "partitionColumns": [h.COLUMN],
                    "configuration": {},
                    "createdTime": 0,
                }
            }
        )
    lines.append({"commitInfo": {"timestamp": 0, "userMetadata": json.dumps(metadata)}})
    values = {h.COLUMN: DAY.isoformat()}
    for path in adds:
        size = (table_dir / path).stat().st_size
        lines.append(
            {
                "add": {
                    "path": path,
                    "partitionValues": values,
                    "size": size,
                    "modificationTime": 0,
                    "dataChange": True,
                }
            }
        )
    for path in removes:
        lines.append(
            {
                "remove": {
                    "path": path,
                    "partitionValues": values,
                    "deletionTimestamp": 0,
                    "dataChange": True,
                }
            }
        )
    log = table_dir / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def correction(action: str) -> dict:
    return {"extra": {"correction": CID, "action": action}, "partitions": [DAY.isoformat()]}


def lake_with_an_undone_cutover(root: Path) -> tuple[list[dict], str, str]:
    """Version 0 seeds DAY, 1 cuts the correction over, 2 undoes that cutover (its journal, the
    cutover having failed on the next table); the workers' operations, and the two files."""
    table_dir = root / TABLE
    seed = data_file(table_dir, "seed", SEED)
    fix = data_file(table_dir, "fix", FIX)
    commit(table_dir, 0, {"write_id": SEED}, adds=[seed])
    commit(table_dir, 1, correction("cutover"), adds=[fix], removes=[seed])
    commit(table_dir, 2, correction("cutover undone"), adds=[seed], removes=[fix])
    day = DAY.isoformat()
    ops = [
        {"worker": "live-0", "op": "seed", "table": TABLE, "days": [day], "tag": SEED,
         "write_id": SEED, "files": {day: [seed]}, "version": 0, "ok": True,
         "start": 0.0, "end": 1.0},
        {"worker": "c-1", "op": "keep", "table": TABLE, "days": [day], "tag": FIX,
         "correction": CID, "files": {day: [fix]}, "ok": True, "start": 2.0, "end": 3.0},
        {"worker": "c-1", "op": "diff", "correction": CID, "days": [day],
         "files": {TABLE: {day: [fix]}}, "ok": True, "start": 3.0, "end": 4.0},
        {"worker": "c-1", "op": "cutover", "correction": CID, "ok": False, "expected": True,
         "error": "CorrectionError: cutover failed; undone", "start": 4.0, "end": 5.0},
    ]  # fmt: skip
    return ops, seed, fix


def test_an_undone_cutover_is_no_revert(tmp_path):
    ops, _, _ = lake_with_an_undone_cutover(tmp_path)
    report = h.check(h.Store(str(tmp_path)), ops)
    assert report.counts == dict.fromkeys(h.COUNTS, 0), report.problems
    assert report.ambiguous == 2  # the cutover and its undoing, which no one acknowledged
    assert report.ops == 3 and report.refused == {"cutover": 1}


def test_a_commit_that_puts_back_replaced_content_is_a_revert(tmp_path):
    ops, seed, fix = lake_with_an_undone_cutover(tmp_path)
    # nobody's commit: the correction's files again, over the seed's the undo put back
    commit(tmp_path / TABLE, 3, {}, adds=[fix], removes=[seed])
    report = h.check(h.Store(str(tmp_path)), ops)
    assert report.counts["reverted"] == 1, report.problems
    assert report.counts["mismatch"] == 1, report.problems
    assert report.counts["lost_commits"] == report.counts["unaudited"] == 0, report.problems
