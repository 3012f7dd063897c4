"""The concurrency harness: the live lane, a range backfill, a correction's cycle and maintenance
on one lake at once, both engines, then a checker over the whole history.

    .venv/bin/python bench/concurrency.py [--engines delta-rs,delta-spark] [--seconds 60]
                                          [--s3] [--delay 0.3] [--strace-delay-ms 200]
                                          [--expire-after 20] [--stall 0.15]
                                          [--roles live,backfill,maintenance,correction]
                                          [--seed 0] [--keep DIR]

One process per role (``backfill_assets_tests/lake/concurrency_worker.py``), the engines given
to the roles in turn; on local disk by default, with ``--s3`` in a bucket of a SeaweedFS server
the harness starts (``demo/local_s3.py``). Random pauses up to ``--delay`` seconds between the
steps of every operation, each rename of a delta-spark process delayed by strace, and now and
then a publish stalled about the age past which maintenance expires staged versions. The
checker (``backfill_assets_testkit/concurrency_harness.py``) prints every problem, the
operations refused, and last:

    CONCURRENCY engines=... store=local ops=N races=N lost_commits=0 dangling=0 reverted=0
    unaudited=0 mismatch=0

Exit code 1 when any problem was found. ``make test`` runs a few seconds of it
(``backfill_assets_tests/lake/test_concurrency_harness.py``); docs/benchmarks.md quotes its
lines.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def main() -> int:
    from backfill_assets_testkit import concurrency_harness as h

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engines", default="delta-rs,delta-spark")
    parser.add_argument("--roles", default=",".join(h.ROLES))
    parser.add_argument("--seconds", type=float, default=60.0, help="of operations, all at once")
    parser.add_argument("--s3", action="store_true", help="the lake in a SeaweedFS bucket")
    parser.add_argument("--delay", type=float, default=0.3, help="longest pause between steps")
    parser.add_argument("--strace-delay-ms", type=int, default=200)
    parser.add_argument(
        "--expire-after", type=float, default=20.0, help="maintenance expires staged versions older"
    )
    parser.add_argument(
        "--stall", type=float, default=0.15, help="chance a publish waits about that age first"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="work here (logs, lake) and leave it")
    args = parser.parse_args()
    # the code the run starts on, before anything is committed during it
    head = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    engines = args.engines.split(",")
    roles = h.assign(engines, args.roles.split(","))
    with tempfile.TemporaryDirectory(prefix="concurrency-") as tmp:
        work = args.keep or Path(tmp)
        server = None
        env: dict[str, str] = {}
        root = str(work / "lake")
        if args.s3:
            from backfill_assets.demo.local_s3 import S3Server

            server = S3Server.start(work / "seaweedfs")
            bucket = f"concurrency-{uuid.uuid4().hex[:8]}"
            server.create_bucket(bucket)
            env = server.env()
            root = f"s3://{bucket}/lake"
        try:
            setup = h.Setup(
                root,
                work / "workers",
                roles,
                seconds=args.seconds,
                delay=args.delay,
                strace_delay_ms=args.strace_delay_ms,
                expire_after=args.expire_after,
                stall=args.stall,
                seed=args.seed,
                env=env,
            )
            report = h.run(setup)
        finally:
            if server is not None:
                server.stop()
    for problem in report.problems:
        print(problem)
    for error in report.unexpected:
        print(f"unexpected error: {error}")
    refused = " ".join(f"{k}={v}" for k, v in sorted(report.refused.items()))
    print(f"CONCURRENCY_REFUSED {refused or 'none'} ambiguous={report.ambiguous}")
    print(f"CONCURRENCY_ROLES {' '.join(f'{r}:{e}' for r, e in roles)}")
    print(f"CONCURRENCY_ON head={head or '?'}{' (uncommitted changes)' if dirty else ''}")
    print(h.line(report, engines, "s3" if args.s3 else "local"), flush=True)
    return 0 if report.ok else 1


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    return done.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
