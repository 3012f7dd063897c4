"""How long a landed file takes to reach the published tables, with Dagster run as `make ui` runs
it: the webserver, the daemon and the code server (`dagster dev`), the automation on
(``BACKFILL_AUTOMATION=on``) at its shipped sensor interval (or ``--sensor-interval``) and
schedules.

    .venv/bin/python bench/freshness.py [--landings 10] [--days 30] [--sensor-interval S]

First a lake of ``--days`` event days ending yesterday is landed and backfilled
(`backfill-assets backfill`). Then `dagster dev` starts, and ``--landings`` times in turn, a new
order file lands in yesterday's arrival folder (its orders on yesterday) and one in the folder of
two weeks back (its orders on that day), each once the runs of the one before have ended. For
each, the bench waits until that day's fct_daily_revenue is published holding the file's orders
(read from the lake), then until customer LTV of the day is published again by a run created
after the landing, and the day's month when the month is complete (a month still under way has
no report yet).

Where the time to the fact goes, from the events of the runs the automation launched for the
file (the raw run, then the event days' run), summed over them:

- ``sensor``: from the landing (or the previous run's end) to the next run's creation: the
  sensor's interval, the settle time of a changed folder, its tick;
- ``queue``: the run's creation to its dequeue (the run queue, the daemon's loop);
- ``launch``: dequeued to the run worker's ``RUN_START`` (a new process, the code loaded);
- ``to_step``: ``RUN_START`` to the step's start (the executor, the resources);
- ``spark``: the step's Spark session start (its log line, ``resources.SESSION_STARTED``);
- ``work``: the rest of the step to the fact's materialization, or the raw run's last one
  (read, compute, stage, audit, publish, Dagster's events);
- ``close``: from there to the run's end (the raw run only: the event days' waits on it).

Prints a line per landing, then per kind p50 and p95, and last::

    FRESHNESS landings=<n> fact_p50_s=<s> fact_p95_s=<s> ltv_p95_s=<s> month_p95_s=<s|na>
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import partial
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dagster as dg

from backfill_assets.automation.state import load_cursor
from backfill_assets.catalog import (
    FACT_TABLE,
    FCT_CUSTOMER_LTV,
    FCT_DAILY_REVENUE,
    RANGE_END,
    RANGE_START,
    REQUEST_TAG,
    RPT_MONTHLY_REVENUE,
)
from backfill_assets.cli.instance import prepare_instance_yaml
from backfill_assets.days import last_complete_month, last_partition, month_of
from backfill_assets.demo.generate import generate_feed
from backfill_assets.resources import SESSION_STARTED
from backfill_assets_testkit.contract_feed import order
from backfill_assets_testkit.dagster_dev import PROJECT_DIR, running_dagster_dev, server_env

PARTITION_TAG = "dagster/partition"  # a run of one partition
STAGES = ("sensor", "queue", "launch", "to_step", "spark", "work", "close")
ORDERS_PER_FILE = 3
WAIT_S = 900.0  # for one table of one landing


@dataclass
class Landing:
    day: date
    landed: float  # epoch seconds
    fact_s: float | None = None
    ltv_s: float | None = None
    month_s: float | None = None
    stages: dict[str, float] = field(default_factory=dict)


def fact_orders(lake: Path, day: date) -> int:
    """The orders fct_daily_revenue holds for ``day`` now (read with deltalake)."""
    from deltalake import DeltaTable

    table = DeltaTable(str(lake / FACT_TABLE.path))
    found = table.to_pyarrow_table(filters=[(FACT_TABLE.partition_column, "=", day)])
    return sum(found.column("orders").to_pylist())


def latest_id(instance: dg.DagsterInstance, key: dg.AssetKey, partition: date) -> int:
    """The storage id of ``key``'s latest materialization of ``partition`` (0: none)."""
    latest = instance.event_log_storage.get_latest_storage_id_by_partition(
        key, dg.DagsterEventType.ASSET_MATERIALIZATION
    )
    return latest.get(partition.isoformat(), 0)


def holds(lake: Path, day: date, orders: int) -> bool:
    return fact_orders(lake, day) >= orders


def newer(
    instance: dg.DagsterInstance, key: dg.AssetKey, partition: date, than: int, landed: float
) -> bool:
    """Whether ``key``'s latest materialization of ``partition`` is newer than storage id
    ``than`` and was stored by a run created after the landing: a run that was under way before
    it (the previous landing's customer LTV run, which restates every later day) is not the
    landing's."""
    if latest_id(instance, key, partition) <= than:
        return False
    record = instance.get_run_record_by_id(materialized_at(instance, key, partition)[0])
    return record is not None and record.create_timestamp.timestamp() >= landed


