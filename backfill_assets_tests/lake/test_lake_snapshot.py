"""A version as deltalake reads it (``lake/snapshot.py``): the statistics a restore adds a file
back with are the ones the log recorded for it, bound for bound."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from backfill_assets.lake import snapshot

DAY = dt.date(2024, 1, 1)
UTC = dt.UTC


def logged_stats(root) -> dict[str, dict]:
    """Each added file's statistics as the commit files spell them, by path."""
    found = {}
    for commit_file in sorted((root / "_delta_log").glob("*.json")):
        for line in commit_file.read_text().splitlines():
            add = json.loads(line).get("add")
            if add is not None:
                found[add["path"]] = json.loads(add["stats"])
    return found


def test_a_files_statistics_come_back_as_the_log_spells_them(tmp_path):
    root = tmp_path / "t"
    table = pa.table(
        {
            "day": pa.array([DAY, DAY, DAY], pa.date32()),
            "n": pa.array([3, None, -7], pa.int64()),
            "name": ["b", "a", None],
            "ratio": [1.5, 2.25, -0.5],
            "at": pa.array(
                [dt.datetime(2024, 1, 1, 10, m, tzinfo=UTC) for m in (5, 1, 9)],
                pa.timestamp("us", "UTC"),
            ),
            "amount": pa.array(
                [decimal.Decimal(v) for v in ("1.23", "-4.50", "10.00")], pa.decimal128(6, 2)
            ),
            "born": pa.array([dt.date(1990, 5, d) for d in (3, 1, 2)], pa.date32()),
            "inner": pa.array([{"k": 1}, {"k": 5}, {"k": None}]),
        }
    )
    write_deltalake(str(root), table, partition_by=["day"])
    files = snapshot.files(str(root), DeltaTable(str(root)), "day", stats=True)
    assert [(f.day, f.records) for f in files] == [(DAY, 3)]
    ours = json.loads(files[0].stats)
    theirs = logged_stats(root)[files[0].path]
    assert ours["numRecords"] == theirs["numRecords"] == 3
    assert ours["nullCount"] == theirs["nullCount"]
    assert ours["minValues"]["n"] == -7 and ours["maxValues"]["n"] == 3
    assert (ours["minValues"]["name"], ours["maxValues"]["name"]) == ("a", "b")
    assert (ours["minValues"]["ratio"], ours["maxValues"]["ratio"]) == (-0.5, 2.25)
    assert ours["minValues"]["at"] == "2024-01-01T10:01:00.000Z"
    assert ours["maxValues"]["at"] == "2024-01-01T10:09:00.000Z"
    assert (ours["minValues"]["amount"], ours["maxValues"]["amount"]) == (-4.5, 10.0)
    assert (ours["minValues"]["born"], ours["maxValues"]["born"]) == ("1990-05-01", "1990-05-03")
    assert (ours["minValues"]["inner"], ours["maxValues"]["inner"]) == ({"k": 1}, {"k": 5})
    for key in ("minValues", "maxValues"):  # each bound we write is the logged one
        for name, bound in ours[key].items():
            logged = theirs[key][name]
            if name == "at":
                parse = dt.datetime.fromisoformat
                assert parse(bound) == parse(logged.replace("Z", "+00:00")), (key, name)
            else:
                assert bound == logged, (key, name)


def test_a_file_without_statistics_has_none(tmp_path):
    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"day": pa.array([DAY], pa.date32()), "n": [1]}))
    log = root / "_delta_log" / f"{0:020d}.json"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    for action in lines:
        action.get("add", {}).pop("stats", None)
    log.write_text("\n".join(json.dumps(a) for a in lines) + "\n")
    (found,) = snapshot.files(str(root), DeltaTable(str(root)), None, stats=True)
    assert (found.records, found.stats) == (None, None)
