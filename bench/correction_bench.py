"""A versioned correction against a plain backfill of the same days; run by hand.

    .venv/bin/python bench/correction_bench.py --days 90 --orders-per-day 4000
    .venv/bin/python bench/correction_bench.py --days 20 --orders-per-day 2000 --engine delta-spark

On one generated feed:

1. backfill: ``backfill-assets backfill`` of the range (a fresh process; the lake is then
   rebuilt once more by a second timed backfill, so both timed commands replace tables
   that already exist);
2. the provider restates EUR for the range's rate dates, and ``backfill-assets correct``
   builds the same days beside production (a fresh process: raw, then staging and fact
   staged, every check);
3. in one process with its Spark session up: diff, then cutover, rollback and cutover
   again, each timed alone, and the bytes each copied: the data files it wrote (0 when its
   commits only swap files: the staged ones in, or the old version's back);
4. the commands an operator types, each a fresh process: ``backfill-assets corrections``
   (the listing: the interpreter, the imports and the Dagster instance, no Spark), then
   ``rollback`` and ``cutover --force``. A command's time less the listing's and the lake's
   own call (step 3) is what it adds around the commits: its Spark session's start (delta-spark
   only), recording the outcome in Dagster.

``--engine`` sets ``BACKFILL_LAKE_ENGINE`` for every step (``delta-spark`` needs Delta's jars).
``--profile`` prints, for each of the three timed commits, the project's functions that took
the most of it (cumulative time, cProfile): what bounds a cutover or a rollback.
The last line is the RESULT line docs/benchmarks.md quotes.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CID = "bench"


def cli(env: dict, *args: str) -> float:
    began = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "backfill_assets.cli", *args],
        env=env,
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    return time.monotonic() - began


def added_bytes(table_dir: Path, version: int) -> int:
    """The bytes of the files the commit ``version`` added."""
    with open(table_dir / "_delta_log" / f"{version:020d}.json", encoding="utf-8") as log:
        return sum(add["size"] for line in log if (add := json.loads(line).get("add")))


def data_files(lake_dir: Path) -> dict[str, int]:
    """Every data file of every table (path -> bytes), in a log or not; logs and manifests
    (folders starting with ``_``) left out."""
    found = {}
    for folder, dirs, files in os.walk(lake_dir):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for name in files:
            if name.endswith(".parquet"):
                path = os.path.join(folder, name)
                found[path] = os.path.getsize(path)
    return found


def print_profile(step: str, profile: cProfile.Profile, top: int = 25) -> None:
    """The project's functions that took the most of ``step``, by cumulative time."""
    stats = pstats.Stats(profile)
    rows = [
        (cumulative, calls, f"{Path(file).name}:{line} {name}")
        for (file, line, name), (_, calls, _, cumulative, _) in stats.stats.items()  # type: ignore[attr-defined]
        if "backfill_assets" in file
    ]
    print(f"profile of {step} (cumulative s, calls, function):")
    for cumulative, calls, where in sorted(rows, reverse=True)[:top]:
        print(f"  {cumulative:7.3f} {calls:6d}  {where}")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--days", type=int, default=90)
    p.add_argument("--orders-per-day", type=int, default=4000)
    p.add_argument("--end", type=date.fromisoformat, default=date(2025, 6, 30))
    p.add_argument("--engine", choices=["auto", "delta-rs", "delta-spark"], default="auto")
    p.add_argument("--profile", action="store_true", help="where each commit's time goes")
    args = p.parse_args()

    from backfill_assets.demo.generate import generate_feed, restate_rates

    start = args.end - timedelta(days=args.days - 1)
    work = Path(tempfile.mkdtemp(prefix="correction-bench-"))
    env = {
        **os.environ,
        "BACKFILL_LANDING_DIR": str(work / "landing"),
        "BACKFILL_LAKE_DIR": str(work / "lake"),
        "DAGSTER_HOME": str(work / "home"),
        "BACKFILL_START_DATE": (start - timedelta(days=7)).isoformat(),
        "BACKFILL_LOG_LEVEL": "ERROR",
        "BACKFILL_LAKE_ENGINE": args.engine,
    }
    (work / "home").mkdir()
    generate_feed(
        work / "landing",
        start - timedelta(days=7),
        args.end,
        orders_per_day=args.orders_per_day,
        seed=1,
    )
    span = ["--start", start.isoformat(), "--end", args.end.isoformat()]
    cli(env, "backfill", *span)
    backfill_s = cli(env, "backfill", *span)
    print(
        f"backfill of {args.days} days x {args.orders_per_day} orders: {backfill_s:.1f} s",
        flush=True,
    )

    files = restate_rates(work / "landing", "EUR", start, args.end, Decimal("1.03"))
    correct_s = cli(env, "correct", *span, "--reason", "bench: EUR restated", "--id", CID)
    print(
        f"correct (stage, every check): {correct_s:.1f} s; {files} restated rate files", flush=True
    )

    os.environ.update(env)
    from backfill_assets.corrections import diff as diffing
    from backfill_assets.corrections import lifecycle, registry
    from backfill_assets.lake import Lake
    from backfill_assets.spark.session import build_session, spark_config

    lake = Lake(work / "lake", build_session(spark_config()))
    began = time.monotonic()
    result = diffing.compute(lake, registry.get(lake.root, CID))
    diffing.record(lake, result)
    diff_s = time.monotonic() - began
    print(
        f"diff: {diff_s:.1f} s; {len(result.changed_days)} of {len(result.days)} days changed",
        flush=True,
    )

    timings, copied = {}, {}
    for step, action in (
        ("cutover", lambda: lifecycle.cutover(lake, CID, force=True)),
        ("rollback", lambda: lifecycle.rollback(lake, CID)),
        ("cutover_again", lambda: lifecycle.cutover(lake, CID, force=True)),
    ):
        before = data_files(lake.root)
        profile = cProfile.Profile() if args.profile else None
        began = time.monotonic()
        outcome = profile.runcall(action) if profile else action()
        timings[step] = time.monotonic() - began
        if profile:
            print_profile(step, profile)
        after = data_files(lake.root)
        copied[step] = sum(size for path, size in after.items() if path not in before)
        print(
            f"{step}: {timings[step]:.2f} s, {copied[step]} bytes copied, "
            f"{len(outcome.days)} partitions per table, "
            + ", ".join(f"{t} v{w.version}" for t, w in outcome.writes.items()),
            flush=True,
        )
        if step == "cutover":
            published = sum(
                added_bytes(lake.path(table), write.version)
                for table, write in outcome.writes.items()
            )
    commands = {
        name: cli(env, *argv)
        for name, argv in (
            ("corrections_cmd", ("corrections",)),
            ("rollback_cmd", ("rollback", CID)),
            ("cutover_cmd", ("cutover", CID, "--force")),
        )
    }
    print("commands: " + ", ".join(f"{k} {v:.2f} s" for k, v in commands.items()), flush=True)
    print(
        f"RESULT days={args.days} orders={args.orders_per_day} engine={lake.engine.name} "
        f"backfill_s={backfill_s:.1f} correct_s={correct_s:.1f} "
        f"stage_over_backfill={correct_s / backfill_s:.2f} diff_s={diff_s:.1f} "
        f"cutover_s={timings['cutover']:.2f} rollback_s={timings['rollback']:.2f} "
        f"bytes_published={published} bytes_copied={copied['cutover']} "
        f"rollback_bytes_copied={copied['rollback']} "
        + " ".join(f"{k}_s={v:.2f}" for k, v in commands.items())
    )


if __name__ == "__main__":
    main()
