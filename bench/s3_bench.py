"""A backfill with the landing zone and the lake on local disk against the same on S3; run by hand.

    .venv/bin/python bench/s3_bench.py --days 60 --orders-per-day 2000

One generated feed, landed twice: in a local folder, and in a bucket of a SeaweedFS server
started here (``backfill_assets/demo/local_s3.py``, on this machine, so the figures show what the
S3 protocol and the object reads cost, not a network's latency). Then ``backfill-assets
backfill`` of the range in a fresh process, once per storage, each timed from the command's
start to its exit, each run of it too (where S3 adds its time), and the row counts of every
table read back from both lakes and compared (they must be equal). On S3 it also prints, per
run, the requests the server answered by kind (GET, PUT, LIST, HEAD, DELETE, ...) and the
seconds it spent answering them, from the server's Prometheus metrics (its GETs count its
HEADs too), and per run the CPU seconds of the command's driver, its JVM and Spark's Python
workers, and of the server (which shares the machine's cores with them). With ``--per-object``
the server logs every request, and the bench prints for each table and landing folder of the S3
backfill its objects, the HEADs and GETs they were read with, and the HEADs per object: about
how often the runs opened each file. The last line is the RESULT line docs/benchmarks.md quotes.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backfill_assets.demo.local_s3 import Requests, requests_between

if TYPE_CHECKING:
    from backfill_assets.demo.local_s3 import S3Server

TABLES = ("raw/orders", "quarantine/orders", "raw/fx_rates", "staging/orders", "fact/daily_revenue")


RUN_START = re.compile(r"^\[\d+/\d+\] (\S+) \S+ \.\.\.$")
RUN_END = re.compile(r"^\[\d+/\d+\] (\S+): run ")
# A request for one object in the server's log (``S3Server.start(log_requests=True)``)
OBJECT_REQUEST = re.compile(r" (Get|Head)ObjectHandler (\S+) (\S+)$")


def per_object(log: Path, offset: int) -> list[str]:
    """From the server's log past ``offset``: per table (its key up to the partition folder),
    the objects read, the HEADs and GETs, and the HEADs per object: one for each open of the
    file by a reader, and one by the executor that wrote it (its size and time, once closed)."""
    seen: dict[str, dict] = {}
    with open(log, errors="replace") as lines:
        lines.seek(offset)
        for line in lines:
            if (m := OBJECT_REQUEST.search(line.rstrip())) is None:
                continue
            parts = m.group(3).split("/")
            cut = next((i for i, p in enumerate(parts) if "=" in p or p.startswith("_")), -1)
            where = "/".join(parts[:cut]) + ("/" + parts[cut] if parts[cut].startswith("_") else "")
            entry = seen.setdefault(where, {"objects": set(), "Head": 0, "Get": 0})
            entry["objects"].add(m.group(3))
            entry[m.group(1)] += 1
    return [
        f"  {where:40} {len(e['objects']):5} objects  HEAD {e['Head']:5}  GET {e['Get']:5}  "
        f"{e['Head'] / len(e['objects']):4.1f} HEADs each"
        for where, e in sorted(seen.items(), key=lambda kv: -(kv[1]["Head"] + kv[1]["Get"]))
    ]


CPU_PARTS = ("driver", "JVM", "workers")


def cpu_seconds(pid: int) -> dict[str, float]:
    """User and system CPU seconds of ``pid`` (the ``driver``) and every live process under
    it: the ``JVM`` and Spark's Python ``workers``."""
    spent = dict.fromkeys(CPU_PARTS, 0.0)
    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return spent
    for process in tree:
        try:
            times = process.cpu_times()
            part = (
                "driver" if process.pid == pid else "JVM" if process.name() == "java" else "workers"
            )
        except psutil.Error:
            continue
        spent[part] += times.user + times.system
    return spent