UNENDED = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def no_run_under_way(instance: dg.DagsterInstance) -> bool:
    return not instance.get_run_records(dg.RunsFilter(statuses=UNENDED), limit=1)


def wait(what: str, done: Callable[[], bool], ui) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {WAIT_S:.0f} s:\n{ui.log_tail()}")
        time.sleep(0.5)


def land(landing: Path, day: date, number: int) -> float:
    """A new order file in ``day``'s arrival folder, its orders on ``day``; when it landed."""
    folder = landing / "orders" / f"arrival_date={day.isoformat()}"
    lines = [
        order(f"fresh-{number}-{i}", event=f"{day.isoformat()}T12:00:00Z", customer=f"F{i}")
        for i in range(ORDERS_PER_FILE)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".fresh-{number}.jsonl.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    landed = time.time()
    tmp.rename(folder / f"fresh-{number}.jsonl")  # whole at once, as a producer lands a file
    return landed


def materialized_at(instance: dg.DagsterInstance, key: dg.AssetKey, day: date) -> tuple[str, float]:
    """(run id, timestamp) of the latest materialization of ``key`` for ``day``."""
    record = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[day.isoformat()]), limit=1
    ).records[0]
    return record.run_id, record.timestamp


def covers(record: dg.RunRecord, day: date) -> bool:
    """Whether the run builds ``day``: its partition range holds it (the raw run of the arrival
    folder, the event days' run of its window)."""
    tags = record.dagster_run.tags
    first = tags.get(RANGE_START, tags.get(PARTITION_TAG))
    last = tags.get(RANGE_END, first)
    return first is not None and last is not None and first <= day.isoformat() <= last


def stages(
    instance: dg.DagsterInstance, day: date, landed: float, fact_run: str, fact_at: float
) -> dict:
    """Where the time from the landing to the fact's materialization went (module docstring)."""
    runs = sorted(
        (
            r
            for r in instance.get_run_records(
                dg.RunsFilter(created_after=datetime.fromtimestamp(landed, UTC))
            )
            if REQUEST_TAG in r.dagster_run.tags
        ),
        key=lambda r: r.create_timestamp,
    )
    chain = [r for r in runs if r.create_timestamp.timestamp() <= fact_at and covers(r, day)]
    out = dict.fromkeys(STAGES, 0.0)
    previous = landed
    for record in chain:
        run_id = record.dagster_run.run_id
        created = record.create_timestamp.timestamp()
        at: dict[str, float] = {}
        spark_s = 0.0
        last_materialization = None
        for entry in instance.all_logs(run_id):
            kind = entry.dagster_event_type
            if kind is None:
                if entry.user_message.startswith(SESSION_STARTED):
                    spark_s = float(entry.user_message.removeprefix(SESSION_STARTED).split()[0])
                continue
            at.setdefault(kind.name, entry.timestamp)
            if kind == dg.DagsterEventType.ASSET_MATERIALIZATION:
                last_materialization = entry.timestamp
        ended = at.get("RUN_SUCCESS", at.get("RUN_FAILURE", fact_at))
        end = fact_at if run_id == fact_run else ended
        if run_id != fact_run and last_materialization is not None:
            out["close"] += ended - last_materialization
            end = last_materialization
        dequeued = at.get("RUN_DEQUEUED", created)
        started = at.get("RUN_START", dequeued)
        step = at.get("STEP_START", started)
        out["sensor"] += max(0.0, created - previous)
        out["queue"] += dequeued - created
        out["launch"] += started - dequeued
        out["to_step"] += step - started
        out["spark"] += spark_s
        out["work"] += max(0.0, end - step - spark_s)
        previous = ended
    return out


def quantiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))]
    return statistics.median(ordered), p95


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--landings", type=int, default=10, help="per arrival folder")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--orders-per-day", type=int, default=200)
    parser.add_argument(
        "--sensor-interval",
        type=int,
        help="BACKFILL_SENSOR_INTERVAL_SECONDS for the servers (default: the shipped interval)",
    )
    args = parser.parse_args()
    if args.days < 15:
        parser.error("--days must reach two weeks back: at least 15")
    yesterday = last_partition()
    first = yesterday - timedelta(days=args.days - 1)
    two_weeks_back = yesterday - timedelta(days=13)
    root = Path(tempfile.mkdtemp(prefix="freshness-"))
    home, landing, lake = root / "home", root / "landing", root / "lake"
    home.mkdir()
    prepare_instance_yaml(home, PROJECT_DIR / "dagster.yaml")
    env = server_env(home, landing, lake, first.isoformat())
    env["BACKFILL_AUTOMATION"] = "on"
    if args.sensor_interval is not None:
        env["BACKFILL_SENSOR_INTERVAL_SECONDS"] = str(args.sensor_interval)
    generate_feed(landing, first, yesterday, args.orders_per_day, seed=5, last_arrival=yesterday)
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "backfill_assets.cli", "backfill", "--start", str(first),
         "--end", str(yesterday)],
        env=env, cwd=PROJECT_DIR, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    print(f"backfilled {first}..{yesterday} in {time.monotonic() - started:.0f} s", flush=True)
    results: list[Landing] = []
    try:
        with (
            running_dagster_dev(env, root / "dagster-dev.log", 300) as ui,
            dg.DagsterInstance.from_config(str(home)) as instance,
        ):
            wait("the late-data sensor's first tick", lambda: load_cursor(instance) is not None, ui)
            for number in range(args.landings * 2):
                day = yesterday if number % 2 == 0 else two_weeks_back
                # each landing on a quiet instance: the previous one's runs all ended
                wait("the previous landing's runs", partial(no_run_under_way, instance), ui)
                before = fact_orders(lake, day)
                fact_before = latest_id(instance, FCT_DAILY_REVENUE, day)
                ltv_before = latest_id(instance, FCT_CUSTOMER_LTV, day)
                month = month_of(day)
                complete = month <= last_complete_month()
                month_before = latest_id(instance, RPT_MONTHLY_REVENUE, month)
                result = Landing(day, land(landing, day, number))
                wait(
                    f"fct_daily_revenue {day} with landing {number}",
                    partial(holds, lake, day, before + ORDERS_PER_FILE),
                    ui,
                )
                # the lake holds the rows once the publish commits; its event follows
                wait(
                    f"fct_daily_revenue {day}'s materialization",
                    partial(newer, instance, FCT_DAILY_REVENUE, day, fact_before, result.landed),
                    ui,
                )
                fact_run, fact_at = materialized_at(instance, FCT_DAILY_REVENUE, day)
                result.fact_s = fact_at - result.landed
                result.stages = stages(instance, day, result.landed, fact_run, fact_at)
                wait(
                    f"fct_customer_ltv {day}",
                    partial(newer, instance, FCT_CUSTOMER_LTV, day, ltv_before, result.landed),
                    ui,
                )
                result.ltv_s = materialized_at(instance, FCT_CUSTOMER_LTV, day)[1] - result.landed
                if complete:
                    wait(
                        f"rpt_monthly_revenue {month}",
                        partial(
                            newer, instance, RPT_MONTHLY_REVENUE, month, month_before, result.landed
                        ),
                        ui,
                    )
                    result.month_s = (
                        materialized_at(instance, RPT_MONTHLY_REVENUE, month)[1] - result.landed
                    )
                results.append(result)
                spent = " ".join(f"{k}={v:.1f}" for k, v in result.stages.items())
                month_text = "n/a" if result.month_s is None else f"{result.month_s:.1f}"
                print(
                    f"landing {number} day={day} fact_s={result.fact_s:.1f} "
                    f"ltv_s={result.ltv_s:.1f} month_s={month_text} ({spent})",
                    flush=True,
                )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for label, chosen in (("yesterday", yesterday), ("two weeks back", two_weeks_back)):
        mine = [r for r in results if r.day == chosen]
        if not mine:
            continue
        fact = quantiles([r.fact_s or 0.0 for r in mine])
        ltv = quantiles([r.ltv_s or 0.0 for r in mine])
        where = {s: quantiles([r.stages[s] for r in mine])[0] for s in STAGES}
        print(
            f"{label}: fact p50 {fact[0]:.1f} s p95 {fact[1]:.1f} s; LTV p50 {ltv[0]:.1f} s "
            f"p95 {ltv[1]:.1f} s; the fact's p50 by stage: "
            + " ".join(f"{s}={v:.1f}" for s, v in where.items()),
            flush=True,
        )
    fact_all = quantiles([r.fact_s or 0.0 for r in results])
    ltv_all = quantiles([r.ltv_s or 0.0 for r in results])
    months = [r.month_s for r in results if r.month_s is not None]
    month_p95 = f"{quantiles(months)[1]:.1f}" if months else "na"
    print(
        f"FRESHNESS landings={len(results)} fact_p50_s={fact_all[0]:.1f} "
        f"fact_p95_s={fact_all[1]:.1f} ltv_p95_s={ltv_all[1]:.1f} month_p95_s={month_p95}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # deltalake readers can abort the interpreter at exit (delta-rs#2184)
