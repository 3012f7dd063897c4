"""Every file the lake adds carries Delta's statistics (numRecords, minValues, maxValues,
nullCount), true bounds of the file's rows, so that readers skip files by a predicate on a
column other than the partition column: Spark through Delta's reader and delta-rs read only the
files that can match, and the rows they return are the ones that match."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable

from backfill_assets.lake import CommitInfo
from backfill_assets.lake.file_stats import file_stats

DAYS = [dt.date(2024, 1, d) for d in range(1, 5)]
SCHEMA = "d date, customer string, n long, at timestamp, note string"
LONG_NOTE = "x" * 40


def expected_stats(rows: list[dict], columns: list[str]) -> dict:
    """The bounds a file of ``rows`` may carry, computed here from the rows themselves."""
    mins: dict[str, Any] = {}
    maxes: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in columns:
        values = [r[name] for r in rows if r[name] is not None]
        nulls[name] = len(rows) - len(values)
        if not values:
            continue
        low, high = min(values), max(values)
        if isinstance(low, str):
            mins[name] = low[:32]
            if len(high) <= 32:
                maxes[name] = high
        elif isinstance(low, dt.datetime):  # naive: Spark's INT96, in UTC
            low, high = (v if v.tzinfo else v.replace(tzinfo=dt.UTC) for v in (low, high))
            low = low.astimezone(dt.UTC).replace(microsecond=low.microsecond // 1000 * 1000)
            high = high.astimezone(dt.UTC)
            up = high.replace(microsecond=high.microsecond // 1000 * 1000)
            if up != high:
                up += dt.timedelta(milliseconds=1)
            mins[name] = low.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            maxes[name] = up.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        elif isinstance(low, dt.date):
            mins[name], maxes[name] = low.isoformat(), high.isoformat()
        elif isinstance(low, int):
            mins[name], maxes[name] = low, high
    return {"numRecords": len(rows), "minValues": mins, "maxValues": maxes, "nullCount": nulls}


def test_statistics_from_a_footer_are_true_bounds_of_every_row_group(tmp_path):
    utc = dt.UTC
    table = pa.table(
        {
            "n": pa.array([5, None, -3, 12, None], pa.int64()),
            "small": pa.array([1, 2, 3, 4, 5], pa.int32()),
            "customer": ["c2", None, "c10", "c1", "c3"],
            "note": ["a", LONG_NOTE, None, None, "b"],
            "at": pa.array(
                [
                    dt.datetime(2024, 1, 1, 9, 0, 0, 999, tzinfo=utc),
                    None,
                    dt.datetime(2024, 1, 1, 8, 0, 0, 123456, tzinfo=utc),
                    dt.datetime(2024, 1, 2, 0, 0, 0, 0, tzinfo=utc),
                    dt.datetime(2024, 1, 1, 23, 59, 59, 999001, tzinfo=utc),
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "day": pa.array([dt.date(2024, 3, 1), None, None, dt.date(2023, 1, 1), None]),
            "only_nulls": pa.array([None] * 5, pa.string()),
            "amount": pa.array([1, 2, None, 4, 5], pa.decimal128(18, 2)),
            "local": pa.array([dt.datetime(2024, 1, 1)] * 5, pa.timestamp("us")),
        }
    )
    path = tmp_path / "f.parquet"
    writer = pq.ParquetWriter(path, table.schema)
    writer.write_table(table, row_group_size=2)  # three row groups, one with only nulls in n
    writer.close()
    got = json.loads(file_stats(pq.read_metadata(path)))
    rows = table.to_pylist()
    want = expected_stats(rows, ["n", "small", "customer", "note", "at", "day", "only_nulls"])
    # decimals and time-zone-less timestamps: counted nulls, no bounds
    want["nullCount"].update(amount=1, local=0)
    assert got == want
    assert got["maxValues"]["at"] == "2024-01-02T00:00:00.000Z"  # exact: not moved up
    assert got["minValues"]["at"] == "2024-01-01T08:00:00.123Z"  # rounded down
    # only the leading columns Delta indexes
    two = json.loads(file_stats(pq.read_metadata(path), indexed_columns=2))
    assert set(two["nullCount"]) == {"n", "small"}


def test_a_timestamp_in_the_last_millisecond_there_is_gets_no_upper_bound(tmp_path):
    # Rounded up to the millisecond, 9999-12-31T23:59:59.999999 is no datetime: its column's
    # max is left out (a reader then takes the file as "may match"), the other bounds stay.
    last = dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC)
    at = pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.UTC), last], pa.timestamp("us", tz="UTC"))
    exact = pa.array([last.replace(microsecond=999000)] * 2, pa.timestamp("us", tz="UTC"))
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"at": at, "exact": exact}), path)
    got = json.loads(file_stats(pq.read_metadata(path)))
    assert got == {
        "numRecords": 2,
        "minValues": {"at": "2024-01-01T00:00:00.000Z", "exact": "9999-12-31T23:59:59.999Z"},
        "maxValues": {"exact": "9999-12-31T23:59:59.999Z"},
        "nullCount": {"at": 0, "exact": 0},
    }


def files_read(df) -> int:
    """Data files Spark's scans of ``df`` read (their ``numFiles`` metric), after collecting."""
    df.collect()
    plan = df._jdf.queryExecution().executedPlan()
    if plan.nodeName() == "AdaptiveSparkPlan":
        plan = plan.executedPlan()
    leaves = plan.collectLeaves()
    total = 0
    for i in range(leaves.size()):
        metric = leaves.apply(i).metrics().get("numFiles")
        if metric.isDefined():
            total += metric.get().value()
    return total


