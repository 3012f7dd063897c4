"""A correction's cutover, rollback, discard and decommission, failed at every I/O operation in
turn (an error in this process, or a kill of a child): the command run again converges, and
then the record agrees with the lake and nothing is lost."""

from __future__ import annotations

import datetime as dt
import json
from contextlib import suppress
from pathlib import Path

import pytest

from backfill_assets.corrections import lifecycle, registry
from backfill_assets.corrections.registry import State
from backfill_assets.lake import Lake
from backfill_assets.testing.iofault import arm
from backfill_assets_tests.corrections.small_lake import (
    CID,
    FIXED,
    TABLES,
    after_cutover,
    copy,
    production_rows,
    rows,
    run_child,
    unreferenced_files,
)

TARGET = {
    "cutover": State.CUT_OVER,
    "rollback": State.ROLLED_BACK,
    "discard": State.DISCARDED,
}


def record(root: Path) -> dict:
    return json.loads((root / registry.FOLDER / f"{CID}.json").read_text())


def run(lake: Lake, command: str) -> None:
    if command == "discard":
        lifecycle.discard(lake, CID)
    else:
        getattr(lifecycle, command)(lake, CID)


def count_ops(template: Path, to: Path, command: str) -> int:
    lake = copy(template, to)
    with arm("count") as plan:
        run(lake, command)
    assert plan.done > 3, plan.done
    return plan.done


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
        staged = lake.staged_version(table, CID)
        assert staged is not None, table
        assert all((lake.root / table / f.path).exists() for f in staged.files), table


def assert_discarded(lake: Lake, state: str, cut: bool) -> None:
    document = record(lake.root)
    assert document.get("pending", {}) == {} and document["state"] == state
    expected = after_cutover if cut else production_rows
    for table in TABLES:
        assert lake.staged_version(table, CID) is None
        assert rows(lake.root, table) == expected(table), table
        assert unreferenced_files(lake.root, table) == set(), table


def test_cutover_failed_at_any_io_operation_converges_when_run_again(template, tmp_path):
    ops = count_ops(template, tmp_path / "count", "cutover")
    for n in range(1, ops + 1):
        lake = copy(template, tmp_path / f"n{n}")
        with arm("error", n), suppress(Exception):  # failed, or recovered at once
            lifecycle.cutover(lake, CID)
        if record(lake.root)["state"] != State.CUT_OVER:
            lifecycle.cutover(lake, CID)
        assert_record_agrees(lake, cut=True)
        assert_staged_intact(lake)


def test_rollback_failed_at_any_io_operation_converges_when_run_again(cut_over, tmp_path):
    ops = count_ops(cut_over, tmp_path / "count", "rollback")
    for n in range(1, ops + 1):
        lake = copy(cut_over, tmp_path / f"n{n}")
        with arm("error", n), suppress(Exception):  # failed, or recovered at once
            lifecycle.rollback(lake, CID)
        if record(lake.root)["state"] != State.ROLLED_BACK:
            lifecycle.rollback(lake, CID)
        assert record(lake.root)["state"] == State.ROLLED_BACK
        assert_record_agrees(lake, cut=False)
        assert_staged_intact(lake)
        lifecycle.cutover(lake, CID)  # and the rolled-back correction cuts over again
        assert_record_agrees(lake, cut=True)


@pytest.mark.parametrize("cut", [False, True], ids=["diffed", "cut-over"])
def test_discard_failed_at_any_io_operation_converges_when_run_again(
    template, cut_over, tmp_path, cut
):
    source = cut_over if cut else template
    ops = count_ops(source, tmp_path / "count", "discard")
    for n in range(1, ops + 1):
        lake = copy(source, tmp_path / f"n{n}")
        with arm("error", n), suppress(Exception):  # failed, or recovered at once
            lifecycle.discard(lake, CID)
        if record(lake.root)["state"] != State.DISCARDED:
            lifecycle.discard(lake, CID)
        assert_discarded(lake, State.DISCARDED, cut)


def test_decommission_failed_at_any_io_operation_converges_when_run_again(template, tmp_path):
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)
    counted = copy(template, tmp_path / "count")
    with arm("count") as plan:
        assert lifecycle.decommission(counted, 14, now=later) == [CID]
    for n in range(1, plan.done + 1):
        lake = copy(template, tmp_path / f"n{n}")
        with arm("error", n), suppress(Exception):  # failed, or recovered at once
            lifecycle.decommission(lake, 14, now=later)
        lifecycle.decommission(lake, 14, now=later)
        assert_discarded(lake, State.DECOMMISSIONED, cut=False)


@pytest.mark.slow  # a child process per operation
@pytest.mark.parametrize("command", ["cutover", "rollback", "discard"])
def test_a_kill_at_any_io_operation_converges_after_recovery_and_the_command_again(
    template, cut_over, tmp_path, command
):
    """Odd N: the command run again recovers; even N: maintain's ``recover_all`` first."""
    source = template if command == "cutover" else cut_over
    ops = count_ops(source, tmp_path / "count", command)
    for n in range(1, ops + 1):
        lake = copy(source, tmp_path / f"n{n}")
        child = run_child(lake.root, command, f"kill:{n}")
        assert child.returncode == -9, (n, child.returncode, child.stderr[-2000:])
        if n % 2 == 0:
            lifecycle.recover_all(lake)
            assert record(lake.root).get("pending", {}) == {}
        document = record(lake.root)
        if document.get("pending") or document["state"] != TARGET[command]:
            run(lake, command)
        if command == "discard":
            assert_discarded(lake, State.DISCARDED, cut=True)
            continue
        assert record(lake.root)["state"] == TARGET[command]
        assert_record_agrees(lake, cut=command == "cutover")
        assert_staged_intact(lake)
