"""Backfill throughput against the Spark floor and the naive one-run-per-day way; run by hand.

    .venv/bin/python bench/backfill_bench.py --days 365 --orders-per-day 20000

On one generated feed, in one invocation, it measures:

1. floor: a bare PySpark job (fresh JVM) doing the same parse, validation, dedupe,
   FX conversion and aggregation with the project's transforms, writing Parquet:
   no Dagster, no Delta, no checks;
2. ours: ``backfill-assets backfill`` over the whole range (raw, quarantine, rates,
   staging, fact, every check), in a fresh process against a fresh instance, on each lake
   engine of ``--engines`` (both by default);
3. naive: one Dagster run per partition and layer, each in its own process as Dagster's
   default run launcher does (``dagster asset materialize --partition D``), timed on
   a sample of days and reported per partition;
4. duckdb: the same contract in DuckDB (``backfill_assets_testkit/duckdb_contract.py``), in a
   fresh process, from the same landing files over the same range to staging, fact and quarantine as
   Parquet: what a single-machine user would pick instead;
5. adversarial: on a second feed, ``--adversarial-days`` of the generated one with lines at
   the contract's edges beside it (``backfill_assets_testkit/adversarial_feed.py``), ours on each
   engine against an independent bare-Spark implementation of the contract
   (``backfill_assets_testkit/spark_contract.py``, fresh process): what correctness on hostile input
   costs us over plain Spark;

and the peak RSS of the driver (the Python process plus its local-mode JVM, which
also hosts the executors, plus Spark's Python workers) for the full range and for a
30-day range, and its peak PSS (each shared page counted once: the workers are forked from
one daemon). For each "ours" run it also prints what each kind of process held at the
peak, every Dagster run's time and event count, and Dagster's cost per stored event, on
SQLite and on PostgreSQL (``--postgres-url``, else a throwaway local server). The
last line is the RESULT line docs/benchmarks.md quotes.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import date, timedelta
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The first partition, and the first day of the range: the days between are never built, so
# ``backfill`` leaves LTV out (its first days could only be held), as the floor builds none.
FEED_START, RANGE_START = date(2023, 12, 20), date(2024, 1, 1)

FLOOR_JOB = r"""
import sys, time
from datetime import date, timedelta
from pyspark.sql import functions as F
from backfill_assets.spark.session import build_session, spark_config
from backfill_assets.landing.layout import list_landing_files
from backfill_assets.landing.spark_reader import read_order_lines, read_rate_lines
from backfill_assets.transforms.orders import latest_wins, valid_orders, validate_orders
from backfill_assets.transforms.fx import convert_to_usd, rates_on
from backfill_assets.transforms.revenue import daily_revenue

landing, out = sys.argv[1], sys.argv[2]
start, end = date.fromisoformat(sys.argv[3]), date.fromisoformat(sys.argv[4])
lateness = int(sys.argv[5])
spark = build_session(spark_config())
days = [start + timedelta(days=i) for i in range((end - start).days + 1)]
arrivals = days + [end + timedelta(days=i + 1) for i in range(lateness)]
rate_days = [start - timedelta(days=7 - i) for i in range(7)] + days
raw = read_order_lines(spark, landing, list_landing_files(landing, "orders", arrivals))
rates = read_rate_lines(spark, landing, list_landing_files(landing, "fx_rates", rate_days))
valid = valid_orders(validate_orders(raw, lateness)).filter(F.col("event_date").isin(days))
staging = convert_to_usd(latest_wins(valid), rates_on(rates, days, 7)).cache()
staging.write.mode("overwrite").partitionBy("event_date").parquet(out + "/staging")
daily_revenue(staging).write.mode("overwrite").partitionBy("event_date").parquet(out + "/fact")
spark.stop()
"""


# Dagster's cost per stored event on this instance's storage: a ranged run of one partitioned
# asset that reports one blocking check evaluation per partition, as the pipeline's steps do.
EVENT_COST_JOB = r"""
import sys, time, warnings
import dagster as dg
n = int(sys.argv[1])
days = dg.DailyPartitionsDefinition(start_date="2024-01-01")
keys = days.get_partition_keys(current_time=None)[:n]
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    check = dg.AssetCheckSpec("probe_check", asset="probe", blocking=True, partitions_def=days)
took = {}

