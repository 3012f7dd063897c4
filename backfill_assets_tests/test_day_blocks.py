"""Shuffles by blocks of consecutive days: which task each day's rows reach, counted in plain
Python."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from pyspark.sql import functions as F

from backfill_assets.day_blocks import BLOCK, DAYS_PER_TASK, block_count, by_day_blocks
from backfill_assets.days import days_between

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
