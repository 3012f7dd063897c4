"""How long a fresh process takes to a Spark session and to its first job, with and without the
driver's class-data archive (``backfill_assets/spark/class_archive.py``).

    .venv/bin/python bench/session_start.py [--runs 5]

Each run is a new Python process building the pipeline's session (``spark_config``) and running
one small job, as every Dagster run worker and CLI command does. The two kinds of run
alternate. Prints one line per run and last:

    SESSION_START runs=N off_session_s=.. on_session_s=.. off_first_job_s=.. on_first_job_s=..
    first_job_ratio=on/off
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = (
    "import time\n"
    "began = time.monotonic()\n"
    "from backfill_assets.spark.session import build_session, spark_config\n"
    "spark = build_session(spark_config(master='local[1]', shuffle_partitions=2))\n"
    "session = time.monotonic() - began\n"
    "spark.range(1000).selectExpr('id % 7 AS k').groupBy('k').count().collect()\n"
    "print(f'{session:.2f} {time.monotonic() - began:.2f}')\n"
)


def one(archive: bool) -> tuple[float, float]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    if not archive:
        env["BACKFILL_SPARK_CLASS_ARCHIVE"] = "off"
    run = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True
    )
    session, first_job = run.stdout.split()[-2:]
    return float(session), float(first_job)


def main() -> int:
    from backfill_assets.spark.class_archive import archive_path

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    path = archive_path()
    if path is None or not path.is_file():
        print("no class archive: run `make setup` (or BACKFILL_SPARK_CLASS_ARCHIVE is off)")
        return 1
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for i in range(args.runs):
        for archive in (False, True):
            session, first_job = one(archive)
            times[archive].append((session, first_job))
            label = "on " if archive else "off"
            print(f"run {i + 1} archive {label}: {session:5.2f} s, first job {first_job:5.2f} s")

    def median(archive: bool, which: int) -> float:
        return statistics.median(t[which] for t in times[archive])

    print(
        f"SESSION_START runs={args.runs} off_session_s={median(False, 0):.2f} "
        f"on_session_s={median(True, 0):.2f} off_first_job_s={median(False, 1):.2f} "
        f"on_first_job_s={median(True, 1):.2f} "
        f"first_job_ratio={median(True, 1) / median(False, 1):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
