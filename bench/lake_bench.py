"""Lake throughput and driver memory for growing write sizes: run by hand, never inside tests.

    .venv/bin/python bench/lake_bench.py --sizes 100000 400000 1600000 --days 30

For each size it replaces ``--days`` daily partitions of a table shaped like
staging/orders, then reads them back pinned and aggregates every column. It
prints rows/s for both, and the peak RSS of the Python driver and of the driver
JVM while each step ran. Executors write and read the files, so the Python
driver's peak must stay flat as the size grows. (In local mode the JVM hosts
the executors too, so its RSS includes executor memory.)
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import tempfile
import threading
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


class PeakRss:
    """Samples RSS of this process and its JVM child every 20 ms while in a ``with`` block."""

    def __init__(self) -> None:
        self.me = psutil.Process()

    def __enter__(self):
        self.py_peak = self.jvm_peak = 0
        self.running = True
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.running = False
        self.thread.join()

    def _sample(self) -> None:
        while self.running:
            self.py_peak = max(self.py_peak, self.me.memory_info().rss)
            jvms = [c for c in self.me.children(recursive=True) if "java" in c.name()]
            for jvm in jvms:
                try:
                    self.jvm_peak = max(self.jvm_peak, jvm.memory_info().rss)
                except psutil.Error:
                    pass
            time.sleep(0.02)


def orders(spark, rows: int, days: int, start: dt.date):
    """A staging/orders-like frame: ids, a timestamp, decimal money, short strings."""
    from pyspark.sql import functions as F

    return spark.range(rows).select(
        F.date_add(F.lit(start), (F.col("id") % days).cast("int")).alias("event_date"),
        F.concat(F.lit("o-"), F.col("id").cast("string")).alias("order_id"),
        F.timestamp_micros(F.lit(1704067200000000) + F.col("id") * 1000).alias("event_time"),
        (F.col("id") % 100000 / 100).cast("decimal(18,2)").alias("amount"),
        F.lit(1.08).cast("decimal(18,8)").alias("usd_per_unit"),
        F.element_at(
            F.array(*[F.lit(c) for c in ("DE", "FR", "US", "GB")]),
            (F.col("id") % 4 + 1).cast("int"),
        ).alias("country"),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 400_000, 1_600_000])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from pyspark.sql import functions as F

    from backfill_assets.lake import CommitInfo, Lake
    from backfill_assets.spark.session import build_session, spark_config

    spark = build_session(
        spark_config(master=args.master, shuffle_partitions=4, driver_memory="2g")
    )
    spark.sparkContext.setLogLevel("ERROR")
    start = dt.date(2024, 1, 1)
    days = [start + dt.timedelta(days=n) for n in range(args.days)]
    with tempfile.TemporaryDirectory() as root:
        lake = Lake(root, spark)
        lake.replace_partitions(
            "bench/warmup",
            orders(spark, 1000, 2, start),
            "event_date",
            days[:2],
            CommitInfo("warmup", "bench"),
        )
        lake.read_partitions("bench/warmup", "event_date", days[:2])[0].count()
        print(f"engine={lake.engine.name} master={args.master} days={args.days}")
        print(
            f"{'rows':>10} {'write rows/s':>13} {'read rows/s':>12} "
            f"{'py peak MB':>11} {'jvm peak MB':>12}"
        )
        for size in args.sizes:
            table = f"bench/orders_{size}"
            with PeakRss() as write_mem:
                began = time.perf_counter()
                result = lake.replace_partitions(
                    table,
                    orders(spark, size, args.days, start),
                    "event_date",
                    days,
                    CommitInfo("bench", "bench"),
                )
                write_s = time.perf_counter() - began
            assert sum(result.rows_by_partition.values()) == size
            with PeakRss() as read_mem:
                began = time.perf_counter()
                frame, _ = lake.read_partitions(table, "event_date", days)
                totals = frame.agg(
                    F.count("*"), F.sum("amount"), F.max("event_time"), F.countDistinct("country")
                ).collect()[0]
                read_s = time.perf_counter() - began
            assert totals[0] == size
            py_peak = max(write_mem.py_peak, read_mem.py_peak) / 2**20
            jvm_peak = max(write_mem.jvm_peak, read_mem.jvm_peak) / 2**20
            print(
                f"{size:>10} {size / write_s:>13,.0f} {size / read_s:>12,.0f} "
                f"{py_peak:>11.0f} {jvm_peak:>12.0f}",
                flush=True,
            )
    spark.stop()


if __name__ == "__main__":
    main()
