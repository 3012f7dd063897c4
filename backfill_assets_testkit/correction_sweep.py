"""A correction's commands failed at their I/O operations, one point at a time, on copies of the
small lake of ``small_lake.py``: the fault (an ``OSError`` in this process, or a SIGKILL of a
child running the command), the command run again, then the checks that the record agrees
with the lake and nothing was lost.

``make test`` fails a sample of each command's points (``sample``: every distinct operation
once, every commit, the last); ``bench/iofault.py`` fails every one.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from backfill_assets.corrections import lifecycle, registry
from backfill_assets.corrections.registry import State
from backfill_assets.lake import Lake
from backfill_assets.testing.iofault import arm
from backfill_assets_testkit import iofault_harness
from backfill_assets_testkit.small_lake import (
    CID,
    FIXED,
    TABLES,
    after_cutover,
    production_rows,
    rows,
    unreferenced_files,
)

LATER = dt.timedelta(days=30)  # decommission's clock: past the 14 days' grace of an open one


def record(root: Path) -> dict:
    return json.loads((root / registry.FOLDER / f"{CID}.json").read_text())


def assert_record_agrees(lake: Lake, cut: bool) -> None:
    """The record has no open intent, and its state and versions are what the log holds."""
    document = record(lake.root)
    assert document.get("pending", {}) == {}, document["pending"]
    expected = after_cutover if cut else production_rows
    for table in TABLES:
        assert rows(lake.root, table) == expected(table), table  # reads: no file is missing
    if cut:
        assert document["state"] == State.CUT_OVER
        for table in TABLES:
            version = document["cutover"]["versions"][table]
            entry = next(e for e in lake.history(table) if e["version"] == version)
            assert entry["metadata"]["extra"]["correction"] == CID
            assert entry["metadata"]["extra"]["action"] == "cutover"
            assert entry["metadata"]["partitions"] == [d.isoformat() for d in FIXED]
            before = document["cutover"]["versions_before"][table]
            assert lake.changed_since(table, "event_date", before, FIXED) == set(FIXED)
    else:
        assert document["state"] in (State.DIFFED, State.ROLLED_BACK)


def assert_staged_intact(lake: Lake) -> None:
    """The correction's staged versions are open, and every file they name is on disk."""
    for table in TABLES:
        staged = lake.staging.version(table, CID)
        assert staged is not None, table
        assert all((lake.root / table / f.path).exists() for f in staged.files), table


def assert_discarded(lake: Lake, state: str, cut: bool) -> None:
    document = record(lake.root)
    assert document.get("pending", {}) == {} and document["state"] == state
    expected = after_cutover if cut else production_rows
    for table in TABLES:
        assert lake.staging.version(table, CID) is None
        assert rows(lake.root, table) == expected(table), table
        assert unreferenced_files(lake.root, table) == set(), table


def _decommission(lake: Lake) -> object:
    return lifecycle.decommission(lake, 14, now=dt.datetime.now(dt.UTC) + LATER)


def _rolled_back(lake: Lake) -> None:
    assert record(lake.root)["state"] == State.ROLLED_BACK
    assert_record_agrees(lake, cut=False)
    assert_staged_intact(lake)
    lifecycle.cutover(lake, CID)  # and the rolled-back correction cuts over again
    assert_record_agrees(lake, cut=True)


def _cut_over(lake: Lake) -> None:
    assert_record_agrees(lake, cut=True)
    assert_staged_intact(lake)


@dataclass(frozen=True)
class Command:
    """One correction command swept: the lake it starts from (``diffed``: the template;
    ``cut-over``: the template cut over), the state it ends in, and what must hold then."""

    name: str
    source: str
    run: Callable[[Lake], object]
    target: str
    check: Callable[[Lake], None]

    def finish(self, lake: Lake) -> None:
        """Run the command again when the fault left it short of its end state (a command whose
        recovery completed it at once is not run twice)."""
        document = record(lake.root)
        if document.get("pending") or document["state"] != self.target:
            self.run(lake)


COMMANDS = [
    Command(
        "cutover", "diffed", lambda lake: lifecycle.cutover(lake, CID), State.CUT_OVER, _cut_over
    ),
    Command(
        "rollback",
        "cut-over",
        lambda lake: lifecycle.rollback(lake, CID),
        State.ROLLED_BACK,
        _rolled_back,
    ),
    Command(
        "discard",
        "cut-over",
        lambda lake: lifecycle.discard(lake, CID),
        State.DISCARDED,
        lambda lake: assert_discarded(lake, State.DISCARDED, cut=True),
    ),
    Command(
        "discard-diffed",
        "diffed",
        lambda lake: lifecycle.discard(lake, CID),
        State.DISCARDED,
        lambda lake: assert_discarded(lake, State.DISCARDED, cut=False),
    ),
    Command(
        "decommission",
        "diffed",
        _decommission,
        State.DECOMMISSIONED,
        lambda lake: assert_discarded(lake, State.DECOMMISSIONED, cut=False),
    ),
]
BY_NAME = {c.name: c for c in COMMANDS}


def operations(lake: Lake, run: Callable[[Lake], object]) -> list[str]:
    """The names of the I/O operations ``run`` makes on ``lake``, in order (it runs there)."""
    log = lake.root.parent / f"{lake.root.name}.ops"
    with arm("count", log=str(log)):
        run(lake)
    return [line.split()[1] for line in log.read_text().splitlines()]


def sample(names: list[str]) -> list[int]:
    """The points ``make test`` fails, counted from 1: the first of each kind of operation,
    every commit and every landed commit (the points between two tables' commits), and the
    last. ``bench/iofault.py`` fails every point."""
    firsts = {names.index(name) + 1 for name in set(names)}
    commits = {i + 1 for i, name in enumerate(names) if name.startswith("commit")}
    return sorted(firsts | commits | {len(names)})


def fail_in_process(lake: Lake, run: Callable[[Lake], object], n: int) -> None:
    """``run`` with an I/O error at its Nth operation (it failed, or recovered at once)."""
    with arm("error", n), suppress(Exception):
        run(lake)


def run_child(root: Path, command: str, plan: str, engine: str = "delta-rs"):
    """``command`` (a name of ``COMMANDS``, or ``recover``) on the lake at ``root``, in a child
    process whose I/O seam follows ``plan`` (with a Spark session of its own on delta-spark)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKFILL_")}
    args = [str(root), command, engine]
    return iofault_harness.run_child("backfill_assets_testkit.correction_sweep", args, plan, env)


def kill_in_child(lake: Lake, command: str, n: int) -> None:
    """``command`` SIGKILLed at its Nth I/O operation, in a child."""
    child = run_child(lake.root, command, f"kill:{n}", lake.engine.name)
    assert child.returncode == -9, (command, n, child.returncode, child.stderr[-2000:])


def _child(root: str, command: str, engine: str) -> None:
    session = None
    if engine != "delta-rs":
        from backfill_assets.spark.session import build_session, spark_config

        session = build_session(spark_config(master="local[1]", lake_engine=engine))
    lake = Lake(root, session, engine=engine)
    if command == "recover":
        lifecycle.recover(lake, CID)
    else:
        BY_NAME[command].run(lake)


if __name__ == "__main__":
    _child(*sys.argv[1:4])
    sys.stdout.flush()
    os._exit(0)  # deltalake readers can abort the interpreter at exit (delta-rs#2184)
