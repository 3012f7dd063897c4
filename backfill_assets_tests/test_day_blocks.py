"""Shuffles by blocks of consecutive days: which task each day's rows reach, counted in plain
Python; the landing reader's lines sent so, and the writer that takes them as they are."""

from __future__ import annotations

from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from backfill_assets.day_blocks import BLOCK, DAYS_PER_TASK, block_count, by_day_blocks
from backfill_assets.days import days_between
from backfill_assets.lake.errors import LakeError
from backfill_assets.lake.parquet_writer import write_files
from backfill_assets.landing.layout import list_landing_files
from backfill_assets.landing.spark_reader import read_order_lines

FIRST = date(2024, 3, 1)


def _days(n: int) -> list[date]:
    return days_between(FIRST, FIRST + timedelta(days=n - 1))


@pytest.mark.parametrize(
    ("days", "tasks"),
    [
        ([], 1),
        (_days(1), 1),
        (_days(8), 1),
        (_days(9), 2),
        (_days(30), 4),
        (_days(365), 46),
        ([FIRST, FIRST + timedelta(days=20)], 3),  # the span counts, not the days listed
    ],
)
def test_a_range_takes_one_task_per_block_of_its_span(days, tasks):
    assert DAYS_PER_TASK == 8  # the cases above are counted for eight
    assert block_count(days) == tasks


def test_each_block_of_consecutive_days_reaches_its_own_task(spark):
    days = _days(20)
    before, after = FIRST - timedelta(days=3), FIRST + timedelta(days=40)
    rows = [(d, i) for d in days for i in range(3)] + [
        (before, 0),
        (before, 1),
        (after, 0),
        (None, 0),
    ]
    blocks = by_day_blocks(spark.createDataFrame(rows, "day date, n int"), "day", days)
    placed = blocks.select("day", BLOCK, F.spark_partition_id().alias("task")).collect()

    assert blocks.rdd.getNumPartitions() == 3
    tasks: dict[date | None, set[int]] = {}
    for row in placed:
        tasks.setdefault(row["day"], set()).add(row["task"])
    # days 1-8 in one task, 9-16 in the next, 17-20 in the last; every row of a day together
    assert {d: tasks[d] for d in days} == {d: {(d - FIRST).days // 8} for d in days}
    assert len(tasks[before]) == len(tasks[after]) == 1  # outside the range: still one task each
    assert tasks[None] == {0}
    assert len(placed) == len(rows)


def _land_orders(root: Path, days: list[date], files_per_day: int) -> dict[tuple, int]:
    """Order files for ``days`` (their sizes differ, so Spark's own packing of files into tasks
    mixes days); each landed line, keyed (arrival date, file, line number), with its count."""
    landed: dict[tuple, int] = {}
    for d, day in enumerate(days):
        for f in range(files_per_day):
            relative = f"orders/arrival_date={day.isoformat()}/part-{f}.jsonl"
            lines = [f'{{"n":{d * 100 + f * 10 + i}}}' for i in range(1 + (d * 7 + f * 3) % 9)]
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n")
            for i in range(len(lines)):
                landed[(day, relative, i + 1)] = 1
    return landed


def test_order_lines_read_in_day_blocks_arrive_by_block_and_in_date_order(spark, tmp_path):
    days = _days(20)
    landed = _land_orders(tmp_path, days, files_per_day=3)
    files = list_landing_files(tmp_path, "orders", days)

    read = read_order_lines(spark, str(tmp_path), files, day_blocks=days)
    tasks = read.select("arrival_date", "source_file", "line_number").rdd.glom().collect()

    rows = [(r[0], r[1], r[2]) for task in tasks for r in task]
    assert Counter(rows) == landed  # every landed line once, as without blocks
    unblocked = read_order_lines(spark, str(tmp_path), files)
    assert sorted(rows) == sorted(tuple(r)[:3] for r in unblocked.collect())
    held = {}
    for index, task in enumerate(tasks):
        arrivals = [r[0] for r in task]
        assert arrivals == sorted(arrivals), f"task {index}: its days are out of order"
        for day in set(arrivals):
            held.setdefault(day, set()).add(index)
    # each day in one task, that of its block of eight days (tasks 0, 1, 2)
    assert held == {day: {(day - FIRST).days // DAYS_PER_TASK} for day in days}


def test_a_write_of_rows_in_day_blocks_takes_them_as_they_are(spark, tmp_path):
    days = _days(20)
    _land_orders(tmp_path / "landing", days, files_per_day=3)
    files = list_landing_files(tmp_path / "landing", "orders", days)
    read = read_order_lines(spark, str(tmp_path / "landing"), files, day_blocks=days).drop("_utf8")
    expected = Counter(tuple(r) for r in read.collect())

    written = write_files(
        read, str(tmp_path / "arranged"), "arrival_date", days, in_day_blocks=True
    )
    assert Counter(f.partition for f in written) == Counter(days)  # one file for each day
    assert _stored(tmp_path / "arranged", written) == expected

    # rows that are not arranged are still written, each day's in as many files as it came apart
    mixed = read.repartition(5)
    written = write_files(mixed, str(tmp_path / "mixed"), "arrival_date", days, in_day_blocks=True)
    assert _stored(tmp_path / "mixed", written) == expected
    assert len(written) > len(days)

    with pytest.raises(LakeError, match="exclude each other"):
        write_files(read, str(tmp_path / "both"), "arrival_date", days, 2, in_day_blocks=True)


def _stored(table_dir: Path, written) -> Counter[tuple]:
    stored: Counter[tuple] = Counter()
    for f in written:
        for r in pq.read_table(table_dir / f.path).to_pylist():
            stored[(f.partition, r["source_file"], r["line_number"], r["payload"])] += 1
    return stored
