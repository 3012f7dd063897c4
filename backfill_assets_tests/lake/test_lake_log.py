"""The log read in Python (``lake/log.py``): which versions changed which partitions, under
column mapping too, with or without a checkpoint."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

DAYS = {d: dt.date(2024, 1, d) for d in range(1, 5)}


def frame(days: list[int], rows: int) -> pa.Table:
    return pa.table(
        {
            "event_date": pa.array([DAYS[d] for d in days for _ in range(rows)], pa.date32()),
            "v": pa.array(range(rows * len(days)), pa.int64()),
        }
    )


def overwrite(root: str, days: list[int], rows: int) -> None:
    where = " OR ".join(f"event_date = '{DAYS[d]}'" for d in days)
    write_deltalake(
        root, frame(days, rows), partition_by=["event_date"], mode="overwrite", predicate=where
    )


@pytest.mark.parametrize("checkpointed", [False, True])
def test_under_column_mapping_a_concurrent_writers_day_is_seen(tmp_path, checkpointed):
    """Under column mapping the log keys partition values by the column's physical name, which
    the schema in the newest commit file with a metaData, or else in the checkpoint, gives."""
    from backfill_assets.lake import Lake
    from backfill_assets.lake.log import last_written_versions

    root = tmp_path / "raw" / "mapped"
    write_deltalake(
        str(root),
        frame([1, 2], 2),
        partition_by=["event_date"],
        configuration={"delta.columnMapping.mode": "name"},
    )  # version 0
    physical = _physical_name(root, "event_date")
    assert physical != "event_date", "deltalake did not give the column a physical name"
    if checkpointed:
        DeltaTable(str(root)).create_checkpoint()  # the metaData is in no commit file after it
    overwrite(str(root), [1], 3)  # version 1: a concurrent writer changes day 1
    lake = Lake(tmp_path, None, engine="delta-rs")
    assert lake.changed_since("raw/mapped", "event_date", 0, [DAYS[1], DAYS[2]]) == {DAYS[1]}
    texts = {DAYS[1].isoformat(), DAYS[2].isoformat()}
    assert last_written_versions(str(root), "event_date", texts) == {
        DAYS[1].isoformat(): 1,
        DAYS[2].isoformat(): 0,
    }
    assert lake.row_counts("raw/mapped", "event_date") == {DAYS[1]: 3, DAYS[2]: 2}


def _physical_name(root, column: str) -> str:
    """The physical name the table's first metaData gives ``column`` (read here, not by log.py)."""
    import json

    for line in (root / "_delta_log" / f"{0:020d}.json").read_text().splitlines():
        if "metaData" in line:
            schema = json.loads(json.loads(line)["metaData"]["schemaString"])
            field = next(f for f in schema["fields"] if f["name"] == column)
            return field["metadata"]["delta.columnMapping.physicalName"]
    raise AssertionError("no metaData in version 0")
