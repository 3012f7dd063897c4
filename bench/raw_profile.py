"""Where raw's time goes: a Java Flight Recorder profile of the raw orders job.

    .venv/bin/python bench/raw_profile.py --days 30 --orders-per-day 20000

On a generated feed it runs, in a fresh process with the pipeline's own Spark settings, the job
raw stages: the landing files read (``read_order_lines``), every record parsed and validated
(``validate_orders``), its checksum, and the stored columns (``raw_rows``), written as staging
raw writes them (``--sink lake``, the default: ``write_files``, the lake's executor-side writer,
which hands Arrow batches to Spark's Python workers for pyarrow to write, less the Delta log),
by Spark's own Parquet writer (``--sink parquet``), or thrown away (``--sink noop``: the compute
alone). The driver's JVM, which in local mode also runs every task, records a Flight Recorder
profile (the JDK's ``profile`` settings) while the job runs; the Python workers are outside it,
so the CPU time of the JVM and of the workers is printed beside it.

It prints the job's wall time, the CPU time of the JVM and of the workers, then the executor
threads' samples: by cost (the first frame from the top that one of ``COSTS`` claims; "other"
otherwise) and the hottest methods by their own samples. The last line is ``PROFILE`` with the
job's seconds, the CPU seconds, and each cost's share.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

JOB = r"""
import sys, time
from datetime import date, timedelta
import psutil
from backfill_assets.lake.parquet_writer import write_files
from backfill_assets.spark.session import build_session, spark_config
from backfill_assets.landing.layout import list_landing_files
from backfill_assets.landing.spark_reader import read_order_lines
from backfill_assets.transforms.audit import line_hash
from backfill_assets.transforms.orders import raw_rows, validate_orders

landing, out, recording, sink = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
start, end = date.fromisoformat(sys.argv[5]), date.fromisoformat(sys.argv[6])
spark = build_session(spark_config())
days = [start + timedelta(days=i) for i in range((end - start).days + 1)]
files = list_landing_files(landing, "orders", days)
validated = validate_orders(read_order_lines(spark, landing, files, day_blocks=days), 7)
rows = raw_rows(validated.withColumn("line_hash", line_hash()))
jvm = spark.sparkContext._jvm
profile = jvm.jdk.jfr.Recording(jvm.jdk.jfr.Configuration.getConfiguration("profile"))
profile.start()
began = time.monotonic()
if sink == "lake":
    write_files(rows, out, "arrival_date", days, in_day_blocks=True)
elif sink == "noop":
    rows.write.format("noop").mode("overwrite").save()
else:
    rows.write.mode("overwrite").partitionBy("arrival_date").parquet(out)
took = time.monotonic() - began
profile.stop()
jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
workers = [p for p in psutil.Process(jvm_pid).children(recursive=True) if "python" in p.name()]
print(f"JVM_CPU={sum(psutil.Process(jvm_pid).cpu_times()[:2]):.1f}")
print(f"WORKERS_CPU={sum(sum(p.cpu_times()[:4]) for p in workers):.1f}")
profile.dump(jvm.java.io.File(recording).toPath())
print(f"JOB_SECONDS={took:.1f}")
spark.stop()
"""

# What a sample's time is spent on: the first frame, from the top of its stack, whose class
# (with its method) starts with one of these. Checked in this order; "other" when none does.
COSTS = [
    ("regex", ("java.util.regex.",)),
    (
        "json parse into variant",
        ("org.apache.spark.types.variant.VariantBuilder", "com.fasterxml.jackson."),
    ),
    (
        "variant reads",
        ("org.apache.spark.types.variant.", "org.apache.spark.sql.catalyst.expressions.variant."),
    ),
    (
        "timestamps",
        (
            "org.apache.spark.sql.catalyst.util.DateTimeUtils",
            "org.apache.spark.sql.catalyst.util.SparkDateTimeUtils",
            "org.apache.spark.sql.catalyst.util.Iso8601",
            "java.time.",
        ),
    ),
    ("decimals", ("org.apache.spark.sql.types.Decimal", "java.math.")),
    (
        "utf-8 and strings",
        (
            "org.apache.spark.unsafe.types.UTF8String",
            "org.apache.spark.sql.catalyst.util.CharVarchar",
            "java.lang.String",
            "java.lang.StringLatin1",
            "java.lang.StringUTF16",
            "sun.nio.cs.",
        ),
    ),
    (
        "hashing",
        ("org.apache.spark.sql.catalyst.expressions.XXH64", "org.apache.spark.unsafe.hash."),
    ),
    ("parquet write", ("org.apache.parquet.",)),
    (
        "arrow to the python workers",
        (
            "org.apache.arrow.",
            "org.apache.spark.sql.execution.arrow.",
            "org.apache.spark.sql.execution.python.",
            "org.apache.spark.api.python.",
        ),
    ),
    ("compression", ("com.github.luben.zstd.", "org.xerial.snappy.", "io.airlift.compress.")),
    (
        "file read",
        (
            "org.apache.spark.sql.execution.datasources.text.",
            "org.apache.hadoop.",
            "java.io.",
            "sun.nio.",
        ),
    ),
    ("generated and interpreted expressions", ("org.apache.spark.sql.catalyst.expressions.",)),
    (
        "rows and arrays",
        (
            "org.apache.spark.sql.catalyst.util.",
            "org.apache.spark.unsafe.",
        ),
    ),
]


def claimed(frames: list[str]) -> tuple[str, str]:
    """(cost, caller): the first cost that claims a frame from the top, and the first frame
    below that frame's run of frames of the same cost (what called into it)."""
    for i, frame in enumerate(frames):
        for name, prefixes in COSTS:
            if frame.startswith(prefixes):
                below = next((f for f in frames[i + 1 :] if not f.startswith(prefixes)), "")
                return name, below
    return "other", ""