@dg.multi_asset(specs=[dg.AssetSpec("probe", skippable=True)], check_specs=[check],
                partitions_def=days, backfill_policy=dg.BackfillPolicy.single_run())
def probe(context):
    began, cpu = time.monotonic(), time.process_time()
    for key in keys:
        yield dg.AssetCheckEvaluation(asset_key=dg.AssetKey("probe"), check_name="probe_check",
                                      passed=True, partition=key, blocking=True)
    for key in keys:
        yield dg.AssetMaterialization(asset_key="probe", partition=key)
    took["s"], took["cpu"] = time.monotonic() - began, time.process_time() - cpu
    for name in context.assets_def.check_specs_by_output_name:
        yield dg.Output(None, output_name=name)

dg.materialize([probe], instance=dg.DagsterInstance.get(), tags={
    "dagster/asset_partition_range_start": keys[0], "dagster/asset_partition_range_end": keys[-1]},
    run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}})
print(f"{took['s'] / (2 * n) * 1000:.2f} {took['cpu'] / (2 * n) * 1000:.2f}")
"""


def pss(pid: int) -> int:
    """A process's proportional set size in bytes: each page it shares counted by its share
    (``/proc/<pid>/smaps_rollup``); 0 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class PeakRss:
    """Peak RSS of a process tree (the driver, its JVM, Spark's Python workers), sampled every
    100 ms, with the share of each kind of process at the peak; and its peak PSS. Spark's Python
    workers are forked from one daemon and share most of their pages with it: the RSS of the
    tree counts those pages once per worker, its PSS once in all (``pss_365_over_30``)."""

    def __init__(self, pid: int) -> None:
        self.proc, self.peak, self._stop = psutil.Process(pid), 0, threading.Event()
        self.peak_pss = 0
        self.at_peak: dict[str, int] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _kind(self, p: psutil.Process) -> str:
        if p.pid == self.proc.pid:
            return "driver"
        return "jvm" if p.name() == "java" else "workers"

    def _run(self) -> None:
        while not self._stop.is_set():
            kinds: dict[str, int] = {}
            proportional = 0
            try:
                for p in [self.proc, *self.proc.children(recursive=True)]:
                    try:
                        kind, rss = self._kind(p), p.memory_info().rss
                        kinds[kind] = kinds.get(kind, 0) + rss
                        proportional += pss(p.pid)
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
            if sum(kinds.values()) > self.peak:
                self.peak, self.at_peak = sum(kinds.values()), kinds
            self.peak_pss = max(self.peak_pss, proportional)
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def split(self) -> str:
        return ", ".join(f"{k} {v / 2**20:.0f}" for k, v in sorted(self.at_peak.items()))


def timed(cmd: list[str], env: dict, log: Path) -> tuple[float, PeakRss, int]:
    began = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        rss = PeakRss(proc.pid)
        code = proc.wait()
    rss.stop()
    return time.monotonic() - began, rss, code


def pipeline_env(
    work: Path, name: str, landing: Path, start: date, engine: str | None = None
) -> dict:
    home = work / name / "home"
    home.mkdir(parents=True)
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    return {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "BACKFILL_LANDING_DIR": str(landing),
        "BACKFILL_LAKE_DIR": str(work / name / "lake"),
        "BACKFILL_START_DATE": start.isoformat(),
        "PYSPARK_PYTHON": sys.executable,
        **({"BACKFILL_LAKE_ENGINE": engine} if engine else {}),
    }


def ours(
    work: Path, name: str, landing: Path, feed_start: date, start: date, end: date, engine: str
):
    env = pipeline_env(work, name, landing, feed_start, engine)
    cmd = [
        sys.executable,
        "-m",
        "backfill_assets.cli",
        "backfill",
        "--start",
        str(start),
        "--end",
        str(end),
    ]
    seconds, rss, code = timed(cmd, env, work / f"{name}.log")
    if code != 0:
        print(f"warning: {name} exited {code}; see {work / (name + '.log')}")
    print(
        f"{name}: {seconds:.1f}s, peak RSS {rss.peak / 2**20:.0f} MiB ({rss.split()} MiB at the "
        f"peak), peak PSS {rss.peak_pss / 2**20:.0f} MiB"
    )
    print("\n".join(run_breakdown(env)), flush=True)
    return seconds, rss.peak, rss.peak_pss


