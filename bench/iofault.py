"""The whole I/O-fault sweep: every lake path failed at every one of its I/O operations.

    .venv/bin/python bench/iofault.py [--engines delta-rs delta-spark] [--paths publish_all ...]
                                      [--modes error kill] [--corrections cutover ...]
                                      [--steps raw event_days ltv correct]

For each engine, path and point N (1 to the path's last operation), on a fresh copy of the
path's starting lake: an ``OSError`` at operation N in this process (``error``), and a SIGKILL
of a child running the path at operation N (``kill``; the child starts a Spark session of its
own where the path or the engine needs one, some 10-30 s a point), then the recovery and the
checks of ``backfill_assets_tests/iofault_harness.py``. The same for a correction's commands
(``backfill_assets_tests/corrections/sweep.py``) and, with ``--steps``, whole pipeline steps
run through Dagster (``backfill_assets_tests/iofault_steps.py``). Prints one line per path,
every problem found, and last:

    IOFAULT paths=P points=N crashes=C errors=E unreadable=0 torn=0 lost_files=0 orphans=0
    record_mismatch=0 unconverged=0

Exit code 1 when any problem was found. ``make test`` runs a sample of the points
(``backfill_assets_tests/lake/test_iofault.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def main() -> int:
    from backfill_assets.lake import Lake
    from backfill_assets.resources import code_version
    from backfill_assets.spark_session import build_session, spark_config
    from backfill_assets_tests import iofault_harness as h

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engines", nargs="+", default=["delta-rs", "delta-spark"])
    parser.add_argument("--paths", nargs="*", default=[p.name for p in h.PATHS])
    parser.add_argument("--modes", nargs="+", default=["error", "kill"])
    parser.add_argument(
        "--steps",
        nargs="*",
        default=[],
        help="also sweep whole pipeline steps (raw event_days ltv), I/O errors at every point",
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
    for engine in args.engines:
        os.environ["BACKFILL_LAKE_ENGINE"] = engine  # the pipeline's steps, and their children
        if args.steps:
            sweep_steps(args.steps, args.modes, tally, engine)
        session = build_session(
            spark_config(
                master="local[2]", shuffle_partitions=2, driver_memory="2g", lake_engine=engine
            )
        )
        session.sparkContext.setLogLevel("ERROR")

        def make(root: str, engine: str = engine, session=session) -> Lake:
            return Lake(root, session, engine=engine)

        with tempfile.TemporaryDirectory(prefix="iofault-") as tmp:
            work = Path(tmp)
            for name in args.paths:
                path = h.BY_NAME[name]
                started = time.monotonic()
                template = h.build_template(make, work, path)
                count = h.operations(make, template, work, path)
                before = sum(tally.problems.values())
                for mode in args.modes:
                    for n in range(1, count + 1):
                        h.run_point(make, template, work, path, mode, n, tally, engine)
                found = sum(tally.problems.values()) - before
                print(
                    f"{engine:12} {name:24} operations={count:3} problems={found} "
                    f"({time.monotonic() - started:.1f} s)",
                    flush=True,
                )
        if args.corrections:
            sweep_corrections(args.corrections, args.modes, tally, engine, make)
        session.stop()
    for detail in tally.details:
        print(detail)
    print(f"IOFAULT_PATHS {','.join(sorted(tally.paths))}")
    print(tally.line(), flush=True)
    return 1 if tally.details else 0


def per_engine(args: argparse.Namespace) -> int:
    """One child process per engine (a Spark JVM takes Delta's jars only when it starts); their
    figures summed into one IOFAULT line."""
    import re
    import subprocess

    totals: dict[str, int] = {}
    paths: set[str] = set()
    code = 0
    for engine in args.engines:
        command = [sys.executable, __file__, "--engines", engine, "--paths", *args.paths]
        command += ["--modes", *args.modes, "--corrections", *args.corrections]
        command += ["--steps", *args.steps]
        child = subprocess.run(command, capture_output=True, text=True, check=False)
        code = max(code, child.returncode)
        for line in child.stdout.splitlines():
            if line.startswith("IOFAULT_PATHS "):
                paths |= set(filter(None, line.split(" ", 1)[1].split(",")))
            elif line.startswith("IOFAULT "):
                for key, value in re.findall(r"(\w+)=(\d+)", line):
                    totals[key] = totals.get(key, 0) + int(value)
            else:
                print(line, flush=True)
        if "IOFAULT " not in child.stdout:
            print(child.stderr[-3000:], flush=True)
            code = 1
    totals["paths"] = len(paths)
    keys = "paths points crashes errors unreadable torn lost_files orphans record_mismatch"
    print("IOFAULT " + " ".join(f"{k}={totals.get(k, 0)}" for k in [*keys.split(), "unconverged"]))
    return code


def sweep_corrections(commands: list[str], modes: list[str], tally, engine: str, make) -> None:
    """Every I/O operation of a correction's commands (``sweep.COMMANDS``: cutover, rollback,
    discard, decommission) failed in turn, on the small two-table lake of
    ``backfill_assets_tests/corrections``: run again (after ``recover_all`` for a kill), the
    record must agree with the lake and nothing be lost."""
    import shutil

    from backfill_assets.corrections import lifecycle
    from backfill_assets_tests.corrections import small_lake, sweep

    def copy(source: Path, to: Path):
        shutil.copytree(source, to)
        return make(to)

    with tempfile.TemporaryDirectory(prefix="iofault-corrections-") as tmp:
        work = Path(tmp)
        sources = {"diffed": work / "template", "cut-over": work / "cut"}
        small_lake.build(sources["diffed"], make(sources["diffed"]).spark)
        lifecycle.cutover(copy(sources["diffed"], sources["cut-over"]), small_lake.CID)
        for command in (sweep.BY_NAME[name] for name in commands):
            started = time.monotonic()
            source = sources[command.source]
            count = len(sweep.operations(copy(source, work / f"{command.name}-count"), command.run))
            found = 0
            for mode in modes:
                for n in range(1, count + 1):
                    where = f"{engine}/correction/{command.name}/{mode}:{n}"
                    lake = copy(source, work / f"{command.name}-{mode}-{n}")
                    tally.paths.add(f"correction:{command.name}")
                    tally.points += 1
                    tally.faults[mode] += 1
                    try:
                        if mode == "error":
                            sweep.fail_in_process(lake, command.run, n)
                        else:
                            sweep.kill_in_child(lake, command.name, n)
                            lifecycle.recover_all(lake)
                        command.finish(lake)
                        assert sweep.record(lake.root)["state"] == command.target
                        command.check(lake)
                    except Exception as exc:
                        found += 1
                        tally.flag("record_mismatch", where, f"{type(exc).__name__}: {exc}")
            print(
                f"{engine:12} {'correction ' + command.name:24} operations={count:3} "
                f"problems={found} ({time.monotonic() - started:.1f} s)",
                flush=True,
            )


def sweep_steps(names: list[str], modes: list[str], tally, engine: str) -> None:
    """Every I/O operation of each named pipeline step failed in turn, by an error in this
    process and by a kill of a child running the step
    (``backfill_assets_tests/iofault_steps.py``)."""
    from backfill_assets_tests import iofault_steps as s
    from backfill_assets_tests.pipeline_env import pipeline_env

    with tempfile.TemporaryDirectory(prefix="iofault-steps-") as tmp:
        root = Path(tmp)
        with pipeline_env(root, start_date=s.FIRST.isoformat()) as env:
            before = s.prepare(env)
            for step in (st for st in s.STEPS if st.name in names):
                started = time.monotonic()
                template = s.step_template(env, before, step)
                count = len(s.operations(env, template, step, root / "ops.log"))
                found = 0
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
                    found += len(problems)
                print(
                    f"{engine:12} {'step ' + step.name:24} operations={count:3} "
                    f"problems={found} ({time.monotonic() - started:.1f} s)",
                    flush=True,
                )


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # deltalake readers can abort the interpreter at exit (delta-rs#2184)
