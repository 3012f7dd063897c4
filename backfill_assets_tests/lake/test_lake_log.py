"""The log read in Python (``lake/log.py``): a version's files replayed from a checkpoint and the
commit files after it are the ones delta-rs, reading the same log on its own, lists."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from backfill_assets.lake.log import files_at

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


def test_each_versions_files_are_the_ones_delta_rs_lists(tmp_path):
    root = str(tmp_path / "t")
    write_deltalake(root, frame([1, 2, 3], 2), partition_by=["event_date"])  # version 0
    overwrite(root, [2], 3)  # 1
    DeltaTable(root).create_checkpoint()  # of version 1
    overwrite(root, [3, 4], 1)  # 2: replays from the checkpoint
    write_deltalake(root, frame([1], 5), partition_by=["event_date"], mode="append")  # 3
    for version in range(4):
        listed = pa.table(DeltaTable(root, version=version).get_add_actions(flatten=True))
        for days in ({1}, {2, 3}, {4}):
            texts = {DAYS[d].isoformat() for d in days}
            expected = sorted(
                (a["path"], a["size_bytes"])
                for a in listed.to_pylist()
                if str(a["partition.event_date"]) in texts
            )
            found = files_at(root, version, "event_date", texts)
            assert found is not None
            assert sorted((a["path"], a["size"]) for a in found) == expected, (version, days)


def test_a_log_whose_early_commits_are_gone_without_a_checkpoint_is_left_to_the_engine(tmp_path):
    root = str(tmp_path / "t")
    write_deltalake(root, frame([1], 1), partition_by=["event_date"])
    overwrite(root, [1], 2)
    (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").unlink()
    assert files_at(root, 1, "event_date", {DAYS[1].isoformat()}) is None
