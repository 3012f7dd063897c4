"""Staging on a feed where one customer places most orders, with and without the skew
mitigation (the salted write, ``transforms.skew``); run by hand.

    .venv/bin/python bench/skew_bench.py --days 30 --orders-per-day 5000 --hot-share 0.6
    .venv/bin/python bench/skew_bench.py --days 11 --orders-per-day 2000 --hot-share 0
    --hot-day-orders 40000

It generates the feed (``--hot-customer-share``; with ``--hot-day-orders`` the middle day has that
many orders instead, a hot event date), builds raw once (not timed), prints the plan's key
distribution, then rebuilds the event days' step (staging and fact) over the whole range,
alternating BACKFILL_SKEW_MITIGATION=off and auto (auto finds the hot customer or day and salts the
write), ``--repeats`` times each, after one warm-up run, all in one process and one Spark session.
``staging_s`` is the time from the step's start to its last staging materialization: build, stage,
audit, publish of stg_orders, without the fact. The last line is the SKEW line
docs/benchmarks.md quotes."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def staging_seconds(instance, run_id: str) -> float:
    from dagster._core.events import DagsterEventType

    from backfill_assets.catalog import STG_ORDERS

    start = last = None
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        if event.event_type == DagsterEventType.STEP_START and start is None:
            start = record.timestamp
        if (
            event.event_type == DagsterEventType.ASSET_MATERIALIZATION
            and event.step_materialization_data.materialization.asset_key == STG_ORDERS
        ):
            last = record.timestamp
    if start is None or last is None:
        raise SystemExit(f"run {run_id} published no staging")
    return last - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=int, default=30)
    p.add_argument("--orders-per-day", type=int, default=5000)
    p.add_argument("--hot-share", type=float, default=0.6)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument(
        "--hot-day-orders",
        type=int,
        default=0,
        help="give the middle day this many orders instead (a hot event date)",
    )
    args = p.parse_args()
    start = date(2024, 1, 1)
    end = start + timedelta(days=args.days - 1)
    work = Path(tempfile.mkdtemp(prefix="skew_bench_"))
    home = work / "home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    os.environ.update(
        {
            "DAGSTER_HOME": str(home),
            "BACKFILL_LANDING_DIR": str(work / "landing"),
            "BACKFILL_LAKE_DIR": str(work / "lake"),
            "BACKFILL_START_DATE": start.isoformat(),
            "PYSPARK_PYTHON": sys.executable,
        }
    )
    import dagster as dg

    from backfill_assets.backfill_plan import RunPlan, plan_backfill
    from backfill_assets.catalog import EVENT_DAYS_STEP, STEP_ASSETS
    from backfill_assets.cli.key_distribution import key_distribution, render_skew
    from backfill_assets.cli.runner import execute
    from backfill_assets.demo.generate import generate_feed
    from backfill_assets.settings import Settings

    settings = Settings.from_env()
    began = time.monotonic()
    hot_day = start + timedelta(days=args.days // 2)
    ranges = (
        [
            (start, hot_day - timedelta(days=1), args.orders_per_day),
            (hot_day, hot_day, args.hot_day_orders),
            (hot_day + timedelta(days=1), end, args.orders_per_day),
        ]
        if args.hot_day_orders
        else [(start, end, args.orders_per_day)]
    )
    records = 0
    for first, last, orders in ranges:  # a day's files depend on the seed and the day only
        if first <= last:
            records += generate_feed(
                settings.landing_dir,
                first,
                last,
                orders_per_day=orders,
                seed=7,
                hot_customer_share=args.hot_share,
            ).records
    print(
        f"feed: {records:,} records, {args.days} days, hot share {args.hot_share}, hot day "
        f"{hot_day if args.hot_day_orders else None} ({time.monotonic() - began:.0f}s)",
        flush=True,
    )
    times: dict[str, list[float]] = {"off": [], "auto": []}
    with dg.DagsterInstance.get() as instance:
        began = time.monotonic()
        for plan in plan_backfill(settings, start, end)[:-1]:
            outcome = execute(plan, instance)
            if not outcome.success:
                raise SystemExit(f"raw failed: {outcome.error}")
        print(f"raw built ({time.monotonic() - began:.0f}s)", flush=True)
        print("\n".join(render_skew(key_distribution(settings, start, end))), flush=True)
        event_days = RunPlan(STEP_ASSETS[EVENT_DAYS_STEP], start, end)
        for n, mode in enumerate(["off"] + ["off", "auto"] * args.repeats):
            os.environ["BACKFILL_SKEW_MITIGATION"] = mode
            outcome = execute(event_days, instance)
            if not outcome.success:
                raise SystemExit(f"event days failed ({mode}): {outcome.error}")
            seconds = staging_seconds(instance, outcome.run_id)
            label = "warm-up" if n == 0 else mode
            print(f"run {n}: mitigation {label}: staging {seconds:.1f}s", flush=True)
            if n:
                times[mode].append(seconds)
    off, auto = statistics.median(times["off"]), statistics.median(times["auto"])
    shutil.rmtree(work, ignore_errors=True)
    print(
        f"SKEW days={args.days} orders_per_day={args.orders_per_day} hot_share={args.hot_share} "
        f"hot_day_orders={args.hot_day_orders} "
        f"staging_off_s={off:.1f} staging_mitigated_s={auto:.1f} ratio={off / auto:.2f} "
        f"cores={os.cpu_count()} load1={os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
