"""The whole I/O-fault sweep: every lake path failed at every one of its I/O operations.

    .venv/bin/python bench/iofault.py [--engines delta-rs delta-spark delta-rs-s3 ...]
                                      [--paths publish_all ...] [--modes error kill]
                                      [--corrections cutover ...]
                                      [--steps raw event_days ltv correct]

For each engine, path and point N (1 to the path's last operation), on a fresh copy of the
path's starting lake: an ``OSError`` at operation N in this process (``error``), and a SIGKILL
of a child running the path at operation N (``kill``; the child starts a Spark session of its
own where the path or the engine needs one), then the recovery and the checks of
``backfill_assets_testkit/iofault_harness.py``; on ``delta-rs-s3`` and ``delta-spark-s3`` the lake
paths the same way on that engine, on lakes in S3 (a SeaweedFS server the sweep starts). The
same for a correction's commands (``backfill_assets_testkit/correction_sweep.py``) and, with
``--steps``, whole pipeline steps run through Dagster (``iofault_steps.py`` beside it).
Prints one line per path, every problem found, and last:

    IOFAULT paths=P points=N crashes=C errors=E unreadable=0 torn=0 lost_files=0 orphans=0
    record_mismatch=0 unconverged=0
    IOFAULT_ON ran_on=<the commits the figures ran on> head=<the checkout's commit>

Exit code 1 when any problem was found. ``make test`` runs a sample of the points
(``backfill_assets_tests/lake/test_iofault.py``).

The whole sweep of both engines takes hours on a small machine, so it can be run in parts:
with ``--ledger FILE`` each finished path (an engine, a path, its modes) is appended to FILE
as one JSON line (its counts, every problem, the commit, the time, and a hash of the code it
exercised: ``backfill_assets_testkit/iofault_ledger.py``), a path whose line is there with the
code of the checkout now is not run again, one whose code changed since runs again, and the
last lines sum every selected path and name the commits their figures ran on. A sweep stopped
half way loses only the path it was in. ``bench/iofault-ledger.jsonl`` is the
project's record; docs/benchmarks.md quotes its line.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from backfill_assets_testkit.iofault_ledger import Ledger

# an engine on lakes in S3 (a SeaweedFS server of the sweep's own): the lake paths only
ON_S3 = {"delta-rs-s3": "delta-rs", "delta-spark-s3": "delta-spark"}


def main() -> int:
    from backfill_assets.lake import Lake
    from backfill_assets.resources import code_version
    from backfill_assets.spark.session import build_session, spark_config
    from backfill_assets_testkit import iofault_harness as h

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--engines",
        nargs="+",
        default=["delta-rs", "delta-spark", *ON_S3],
        help=f"{', '.join(ON_S3)}: the lake paths on that engine, on lakes in S3 (no corrections "
        "nor steps)",
    )
    parser.add_argument("--paths", nargs="*", default=[p.name for p in h.PATHS])
    parser.add_argument("--modes", nargs="+", default=["error", "kill"])
    parser.add_argument(
        "--steps",
        nargs="*",
        default=[],
        help="also sweep whole pipeline steps (raw event_days ltv), I/O errors at every point",
    )
    parser.add_argument(
        "--ledger",
        type=Path,
        help="record each finished path here, skip the paths already there, sum them all",
    )
    parser.add_argument(
        "--corrections",
        nargs="*",
        default=["cutover", "rollback", "discard", "discard-diffed", "decommission"],
        help="the correction commands swept (errors; on delta-rs kills of a child too)",
    )
    args = parser.parse_args()
    # The code version the sweep started with, for its children too: a commit to the checkout
    # during a long sweep must not look like a correction built by two code versions.
    os.environ.setdefault("BACKFILL_CODE_VERSION", code_version())
    if len(args.engines) > 1:
        return per_engine(args)
    tally = h.Tally()
    ledger = Ledger(args.ledger, args.modes)
    for engine in args.engines:
        local = engine not in ON_S3
        lake_engine = ON_S3.get(engine, engine)
        os.environ["BACKFILL_LAKE_ENGINE"] = lake_engine  # the pipeline's steps, and children
        wanted = args.steps if local else []
        steps = [name for name in wanted if not ledger.take(tally, engine, f"step:{name}")]
        if steps:
            sweep_steps(steps, args.modes, tally, engine, ledger)
        paths = [name for name in args.paths if not ledger.take(tally, engine, name)]
        commands = [
            name
            for name in (args.corrections if local else [])
            if not ledger.take(tally, engine, f"correction:{name}")
        ]
        if not (paths or commands):
            continue
        with (
            tempfile.TemporaryDirectory(prefix="iofault-") as tmp,
            lakes_in(engine, tmp) as work,
        ):
            # after the S3 server started: a delta-spark session takes its s3a settings then
            session = build_session(
                spark_config(
                    master="local[2]",
                    shuffle_partitions=2,
                    driver_memory="2g",
                    lake_engine=lake_engine,
                )
            )
            session.sparkContext.setLogLevel("ERROR")

            def make(root: str, engine: str = lake_engine, session=session) -> Lake:
                return Lake(root, session, engine=engine)

            for name in paths:
                path = h.BY_NAME[name]
                with ledger.path(tally, engine, name) as done:
                    template = h.build_template(make, work, path)
                    count = h.operations(make, template, work, path)
                    for mode in args.modes:
                        for n in range(1, count + 1):
                            h.run_point(make, template, work, path, mode, n, tally, lake_engine)
                    done(count)
            if commands:
                sweep_corrections(commands, args.modes, tally, engine, make, ledger)
            session.stop()
    for detail in tally.details:
        print(detail)
    print(f"IOFAULT_PATHS {','.join(sorted(tally.paths))}")
    print(tally.line())
    print(ledger.provenance(), flush=True)
    return 1 if tally.details else 0


@contextmanager
def lakes_in(engine: str, tmp: str) -> Iterator[str | Path]:
    """Where the sweep's lakes live: the folder ``tmp``; for an engine of ``ON_S3``, a prefix of
    a bucket on a SeaweedFS server (``demo/local_s3.py``) started in ``tmp`` for the sweep, whose
    AWS variables this process and its killed children use (and ``BACKFILL_LAKE_DIR``, by which
    their delta-spark sessions take Hadoop's s3a settings)."""
    if engine not in ON_S3:
        yield Path(tmp)
        return
    from backfill_assets.demo.local_s3 import S3Server

    server = S3Server.start(Path(tmp) / "seaweedfs")
    try:
        os.environ.update(server.env())
        server.create_bucket("iofault")
        os.environ["BACKFILL_LAKE_DIR"] = "s3://iofault/lakes"
        yield os.environ["BACKFILL_LAKE_DIR"]
    finally:
        server.stop()


def per_engine(args: argparse.Namespace) -> int:
    """One child process per engine (a Spark JVM takes Delta's jars only when it starts); their
    figures summed into one IOFAULT line."""
    import re

    totals: dict[str, int] = {}
    paths: set[str] = set()
    ran_on: set[str] = set()
    head = ""
    code = 0
    for engine in args.engines:
        command = [sys.executable, __file__, "--engines", engine, "--paths", *args.paths]
        command += ["--modes", *args.modes, "--corrections", *args.corrections]
        command += ["--steps", *args.steps]
        if args.ledger is not None:
            command += ["--ledger", str(args.ledger)]
        child = subprocess.run(command, capture_output=True, text=True, check=False)
        code = max(code, child.returncode)
        for line in child.stdout.splitlines():
            if line.startswith("IOFAULT_PATHS "):
                paths |= set(filter(None, line.split(" ", 1)[1].split(",")))
            elif line.startswith("IOFAULT "):
                for key, value in re.findall(r"(\w+)=(\d+)", line):
                    totals[key] = totals.get(key, 0) + int(value)
            elif line.startswith("IOFAULT_ON "):
                fields = dict(re.findall(r"(\w+)=(\S*)", line))
                ran_on |= set(filter(None, fields["ran_on"].split(",")))
                head = fields["head"]
            else:
                print(line, flush=True)
        if "IOFAULT " not in child.stdout:
            print(child.stderr[-3000:], flush=True)
            code = 1
    totals["paths"] = len(paths)
    keys = "paths points crashes errors unreadable torn lost_files orphans record_mismatch"
    print("IOFAULT " + " ".join(f"{k}={totals.get(k, 0)}" for k in [*keys.split(), "unconverged"]))
    print(f"IOFAULT_ON ran_on={','.join(sorted(ran_on))} head={head}")
    return code


def sweep_corrections(
    commands: list[str], modes: list[str], tally, engine: str, make, ledger: Ledger
) -> None:
    """Every I/O operation of a correction's commands (``correction_sweep.COMMANDS``: cutover,
    rollback, discard, decommission) failed in turn, on the small two-table lake of
    ``backfill_assets_testkit/small_lake.py``: run again (after ``recover_all`` for a kill), the
    record must agree with the lake and nothing be lost."""
    import shutil

    from backfill_assets.corrections import lifecycle
    from backfill_assets_testkit import correction_sweep, small_lake

    def copy(source: Path, to: Path):
        shutil.copytree(source, to)
        return make(to)

    with tempfile.TemporaryDirectory(prefix="iofault-corrections-") as tmp:
        work = Path(tmp)
        sources = {"diffed": work / "template", "cut-over": work / "cut"}
        small_lake.build(sources["diffed"], make(sources["diffed"]).spark)
        lifecycle.cutover(copy(sources["diffed"], sources["cut-over"]), small_lake.CID)
        for command in (correction_sweep.BY_NAME[name] for name in commands):
            with ledger.path(tally, engine, f"correction:{command.name}") as done:
                source = sources[command.source]
                lake = copy(source, work / f"{command.name}-count")
                count = len(correction_sweep.operations(lake, command.run))
                for mode in modes:
                    for n in range(1, count + 1):
                        where = f"{engine}/correction/{command.name}/{mode}:{n}"
                        lake = copy(source, work / f"{command.name}-{mode}-{n}")
                        tally.paths.add(f"correction:{command.name}")
                        tally.points += 1
                        tally.faults[mode] += 1
                        try:
                            if mode == "error":
                                correction_sweep.fail_in_process(lake, command.run, n)
                            else:
                                correction_sweep.kill_in_child(lake, command.name, n)
                                lifecycle.recover_all(lake)
                            command.finish(lake)
                            assert correction_sweep.record(lake.root)["state"] == command.target
                            command.check(lake)
                        except Exception as exc:
                            tally.flag("record_mismatch", where, f"{type(exc).__name__}: {exc}")
                done(count)


def sweep_steps(names: list[str], modes: list[str], tally, engine: str, ledger: Ledger) -> None:
    """Every I/O operation of each named pipeline step failed in turn, by an error in this
    process and by a kill of a child running the step
    (``backfill_assets_testkit/iofault_steps.py``)."""
    from backfill_assets_testkit import iofault_steps as s
    from backfill_assets_testkit.pipeline_env import pipeline_env

    with tempfile.TemporaryDirectory(prefix="iofault-steps-") as tmp:
        root = Path(tmp)
        with pipeline_env(root, start_date=s.FIRST.isoformat()) as env:
            before = s.prepare(env)
            for step in (st for st in s.STEPS if st.name in names):
                with ledger.path(tally, engine, f"step:{step.name}") as done:
                    template = s.step_template(env, before, step)
                    count = len(s.operations(env, template, step, root / "ops.log"))
                    for mode, n in ((m, n) for m in modes for n in range(1, count + 1)):
                        problems = s.run_point(env, template, step, n, mode)
                        tally.paths.add(f"step:{step.name}")
                        tally.points += 1
                        tally.faults[mode] += 1
                        for problem in problems:
                            kind, _, rest = problem.partition(" at ")
                            tally.flag(
                                kind, f"{engine}/{rest.split(': ', 1)[0]}", rest.split(": ", 1)[1]
                            )
                    done(count)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # deltalake readers can abort the interpreter at exit (delta-rs#2184)
