"""How long one late-data sensor tick takes over three years of landing folders.

Creates ~1100 arrival folders (two tiny order files each) and ~800 rate folders (one file)
in a temporary directory, then times:

- detection alone (``late_data.detect``, no Dagster): cold with no cursor and nothing built,
  cold after a backfill (every folder built), warm with the full cursor and nothing new, and
  warm with one new file plus one folder delivered days late;
- the sensor itself (``build_sensor_context`` on a real instance in which every raw partition
  is materialized): its first, cold tick, then warm ticks.

Run by hand: ``.venv/bin/python bench/sensor_bench.py [--days 1100] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path
from typing import TypeVar

FIRST = date(2022, 1, 1)
T = TypeVar("T")


def order_line(order_id: str, event_time: str) -> str:
    return json.dumps(
        {
            "order_id": order_id,
            "customer_id": "c",
            "event_time": event_time,
            "updated_at": event_time,
            "status": "paid",
            "amount": "1.00",
            "currency": "USD",
            "country": "US",
        }
    )


def build_landing(root: Path, days: int) -> None:
    for i in range(days):
        day = FIRST + timedelta(days=i)
        folder = root / "orders" / f"arrival_date={day}"
        folder.mkdir(parents=True)
        for part in (1, 2):
            stamp = f"{day}T1{part}:00:00Z"
            (folder / f"orders-{part}.jsonl").write_text(order_line(f"{i}-{part}", stamp) + "\n")
        if day.weekday() < 5:
            rates = root / "fx_rates" / f"rate_date={day}"
            rates.mkdir(parents=True)
            (rates / "fx-rates-1.csv").write_text("currency,usd_per_unit\nEUR,1.08\n")


def timed(fn: Callable[[], T], repeat: int) -> tuple[float, T]:
    """Median seconds of ``repeat`` calls, and the last result."""
    assert repeat >= 1
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times), result


def bench_detection(root: Path, last: date, repeat: int) -> None:
    from backfill_assets.late_data import detect
    from backfill_assets.late_data.scan import clock_ns

    def run(cursor, built):
        return detect(root, FIRST, last, 7, 7, cursor, built, clock_ns(), 0)

    built_now = clock_ns()
    all_built = {
        ds: {FIRST + timedelta(days=i): built_now for i in range((last - FIRST).days + 1)}
        for ds in ("orders", "fx_rates")
    }
    seconds, cold = timed(lambda: run(None, lambda ds: {}), repeat)
    print(
        f"detect, cold, nothing built      {seconds * 1000:8.1f} ms  "
        f"({len(cold.raw)} raw run(s), {len(cold.group.days)} event days pending)"
    )
    seconds, after = timed(lambda: run(None, all_built.get), repeat)
    print(
        f"detect, cold, after a backfill   {seconds * 1000:8.1f} ms  ({len(after.raw)} raw run(s))"
    )
    cursor = after.cursor
    print(f"cursor size                      {len(cursor.dumps()):8d} bytes")
    seconds, warm = timed(lambda: run(cursor, None), repeat)
    print(
        f"detect, warm, nothing new        {seconds * 1000:8.1f} ms  ({len(warm.raw)} raw run(s))"
    )
    late_day = last - timedelta(days=30)
    folder = root / "orders" / f"arrival_date={late_day}"
    (folder / "late.jsonl").write_text(
        order_line("late", f"{late_day - timedelta(days=2)}T08:00:00Z") + "\n"
    )
    moved = root.parent / "late-folder"
    shutil.move(str(root / "orders" / f"arrival_date={last - timedelta(days=4)}"), moved)
    cursor = run(cursor, None).cursor  # the folder is now gone: the cursor forgets it
    shutil.move(str(moved), root / "orders" / f"arrival_date={last - timedelta(days=4)}")
    time.sleep(0.01)
    new = run(cursor, None)
    seconds, _ = timed(lambda: run(cursor, None), repeat)
    print(
        f"detect, warm, 1 file + 1 folder  {seconds * 1000:8.1f} ms  "
        f"({[f'{r.step} {r.start}..{r.end}' for r in new.raw]}, "
        f"event days {[str(d) for d in new.group.days]})"
    )


def bench_sensor(root: Path, last: date, repeat: int) -> None:
    import dagster as dg

    from backfill_assets.catalog import RAW_FX_RATES, RAW_ORDERS
    from backfill_assets.defs.automation.sensors import build_late_data_sensor
    from backfill_assets.settings import AutomationSettings, Settings

    home = root.parent / "home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        began = time.perf_counter()
        for key, folder in ((RAW_ORDERS, "orders"), (RAW_FX_RATES, "fx_rates")):
            for path in (root / folder).iterdir():
                instance.report_runless_asset_event(
                    dg.AssetMaterialization(key, partition=path.name.split("=")[1])
                )
        print(f"(instance: every raw partition materialized in {time.perf_counter() - began:.0f}s)")
        sensor = build_late_data_sensor(
            Settings(root, root.parent / "lake", FIRST, 7), AutomationSettings(settle_seconds=0)
        )

        def tick(cursor: str | None = None) -> dg.SensorResult:
            result = sensor(dg.build_sensor_context(instance=instance, cursor=cursor))
            assert isinstance(result, dg.SensorResult)
            return result

        seconds, cold = timed(tick, 1)
        print(
            f"sensor tick, cold (first tick)   {seconds * 1000:8.1f} ms  "
            f"({len(cold.run_requests or [])} run request(s))"
        )
        seconds, warm = timed(lambda: tick(cold.cursor), repeat)
        print(
            f"sensor tick, warm                {seconds * 1000:8.1f} ms  "
            f"({len(warm.run_requests or [])} run request(s))"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=1100)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "yes")
    with tempfile.TemporaryDirectory(prefix="sensor_bench_") as tmp:
        root = Path(tmp) / "landing"
        began = time.perf_counter()
        build_landing(root, args.days)
        last = FIRST + timedelta(days=args.days - 1)
        folders = sum(1 for _ in (root / "orders").iterdir()) + sum(
            1 for _ in (root / "fx_rates").iterdir()
        )
        print(
            f"landing: {folders} folders, {args.days} days from {FIRST} "
            f"(built in {time.perf_counter() - began:.1f}s); median of {args.repeat}"
        )
        bench_detection(root, last, args.repeat)
        bench_sensor(root, last, args.repeat)


if __name__ == "__main__":
    main()
