"""What a run's own event log file costs on SQLite, Dagster's class against the project's; run by
hand.

    .venv/bin/python bench/event_log_bench.py --runs 40

Each Dagster run stores its events in a SQLite file of its own (``history/runs/<run id>.db``).
For each class, in a folder of its own, the bench times:

1. ``new``: the first connection to a new run's file, as the process that creates a run makes
   it (Dagster's class: its ``_initdb``; the project's: a copy of the template);
2. ``opened``: the first connection of another process's storage to a run's file that is
   already there, as a run worker opens the file the launcher made.

The first new run of a folder is timed apart (``first``): the project's class makes its
template then. Each folder is deleted afterwards.
The last line is the RESULT line docs/benchmarks.md quotes.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def first_connection(storage, run_id: str) -> float:
    began = time.perf_counter()
    with storage.run_connection(run_id):
        pass
    return time.perf_counter() - began


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--runs", type=int, default=40)
    args = p.parse_args()

    from backfill_assets.dagster_private import SqliteEventLogStorage
    from backfill_assets.event_log import EngineReusingSqliteEventLogStorage

    figures: dict[str, float] = {}
    for name, cls in (
        ("dagster", SqliteEventLogStorage),
        ("ours", EngineReusingSqliteEventLogStorage),
    ):
        base = tempfile.mkdtemp(prefix=f"event-log-bench-{name}-")
        try:
            storage = cls(base)
            figures[f"{name}_first_ms"] = first_connection(storage, "first") * 1000
            run_ids = [f"run-{i}" for i in range(args.runs)]
            new = [first_connection(storage, run_id) for run_id in run_ids]
            reader = cls(base)  # another process's storage: nothing of this folder known yet
            opened = [first_connection(reader, run_id) for run_id in run_ids]
            storage.dispose()
            reader.dispose()
        finally:
            shutil.rmtree(base, ignore_errors=True)
        for what, times in (("new", new), ("opened", opened)):
            p50, mean = statistics.median(times) * 1000, statistics.fmean(times) * 1000
            figures[f"{name}_{what}_ms"] = p50
            print(f"{name:8s} {what:7s} p50 {p50:7.1f} ms  mean {mean:7.1f} ms  ({args.runs} runs)")
    print(
        f"RESULT event_log_bench runs={args.runs} "
        + " ".join(f"{k}={v:.1f}" for k, v in figures.items())
    )


if __name__ == "__main__":
    main()
