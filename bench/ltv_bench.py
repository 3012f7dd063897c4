"""Customer LTV: a whole range as one run against one run per day; run by hand.

    .venv/bin/python bench/ltv_bench.py --days 365 --orders-per-day 1000

On one generated feed, it builds every layer with ``backfill-assets backfill`` (setup, not
timed), then measures, each in a fresh process against the same Dagster instance:

1. ``ltv_range_s``: ``fct_customer_ltv`` over all the days as one ranged run (one Spark job,
   every check), as ``dagster asset materialize --partition-range`` starts it;
2. ``ltv_sequential_per_day_s``: a sample of single-day runs, each in its own process as
   Dagster's default run launcher would run them one after the other (each reads its seed,
   the customers' latest earlier rows, and its day's staging);

and prints their ratio for the range: ``ratio = ltv_sequential_per_day_s * days / ltv_range_s``
(the goal: at least 30). The last line is the RESULT line docs/benchmarks.md quotes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.backfill_bench import pipeline_env, timed


def materialize(env: dict, work: Path, name: str, partition_args: list[str]) -> float:
    dagster = str(Path(sys.executable).with_name("dagster"))
    cmd = [
        dagster,
        "asset",
        "materialize",
        "-m",
        "backfill_assets.definitions",
        "--select",
        "fct_customer_ltv",
        *partition_args,
    ]
    seconds, _, code = timed(cmd, env, work / f"{name}.log")
    if code != 0:
        raise SystemExit(f"{name} exited {code}: see {work / (name + '.log')}")
    return seconds


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--days", type=int, default=365)
    p.add_argument("--orders-per-day", type=int, default=1000)
    p.add_argument("--sample", type=int, default=3)
    p.add_argument("--workdir", type=Path, default=None)
    args = p.parse_args()

    from backfill_assets.demo.generate import generate_feed

    work = Path(args.workdir or tempfile.mkdtemp(prefix="ltv-bench-"))
    landing = work / "landing"
    start = date(2024, 1, 1)
    end = start + timedelta(days=args.days - 1)
    summary = generate_feed(landing, start, end, orders_per_day=args.orders_per_day, seed=1)
    print(f"feed: {summary.records} records under {work}", flush=True)
    env = pipeline_env(work, "ltv", landing, start)
    began = time.monotonic()
    setup = subprocess.run(
        [
            sys.executable,
            "-m",
            "backfill_assets.cli",
            "backfill",
            "--start",
            str(start),
            "--end",
            str(end),
        ],
        check=False,
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    print(
        f"setup: every layer built in {time.monotonic() - began:.0f}s (exit {setup.returncode})",
        flush=True,
    )

    range_s = materialize(env, work, "range", ["--partition-range", f"{start}...{end}"])
    print(f"range: {args.days} days in one run: {range_s:.1f}s", flush=True)
    step = max(1, args.days // (args.sample + 1))
    sample = [start + timedelta(days=step * (i + 1)) for i in range(args.sample)]
    singles = []
    for day in sample:
        singles.append(materialize(env, work, f"day-{day}", ["--partition", day.isoformat()]))
        print(f"  single day {day}: {singles[-1]:.1f}s", flush=True)
    per_day = sum(singles) / len(singles)
    print(
        f"RESULT days={args.days} orders_per_day={args.orders_per_day} ltv_range_s={range_s:.1f} "
        f"ltv_sequential_per_day_s={per_day:.1f} ratio={per_day * args.days / range_s:.1f}"
    )


if __name__ == "__main__":
    main()