def day_rows(day: dt.date) -> list[tuple]:
    """Customers ``c<day>-<k>``: each day's file has a range of its own."""
    at = dt.datetime(day.year, day.month, day.day, 10, tzinfo=dt.UTC)
    return [
        (day, f"c{day.day}-{k}", k, at + dt.timedelta(minutes=k), LONG_NOTE if k else None)
        for k in range(5)
    ]


def test_spark_and_delta_rs_skip_files_by_the_statistics_each_engine_writes(two_engines):
    spark = two_engines[0].spark
    for lake in two_engines:
        engine = lake.engine.name.replace("-", "_")
        rows = [r for day in DAYS for r in day_rows(day)]
        frame = spark.createDataFrame(rows, SCHEMA)
        commit = CommitInfo(run_id=f"stats-{engine}", code_version="test")
        staged_table, replaced_table = f"t/staged_{engine}", f"t/replaced_{engine}"
        staged = lake.staging.stage(staged_table, frame, "d", DAYS, commit)
        lake.staging.publish(staged, DAYS, commit)
        lake.replace_partitions(replaced_table, frame, "d", DAYS, commit)
        # a day rewritten, then restored: the restore adds the first file again
        first = [r for r in rows if r[0] == DAYS[0]]
        again = spark.createDataFrame([(*r[:2], r[2] + 100, *r[3:]) for r in first], SCHEMA)
        lake.replace_partitions(replaced_table, again, "d", [DAYS[0]], commit)
        lake.restore_partitions(replaced_table, "d", [DAYS[0]], 0, commit)
        for table in (staged_table, replaced_table):
            path = Path(lake.table_location(table))
            check_log_statistics(path)
            everything = spark.read.format("delta").load(str(path))
            assert files_read(everything) == len(DAYS)  # one file a day, none skipped
            wanted = "c3-2"
            read = spark.read.format("delta").load(str(path)).where(f"customer = '{wanted}'")
            assert files_read(read) == 1, (engine, table)
            assert [tuple(r)[1:3] for r in read.collect()] == [(wanted, 2)]
            later = spark.read.format("delta").load(str(path)).where("n >= 5")
            assert files_read(later) == 0 and later.count() == 0
            dataset = DeltaTable(str(path)).to_pyarrow_dataset()
            fragments = list(dataset.get_fragments(filter=pc.field("customer") == wanted))
            assert len(fragments) == 1, (engine, table)


def check_log_statistics(path: Path) -> None:
    """Each add action of the table's log carries the bounds of its file's own rows (a file
    added twice, by a restore, is checked each time)."""
    checked = 0
    for commit_file in sorted((path / "_delta_log").glob("*.json")):
        for line in commit_file.read_text().splitlines():
            add = json.loads(line).get("add")
            if add is None:
                continue
            rows = pq.read_table(path / add["path"]).to_pylist()
            got = json.loads(add["stats"])
            want = expected_stats(rows, ["customer", "n", "at", "note"])
            for key in ("numRecords", "nullCount"):
                assert got[key] == want[key], (add["path"], key)
            for key in ("minValues", "maxValues"):
                for name, bound in want[key].items():
                    assert got[key].get(name) == bound, (add["path"], key, name)
            checked += 1
    assert checked >= len(DAYS)
