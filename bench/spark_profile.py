"""Where a Spark application spent its time: one line per job from its event log; run by hand.

Record an event log by giving the driver these settings, then summarise it:

    export PYSPARK_SUBMIT_ARGS="--conf spark.eventLog.enabled=true \\ --conf
    spark.eventLog.compress=false --conf spark.eventLog.dir=file:///tmp/spark-events pyspark-shell"
    .venv/bin/python -m backfill_assets.cli backfill --start 2024-03-01 --end 2024-04-29
    .venv/bin/python bench/spark_profile.py /tmp/spark-events

Each line: when the job started (seconds after the application), its wall time,
the task time summed over its stages (up to cores x wall), the bytes it shuffled,
and the line of our code that started it. Jobs shorter than ``--min-seconds`` are left out.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def events(path: Path):
    # Spark's rolling layout: <dir>/eventlog_v2_<app>/events_<n>_<app>, beside status and .crc files
    files = [path] if path.is_file() else sorted(path.rglob("events_*"))
    for file in files:
        with open(file) as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)


def summarise(path: Path, min_seconds: float) -> list[str]:
    started, jobs = None, {}
    stage_task_ms: dict[int, int] = {}  # by stage id
    stage_shuffle: dict[int, int] = {}
    for e in events(path):
        kind = e["Event"]
        if kind == "SparkListenerApplicationStart":
            started = e["Timestamp"]
        elif kind == "SparkListenerJobStart":
            site = e.get("Properties", {}).get("callSite.short", "")
            jobs[e["Job ID"]] = [
                e["Submission Time"],
                None,
                site,
                [s["Stage ID"] for s in e["Stage Infos"]],
            ]
        elif kind == "SparkListenerJobEnd" and e["Job ID"] in jobs:
            jobs[e["Job ID"]][1] = e["Completion Time"]
        elif kind == "SparkListenerTaskEnd":
            metrics = e.get("Task Metrics") or {}
            stage = e["Stage ID"]
            stage_task_ms[stage] = stage_task_ms.get(stage, 0) + metrics.get("Executor Run Time", 0)
            written = (metrics.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0)
            stage_shuffle[stage] = stage_shuffle.get(stage, 0) + written
    out = []
    for job, (begin, end, site, stages) in sorted(jobs.items()):
        if end is None or (end - begin) / 1000 < min_seconds:
            continue
        task = sum(stage_task_ms.get(s, 0) for s in stages) / 1000
        shuffled = sum(stage_shuffle.get(s, 0) for s in stages) / 2**20
        out.append(
            f"job {job:4d} at {(begin - (started or begin)) / 1000:7.1f}s  wall "
            f"{(end - begin) / 1000:6.1f}s  "
            f"tasks {task:7.1f}s  shuffle {shuffled:6.0f} MiB  {site}"
        )
    return out


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("event_log", type=Path, help="an event log file, or a directory of them")
    p.add_argument("--min-seconds", type=float, default=0.3)
    args = p.parse_args()
    print("\n".join(summarise(args.event_log, args.min_seconds)))


if __name__ == "__main__":
    main()