def run_breakdown(env: dict) -> list[str]:
    """What each run of ``ours`` took, and how many events it stored in Dagster's event log."""
    import dagster as dg

    lines = []
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        for record in sorted(instance.get_run_records(), key=lambda r: r.start_time or 0):
            run = record.dagster_run
            assets = "+".join(sorted(k.to_user_string() for k in run.asset_selection or ()))
            events = len(instance.all_logs(run.run_id))
            seconds = (record.end_time or 0) - (record.start_time or 0)
            lines.append(f"  {assets}: {seconds:.1f}s, {events} Dagster events")
    return lines


# Other SQLite event logs than this instance's default (backfill_assets/event_log.py): the
# project's dagster.yaml with Dagster's own class, or Dagster's one database file instead of
# one per run plus an index.
DAGSTERS_OWN = ""
ONE_SQLITE_FILE = """
event_log_storage:
  module: dagster._core.storage.event_log
  class: ConsolidatedSqliteEventLogStorage
  config:
    base_dir: {home}/event_log
"""


def event_cost_ms(
    work: Path,
    name: str,
    events: int = 300,
    pg_url: str | None = None,
    event_log: str | None = None,
) -> tuple[float, float]:
    """Milliseconds Dagster takes to store one per-partition event in a fresh instance here,
    and the CPU time of this process among them: on this instance's storage (PostgreSQL at
    ``pg_url`` as BACKFILL_DAGSTER_PG_URL, else SQLite), or with the ``event_log`` section
    instead of the instance's."""
    from backfill_assets.cli.instance import PG_URL_ENV, prepare_instance_yaml

    home = work / f"event-cost-{name}"
    switch = {PG_URL_ENV: pg_url} if pg_url else {}
    if event_log is None:
        prepare_instance_yaml(home, ROOT / "dagster.yaml", overwrite=True, env=switch)
    else:
        home.mkdir(parents=True, exist_ok=True)
        (home / "dagster.yaml").write_text(
            (ROOT / "dagster.yaml").read_text() + event_log.format(home=home)
        )
    env = {k: v for k, v in os.environ.items() if k != PG_URL_ENV}
    out = subprocess.run(
        [sys.executable, "-c", EVENT_COST_JOB, str(events // 2)],
        cwd=ROOT,
        env={**env, **switch, "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
        check=True,
    )
    wall, cpu = out.stdout.strip().splitlines()[-1].split()
    return float(wall), float(cpu)


@contextlib.contextmanager
def postgres_url(given: str | None):
    """``given``, else a throwaway server from this machine's PostgreSQL binaries, else None."""
    if given:
        yield given
        return
    sys.path.insert(0, str(ROOT))
    from backfill_assets_testkit.postgres_server import NO_SERVER, postgres_server, server_bin_dir

    if server_bin_dir() is None:
        print(f"dagster on PostgreSQL: skipped, {NO_SERVER}", flush=True)
        yield None
        return
    with postgres_server(database="bench") as url:
        yield url


def print_event_costs(work: Path, pg: str | None) -> None:
    """The same probe run on each storage: Dagster's cost per stored event, and how much of it
    is CPU time in the run's own process (which no second thread hides on two busy cores)."""
    # (what, name, pg_url, event_log section)
    storages: list[tuple[str, str, str | None, str | None]] = [
        ("SQLite, connections kept: the default here", "sqlite", None, None),
        ("SQLite, Dagster's own class", "sqlite-dagster", None, DAGSTERS_OWN),
        ("SQLite, one database file", "one-file", None, ONE_SQLITE_FILE),
    ]
    if pg:
        storages.append(("PostgreSQL", "pg", pg, None))
    for storage, name, pg_url, event_log in storages:
        wall, cpu = event_cost_ms(work, name, pg_url=pg_url, event_log=event_log)
        print(
            f"dagster: {wall:.1f} ms to store one per-partition event ({storage}), "
            f"{cpu:.1f} ms of it CPU time in the run's process",
            flush=True,
        )


def contract_job(
    label: str, script: str, landing: Path, out: Path, start: date, end: date, log: Path
) -> float:
    """The seconds of a job of the contract written apart from the project
    (``backfill_assets_testkit/<script>``) over [start, end], in a fresh process, as the floor runs.
    A time to a failure is no figure: the benchmark stops there."""
    cmd = [
        sys.executable,
        str(ROOT / "backfill_assets_testkit" / script),
        str(landing),
        str(out),
        "--start",
        str(start),
        "--end",
        str(end),
        "--max-lateness-days",
        "7",
    ]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    seconds, rss, code = timed(cmd, env, log)
    said = log.read_text().strip().splitlines()
    print(
        f"{label}: {seconds:.1f}s (exit {code}), peak RSS {rss.peak / 2**20:.0f} MiB"
        f"{'; ' + said[-1].split(': ', 1)[-1] if said else ''}",
        flush=True,
    )
    if code != 0:
        sys.exit(f"{label} exited {code}: see {log}")
    return seconds


def adversarial(
    work: Path, days: int, orders_per_day: int, engines: list[str]
) -> tuple[float, dict[str, float]]:
    """Seconds of the bare-Spark contract job, and of ours on each engine, over ``days`` of an
    adversarial feed. As in the main comparison, ours' partitions start before the range
    (``FEED_START``), so ``backfill`` leaves LTV out: both build staging, fact and quarantine."""
    from backfill_assets_testkit.adversarial_feed import land_adversarial_feed

    landing, start = work / "adversarial" / "landing", RANGE_START
    end = start + timedelta(days=days - 1)
    made = land_adversarial_feed(landing, start, days, orders_per_day)
    print(
        f"adversarial feed: {made.feed.records} generated records, {made.lines} adversarial lines",
        flush=True,
    )
    contract_s = contract_job(
        "spark contract",
        "spark_contract.py",
        landing,
        work / "adversarial" / "spark-contract",
        start,
        end,
        work / "spark-contract.log",
    )
    ours_s = {
        engine: ours(work, f"adversarial-ours-{engine}", landing, FEED_START, start, end, engine)[0]
        for engine in engines
    }
    return contract_s, ours_s


# The layers ``backfill`` builds (the floor's too), one run per layer: a raw step that publishes
# nothing new yields no output, so in one run Dagster would skip staging after it.
NAIVE_RUNS = (("raw_orders", "raw_fx_rates"), ("stg_orders", "fct_daily_revenue"))


def naive_per_partition(
    work: Path, landing: Path, feed_start: date, sample: list[date], engine: str
) -> float:
    """A fresh process per partition and layer (Dagster's default launcher), each day's raw
    then its staging and fact, over the lake ``ours`` built on ``engine``: the day-by-day way,
    with every other day's inputs already there."""
    env = {
        **pipeline_env(work, "naive", landing, feed_start, engine),
        "BACKFILL_LAKE_DIR": str(work / f"ours-{engine}" / "lake"),
    }
    dagster = str(Path(sys.executable).with_name("dagster"))
    total = 0.0
    for day in sample:
        for n, assets in enumerate(NAIVE_RUNS):
            cmd = [
                dagster,
                "asset",
                "materialize",
                "-m",
                "backfill_assets.definitions",
                "--select",
                ",".join(assets),
                "--partition",
                day.isoformat(),
            ]
            log = work / f"naive-{day}-{n}.log"
            seconds, _, code = timed(cmd, env, log)
            print(f"  naive {day} {'+'.join(assets)}: {seconds:.1f}s (exit {code})", flush=True)
            if code != 0:  # a time to a failure is no figure
                sys.exit(f"naive {day} exited {code}: see {log}")
            total += seconds
    return total / len(sample)


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--days", type=int, default=365)
    p.add_argument("--orders-per-day", type=int, default=20000)
    p.add_argument("--naive-sample", type=int, default=3)
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument(
        "--engines",
        default="delta-rs,delta-spark",
        help='the lake engines "ours" runs on, each over the range and over 30 days',
    )
    p.add_argument(
        "--adversarial-days",
        type=int,
        default=20,
        help="days of the adversarial feed ours and the bare-Spark contract job run on (0: none)",
    )
    p.add_argument(
        "--postgres-url",
        default=None,
        help="PostgreSQL for the per-event cost on Dagster's PostgreSQL storage "
        "(default: a throwaway server from this machine's PostgreSQL binaries)",
    )
    args = p.parse_args()

    from backfill_assets.demo.generate import generate_feed

    work = Path(args.workdir or tempfile.mkdtemp(prefix="backfill-bench-"))
    landing = work / "landing"
    feed_start, start = FEED_START, RANGE_START
    end = start + timedelta(days=args.days - 1)
    t0 = time.monotonic()
    summary = generate_feed(landing, start, end, orders_per_day=args.orders_per_day, seed=1)
    print(
        f"feed: {summary.records} records, {summary.order_files} files, "
        f"generated in {time.monotonic() - t0:.0f}s under {work}",
        flush=True,
    )

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    floor_s, floor_rss, code = timed(
        [
            sys.executable,
            "-c",
            FLOOR_JOB,
            str(landing),
            str(work / "floor"),
            str(start),
            str(end),
            "7",
        ],
        env,
        work / "floor.log",
    )
    print(
        f"floor: {floor_s:.1f}s (exit {code}), peak RSS {floor_rss.peak / 2**20:.0f} MiB",
        flush=True,
    )

    days30 = min(30, args.days)
    end30 = start + timedelta(days=days30 - 1)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    # engine: (seconds, peak RSS 365 d / 30 d, peak PSS 365 d / 30 d)
    ours_by: dict[str, tuple[float, float, float]] = {}
    for engine in engines:
        name = f"ours-{engine}"
        seconds, rss, pss365 = ours(work, name, landing, feed_start, start, end, engine)
        _, rss30, pss30 = ours(work, f"{name}-30", landing, feed_start, start, end30, engine)
        ours_by[engine] = (seconds, rss / rss30, pss365 / pss30)
    duckdb_s = contract_job(
        "duckdb", "duckdb_contract.py", landing, work / "duckdb", start, end, work / "duckdb.log"
    )
    with postgres_url(args.postgres_url) as pg:
        print_event_costs(work, pg)

    step = max(1, args.days // (args.naive_sample + 1))
    sample = [start + timedelta(days=step * (i + 1)) for i in range(args.naive_sample)]
    naive_s = naive_per_partition(work, landing, feed_start, sample, engines[0])
    print(
        f"naive: {naive_s:.1f}s per partition (sample of {len(sample)}, on {engines[0]})",
        flush=True,
    )

    contract_s, adv_ours = 0.0, dict[str, float]()
    if args.adversarial_days:
        contract_s, adv_ours = adversarial(
            work, args.adversarial_days, args.orders_per_day, engines
        )

    def figures(engine: str, s: float, rss_ratio: float, pss_ratio: float) -> str:
        text = (
            f"{engine}:ours_s={s:.1f},ours_over_floor={s / floor_s:.2f},"
            f"ours_over_duckdb={s / duckdb_s:.2f},naive_over_ours={naive_s * args.days / s:.1f},"
            f"rss_365_over_30={rss_ratio:.2f},pss_365_over_30={pss_ratio:.2f}"
        )
        if engine in adv_ours:
            text += (
                f",adversarial_ours_s={adv_ours[engine]:.1f},"
                f"adversarial_ours_over_contract={adv_ours[engine] / contract_s:.2f}"
            )
        return text

    per_engine = " ".join(figures(engine, *measured) for engine, measured in ours_by.items())
    adversarial_s = f" adversarial_contract_s={contract_s:.1f}" if adv_ours else ""
    print(
        f"RESULT days={args.days} orders={args.orders_per_day} floor_s={floor_s:.1f} "
        f"duckdb_s={duckdb_s:.1f} naive_per_partition_s={naive_s:.1f}{adversarial_s} "
        f"{per_engine}"
    )


if __name__ == "__main__":
    main()
