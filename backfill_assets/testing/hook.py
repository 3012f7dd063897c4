"""The tests' hook behind ``backfill_assets.seam``, installed only by tests: pause and failure
points (``faults.py``), the I/O seam's plans (``iofault.py``), and a pause inside delta-spark's
write job."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

from backfill_assets.testing.faults import armed, claim_visit, pause_point
from backfill_assets.testing.iofault import io_step

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


def pause(point: str) -> None:
    pause_point(point)


def io(operation: str) -> None:
    io_step(operation)


def in_write_job(
    spark: SparkSession, df: DataFrame, column: str, dates: list[dt.date]
) -> DataFrame:
    """``df`` with a pause inside Delta's write job, when a test armed one there.

    Delta writes files and commits inside one JVM call, so the pause is an extra one-row Spark
    task whose Python pauses. With ``local[1]`` tasks run in order: put after the data's tasks,
    every file is written and the transaction (its snapshot read) is open but not committed
    (``after_files``, ``before_commit``); put after the first day's tasks, some files are
    written (``mid_files``).
    """
    from pyspark.sql import functions as F

    late = [p for p in ("after_files", "before_commit") if armed(p)]
    if late:
        df = df.unionByName(_pause_task(spark, df, late))
    if armed("mid_files"):
        first = F.col(column) == F.lit(dates[0])
        df = (
            df.where(first)
            .unionByName(_pause_task(spark, df, ["mid_files"]))
            .unionByName(df.where(~first | F.col(column).isNull()))
        )
    return df


def _pause_task(spark: SparkSession, df: DataFrame, points: list[str]) -> DataFrame:
    visits = [(point, claim_visit(point)) for point in points]

    def pause(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for _ in batches:
            pass
        for point, visit in visits:
            pause_point(point, visit)
        yield from ()

    return spark.range(1, numPartitions=1).mapInArrow(pause, df.schema)