def backfill(
    env: dict[str, str], start: date, end: date, server: S3Server | None = None
) -> tuple[float, dict[str, float], dict[str, Requests], dict[str, dict[str, float]]]:
    """The command's time; per run (by its assets' name) the time from its announcement to its
    outcome's line, ``start-up`` being what came before the first run (the process, the
    imports, the instance, the plan); per run the S3 requests ``server`` answered; and per run
    the CPU seconds the command's processes (Python and its JVM) and the server spent."""
    began = time.monotonic()
    command = [sys.executable, "-m", "backfill_assets.cli", "backfill"]
    spent: dict[str, float] = {}
    opened: dict[str, float] = {}
    requests: dict[str, Requests] = {}
    cpu: dict[str, dict[str, float]] = {}
    seen = {} if server is None else server.requests()

    def server_cpu() -> float:
        return 0.0 if server is None else sum(cpu_seconds(server.process.pid).values())

    cpu_seen = {"server": server_cpu()}

    def cpu_since(pid: int) -> dict[str, float]:
        """The CPU seconds of the command's parts and of the server since the last call (the
        server's since the command started, at the first)."""
        now = {**cpu_seconds(pid), "server": server_cpu()}
        between = {part: now[part] - cpu_seen.get(part, 0.0) for part in now}
        cpu_seen.update(now)
        return between

    def since(before: Requests) -> Requests:
        """The requests since ``before``, which becomes now."""
        current = {} if server is None else server.requests()
        between = requests_between(before, current)
        before.clear()
        before.update(current)
        return between

    with subprocess.Popen(
        [*command, "--start", str(start), "--end", str(end)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            now = time.monotonic() - began
            if (started := RUN_START.match(line.strip())) is not None:
                spent.setdefault("start-up", now)
                opened[started.group(1)] = now
                if "start-up" not in requests:
                    requests["start-up"] = since(seen)
                    cpu["start-up"] = cpu_since(process.pid)
            elif (ended := RUN_END.match(line.strip())) is not None:
                name = ended.group(1)
                spent[name] = spent.get(name, 0.0) + now - opened.pop(name, now)
                requests[name] = since(seen)
                cpu[name] = cpu_since(process.pid)
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode, command)
    return time.monotonic() - began, spent, requests, cpu


def rows(location: str, options: dict[str, str] | None) -> int:
    from deltalake import DeltaTable

    return DeltaTable(location, storage_options=options).to_pyarrow_dataset().count_rows()


def main() -> int:
    from backfill_assets.demo.generate import generate_feed
    from backfill_assets.demo.local_s3 import S3Server
    from backfill_assets_testkit.s3_landing import upload

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=60)
    parser.add_argument("--orders-per-day", type=int, default=2000)
    parser.add_argument(
        "--per-object", action="store_true", help="the S3 reads per table and object"
    )
    args = parser.parse_args()
    start = date(2024, 1, 2)
    end = start + timedelta(days=args.days - 1)
    with tempfile.TemporaryDirectory(prefix="s3-bench-") as tmp:
        work = Path(tmp)
        landing = work / "landing"
        generate_feed(landing, start - timedelta(days=1), end, args.orders_per_day, seed=11)
        server = S3Server.start(work / "s3", log_requests=args.per_object)
        try:
            server.create_bucket("bench")
            began = time.monotonic()
            s3_landing = upload(landing, server, "bench", "landing")
            upload_s = time.monotonic() - began
            base = {
                **os.environ,
                "BACKFILL_START_DATE": str(start - timedelta(days=1)),
                "BACKFILL_CODE_VERSION": os.environ.get("BACKFILL_CODE_VERSION", "bench"),
            }
            local_env = {
                **base,
                "BACKFILL_LANDING_DIR": str(landing),
                "BACKFILL_LAKE_DIR": str(work / "lake"),
                "DAGSTER_HOME": str(work / "home-local"),
            }
            s3_env = {
                **base,
                **server.env(),
                "BACKFILL_LANDING_DIR": s3_landing,
                "BACKFILL_LAKE_DIR": "s3://bench/lake",
                "DAGSTER_HOME": str(work / "home-s3"),
            }
            for env in (local_env, s3_env):
                Path(env["DAGSTER_HOME"]).mkdir()
            local_s, local_steps, _, local_cpu = backfill(local_env, start, end)
            print(f"local disk: {local_s:.1f} s", flush=True)
            logged = server.log.stat().st_size
            s3_s, s3_steps, s3_requests, s3_cpu = backfill(s3_env, start, end, server)
            print(f"S3:         {s3_s:.1f} s (the feed's upload before it: {upload_s:.1f} s)")
            for step, local_step in local_steps.items():
                on_s3 = s3_steps.get(step, 0.0)
                print(
                    f"  {step:32} local {local_step:6.1f} s  S3 {on_s3:6.1f} s  "
                    f"+{on_s3 - local_step:5.1f} s",
                    flush=True,
                )
                cpu_local, cpu_s3 = local_cpu.get(step, {}), s3_cpu.get(step, {})
                print(
                    "    CPU s: "
                    + ", ".join(
                        f"{part} local {cpu_local.get(part, 0):.1f} S3 {cpu_s3.get(part, 0):.1f}"
                        for part in CPU_PARTS
                    )
                    + f"; the S3 server {cpu_s3.get('server', 0.0):.1f}",
                    flush=True,
                )
                answered = s3_requests.get(step, {})
                server_s = sum(seconds for _, seconds in answered.values())
                if answered:
                    print(
                        "    S3 requests: "
                        + ", ".join(
                            f"{kind} {n:.0f} ({seconds:.2f} s)"
                            for kind, (n, seconds) in sorted(answered.items())
                        )
                        + f"; the server answered them in {server_s:.2f} s",
                        flush=True,
                    )
            if args.per_object:
                print("the S3 backfill's reads, per table and landing folder:")
                print("\n".join(per_object(server.log, logged)), flush=True)
            options = {**server.env(), "AWS_ALLOW_HTTP": "true"}
            counts = {
                t: (rows(str(work / "lake" / t), None), rows(f"s3://bench/lake/{t}", options))
                for t in TABLES
            }
        finally:
            server.stop()
    for table, (on_disk, on_s3) in counts.items():
        print(f"{table:20} rows on disk {on_disk:>10,}  on S3 {on_s3:>10,}")
    equal = all(a == b for a, b in counts.values())
    print(
        f"RESULT s3_bench days={args.days} orders_per_day={args.orders_per_day} "
        f"local_s={local_s:.1f} s3_s={s3_s:.1f} ratio={s3_s / local_s:.2f} "
        f"tables_equal={str(equal).lower()}",
        flush=True,
    )
    return 0 if equal else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # delta-rs readers can abort the interpreter at exit: keep our exit code