# A task's thread, running ("launch worker") or, once Spark has renamed it, idle ("idle worker"):
# a thread's name in the recording is the last it had.
EXECUTOR_THREADS = ("Executor task launch worker", "Executor task idle worker")


def samples(recording: Path, depth: int) -> list[tuple[str, list[str]]]:
    """(thread, frames top first) of each execution sample, via the JDK's ``jfr`` tool."""
    printed = subprocess.run(
        [
            "jfr",
            "print",
            "--json",
            "--stack-depth",
            str(depth),
            "--events",
            "jdk.ExecutionSample",
            str(recording),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = []
    for event in json.loads(printed)["recording"]["events"]:
        values = event["values"]
        thread = (values.get("sampledThread") or {}).get("javaName") or ""
        frames = [
            f"{f['method']['type']['name'].replace('/', '.')}.{f['method']['name']}"
            for f in (values.get("stackTrace") or {}).get("frames", [])
        ]
        found.append((thread, frames))
    return found


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--orders-per-day", type=int, default=20000)
    p.add_argument("--sink", choices=("lake", "parquet", "noop"), default="lake")
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--stack-depth", type=int, default=96)
    args = p.parse_args()

    from backfill_assets.demo.generate import generate_feed

    work = Path(args.workdir or tempfile.mkdtemp(prefix="backfill-raw-profile-"))
    landing, start = work / "landing", date(2024, 1, 1)
    end = start + timedelta(days=args.days - 1)
    if not landing.exists():
        summary = generate_feed(landing, start, end, orders_per_day=args.orders_per_day, seed=1)
        print(f"feed: {summary.records} records in {summary.order_files} files under {work}")
    recording = work / f"raw-{args.sink}.jfr"
    began = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            JOB,
            str(landing),
            str(work / "raw"),
            str(recording),
            args.sink,
            str(start),
            str(end),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"the job failed ({done.returncode}):\n{done.stderr[-4000:]}")
    figures = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    job_s = float(figures["JOB_SECONDS"])
    jvm_cpu, workers_cpu = float(figures["JVM_CPU"]), float(figures["WORKERS_CPU"])
    print(f"job: {job_s:.1f} s of {time.monotonic() - began:.1f} s with the JVM's start")
    print(
        f"CPU: the JVM {jvm_cpu:.1f} s (its start and the plan included), "
        f"Spark's Python workers {workers_cpu:.1f} s"
    )

    executor = [
        frames
        for thread, frames in samples(recording, args.stack_depth)
        if thread.startswith(EXECUTOR_THREADS)
    ]
    if not executor:
        sys.exit(f"no executor samples in {recording}")
    claims = [claimed(frames) for frames in executor]
    by_cost = Counter(cost for cost, _ in claims)
    own = Counter(frames[0] for frames in executor if frames)
    total = len(executor)
    print(f"\nexecutor samples: {total}; by cost (the first frame from the top a cost claims):")
    for name, n in by_cost.most_common():
        print(f"  {100 * n / total:5.1f}%  {name}")
        callers = Counter(caller for cost, caller in claims if cost == name and caller)
        for caller, m in callers.most_common(3):
            print(f"           {100 * m / total:5.1f}%  from {caller}")
    print(f"\nhottest methods by their own samples (top {args.top}):")
    for frame, n in own.most_common(args.top):
        print(f"  {100 * n / total:5.1f}%  {frame}")
    shares = ",".join(
        f"{name.replace(' ', '_')}={100 * n / total:.1f}" for name, n in by_cost.most_common()
    )
    print(
        f"PROFILE days={args.days} orders={args.orders_per_day} sink={args.sink} "
        f"job_s={job_s:.1f} jvm_cpu_s={jvm_cpu:.1f} workers_cpu_s={workers_cpu:.1f} "
        f"samples={total} {shares}"
    )


if __name__ == "__main__":
    main()
