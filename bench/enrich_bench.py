"""The rate-limited enrichment: a year of stg_orders_enriched against the segment service; run by
hand.

    .venv/bin/python bench/enrich_bench.py --days 365 --orders-per-day 50

On one generated feed (many distinct customers, so requests matter) it builds raw, staging and
fact (setup, not measured), starts the segment service on 127.0.0.1 (``--rps``, 20 by default:
the default setting), then backfills ``stg_orders_enriched`` over every day twice, each as one
ranged run in its own process (``dagster asset materialize --partition-range``, the backfill
lane). During the first run a simulated live-lane caller, in a process of its own, asks for one
customer every 0.2 s through the same shared client and records how long it waited for a token.

Figures: ``requests`` and ``cached_hits`` are the first run's (requests sent by the enrichment,
retries included; customers answered from the cache); the line before the last gives the second
run's (the goal: 0 requests). ``throttled_429`` and ``max_rps`` are the service's own counts over
the whole benchmark, both runs and the live caller included (``max_rps``: the most requests it
accepted within one wall-clock second). The last line is the ENRICH line docs/benchmarks.md quotes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.backfill_bench import pipeline_env, timed

SETUP = """
import sys
from datetime import date
import dagster as dg
from backfill_assets.cli.instance import ensure_dagster_home
from backfill_assets.backfill_plan import plan_backfill
from backfill_assets.cli.runner import execute
from backfill_assets.settings import Settings
ensure_dagster_home()
settings = Settings.from_env()
with dg.DagsterInstance.get() as instance:
    first, last = date.fromisoformat(sys.argv[1]), date.fromisoformat(sys.argv[2])
    for plan in plan_backfill(settings, first, last):
        outcome = execute(plan, instance)
        print(plan.assets, plan.start, plan.end, outcome.success, flush=True)
"""

LIVE = """
import json, pathlib, sys, time
from backfill_assets.enrichment.client import SegmentClient, SharedBucket
from backfill_assets.settings import Settings
s = Settings.from_env().segments
bucket = SharedBucket(s.bucket_path, s.rps, s.live_share)
client = SegmentClient(s.url, bucket, "live", batch_size=1)
stop, k = pathlib.Path(sys.argv[1]), 0
while not stop.exists():
    client.histories([f"LIVE-{k}"])
    k += 1
    time.sleep(0.2)
stats = client.stats
print(json.dumps({"waits": stats.token_waits_s, "throttled_429": stats.throttled_429}))
"""


def service_stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as r:
        return json.loads(r.read())


def lookups_of_last_run(env: dict) -> dict:
    """The segment lookups the latest enrichment run recorded on its materializations."""
    code = (
        "import json, dagster as dg\nfrom backfill_assets.catalog import STG_ORDERS_ENRICHED\n"
        "with dg.DagsterInstance.get() as i:\n"
        "    r = i.fetch_materializations(STG_ORDERS_ENRICHED, limit=1).records[0]\n"
        "    print(json.dumps(r.asset_materialization.metadata['segment_lookups'].value))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else 0.0


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--days", type=int, default=365)
    p.add_argument("--orders-per-day", type=int, default=50)
    p.add_argument(
        "--rps", type=int, default=20, help="the service's limit (and the client's setting)"
    )
    p.add_argument("--workdir", type=Path, default=None)
    args = p.parse_args()

    from backfill_assets.demo.generate import generate_feed

    work = Path(args.workdir or tempfile.mkdtemp(prefix="enrich-bench-"))
    start = date(2024, 1, 1)
    end = start + timedelta(days=args.days - 1)
    summary = generate_feed(
        work / "landing", start, end, orders_per_day=args.orders_per_day, seed=1
    )
    print(f"feed: {summary.records} records under {work}", flush=True)
    env = pipeline_env(work, "enrich", work / "landing", start)
    began = time.monotonic()
    setup = subprocess.run(
        [sys.executable, "-c", SETUP, str(start), str(end)],
        check=False,
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    print(
        f"setup: raw, staging and fact built in {time.monotonic() - began:.0f}s (exit "
        f"{setup.returncode})",
        flush=True,
    )
    if setup.returncode != 0 or "False" in setup.stdout:
        raise SystemExit(f"setup failed:\n{setup.stdout}\n{setup.stderr[-3000:]}")

    service = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "backfill_assets.enrichment.service",
            "--port",
            "0",
            "--rps",
            str(args.rps),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert service.stdout is not None  # stdout=PIPE
    try:
        url = service.stdout.readline().split()[3]
        env = {**env, "BACKFILL_SEGMENTS_URL": url, "BACKFILL_SEGMENTS_RPS": str(args.rps)}
        dagster = str(Path(sys.executable).with_name("dagster"))
        cmd = [
            dagster,
            "asset",
            "materialize",
            "-m",
            "backfill_assets.definitions",
            "--select",
            "stg_orders_enriched",
            "--partition-range",
            f"{start}...{end}",
        ]
        runs = []
        for n in (1, 2):
            stop = work / f"stop-live-{n}"
            before = service_stats(url)["requests"]
            live = (
                subprocess.Popen(
                    [sys.executable, "-c", LIVE, str(stop)],
                    env=env,
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                if n == 1
                else None
            )
            seconds, _, code = timed(cmd, env, work / f"run-{n}.log")
            if live is not None:
                stop.touch()
                live_out = json.loads(live.communicate(timeout=60)[0])
            if code != 0:
                raise SystemExit(f"run {n} exited {code}: see {work / f'run-{n}.log'}")
            served = (
                service_stats(url)["requests"] - before - (len(live_out["waits"]) if live else 0)
            )
            lookups = lookups_of_last_run(env)
            runs.append(lookups)
            print(
                f"run {n}: {seconds:.1f}s; requests={lookups['requests']} (service counted "
                f"{served} "
                f"besides the live caller) cached_hits={lookups['cached_hits']} "
                f"fetched={lookups['fetched']} customers={lookups['customers']}",
                flush=True,
            )
        stats = service_stats(url)
    finally:
        service.terminate()
        service.wait(timeout=10)
    waits = live_out["waits"]
    print(
        f"live lane: {len(waits)} requests during run 1, token wait p95 {p95(waits):.3f}s, "
        f"max {max(waits, default=0):.3f}s, 429s {live_out['throttled_429']}"
    )
    print(
        f"second_run_requests={runs[1]['requests']} second_run_cached_hits={runs[1]['cached_hits']}"
    )
    print(
        f"ENRICH days={args.days} requests={runs[0]['requests']} "
        f"cached_hits={runs[0]['cached_hits']} "
        f"throttled_429={stats['throttled_429']} max_rps={stats['max_rps']} "
        f"limit_rps={stats['limit_rps']} "
        f"live_wait_p95_s={p95(waits):.3f}"
    )


if __name__ == "__main__":
    main()
