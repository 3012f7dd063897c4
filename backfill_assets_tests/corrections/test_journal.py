"""A correction's cutover, rollback, discard and decommission, failed at a sample of their I/O
operations (``correction_sweep.sample``; an error in this process, or a kill of a child): the
command run again converges, and then the record agrees with the lake and nothing is lost.
``bench/iofault.py`` fails every operation."""

from __future__ import annotations

from pathlib import Path

import pytest

from backfill_assets.corrections import lifecycle
from backfill_assets_testkit import correction_sweep
from backfill_assets_testkit.small_lake import copy


@pytest.fixture
def sources(template, cut_over) -> dict[str, Path]:
    return {"diffed": template, "cut-over": cut_over}


@pytest.mark.parametrize("command", correction_sweep.COMMANDS, ids=lambda c: c.name)
def test_a_command_failed_at_an_io_operation_converges_when_run_again(sources, tmp_path, command):
    source = sources[command.source]
    names = correction_sweep.operations(copy(source, tmp_path / "count"), command.run)
    assert len(names) > 3 and names.count("commit") == names.count("commit.landed"), names
    for n in correction_sweep.sample(names):
        lake = copy(source, tmp_path / f"n{n}")
        correction_sweep.fail_in_process(lake, command.run, n)
        command.finish(lake)
        assert correction_sweep.record(lake.root)["state"] == command.target, n
        command.check(lake)


@pytest.mark.slow  # a child process per point
@pytest.mark.parametrize("name", ["cutover", "rollback", "discard"])
def test_a_command_killed_at_an_io_operation_converges_after_recovery_and_again(
    sources, tmp_path, name
):
    """Odd points: the command run again recovers; even ones: maintain's ``recover_all``
    first."""
    command = correction_sweep.BY_NAME[name]
    source = sources[command.source]
    names = correction_sweep.operations(copy(source, tmp_path / "count"), command.run)
    for i, n in enumerate(correction_sweep.sample(names)):
        lake = copy(source, tmp_path / f"n{n}")
        correction_sweep.kill_in_child(lake, name, n)
        if i % 2:
            lifecycle.recover_all(lake)
            assert correction_sweep.record(lake.root).get("pending", {}) == {}, n
        command.finish(lake)
        assert correction_sweep.record(lake.root)["state"] == command.target, n
        command.check(lake)
