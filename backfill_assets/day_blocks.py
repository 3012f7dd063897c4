"""Shuffles keyed by blocks of consecutive days, so what a task holds does not grow with the range.

A shuffle into a fixed number of partitions gives each task a fixed share of the range: with
eight, each of a year's tasks sorts or hashes about 46 days, a month's about 4, and a year's
run needs the whole heap where a month's needs a fraction of it. Sent instead by blocks of
``DAYS_PER_TASK`` consecutive days, counted from the range's first day, into as many
partitions as the range has blocks, each task holds one block whatever the range's length.
Adaptive execution does not merge partitions asked for by number.

A day outside the range still lands in exactly one task (block numbers wrap around the
partition count), and a NULL day in the first. An aggregation or window keyed by
(``BLOCK``, day, ...) finds its input already partitioned and shuffles no further.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import date

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

DAYS_PER_TASK = 8
BLOCK = "_day_block"


def block_count(days: Collection[date]) -> int:
    """How many tasks a range takes: its span in blocks, one at least."""
    if not days:
        return 1
    span = (max(days) - min(days)).days + 1
    return -(-span // DAYS_PER_TASK)


def by_day_blocks(df: DataFrame, column: str, days: Collection[date]) -> DataFrame:
    """``df`` with a ``BLOCK`` column, each block of ``column``'s days in its own task."""
    first = min(days) if days else date(1970, 1, 1)
    block = F.floor(F.datediff(F.col(column), F.lit(first)) / F.lit(DAYS_PER_TASK)).cast("int")
    return df.withColumn(BLOCK, block).repartitionById(block_count(days), F.col(BLOCK))
