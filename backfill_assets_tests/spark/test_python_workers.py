"""The project's tasks in Spark's Python workers: what a worker holds after one of them."""

from __future__ import annotations

import gc
import os
from datetime import date, timedelta

import pyarrow as pa

from backfill_assets.lake.parquet_writer import write_files

DAYS = [date(2024, 1, 1) + timedelta(days=i) for i in range(8)]


def test_a_worker_collects_only_what_came_after_the_projects_last_task(spark, tmp_path):
    """Spark's daemon collects a worker's garbage after each task it runs. The objects a
    project's task found there (the modules imported) are frozen, so each collection walks only
    what came after; a worker's first task, before any of the project's, has none frozen."""
    rows = [(day, n) for day in DAYS for n in range(5)]
    df = spark.createDataFrame(rows, "d date, n bigint").repartition(8)
    written = write_files(df, str(tmp_path), "d", DAYS)
    assert sorted({f.partition for f in written}) == DAYS

    def heap(batches):
        """Each task: its worker's process id and how many objects its collections skip (a
        function of the test's own, which cloudpickle sends by value)."""
        for _ in batches:
            pass
        yield pa.RecordBatch.from_arrays(
            [pa.array([os.getpid()]), pa.array([gc.get_freeze_count()])], names=["pid", "frozen"]
        )

    seen = spark.range(16, numPartitions=16).mapInArrow(heap, "pid long, frozen long").collect()

    assert seen and any(r["frozen"] > 0 for r in seen), seen
