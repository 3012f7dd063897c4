"""After a SIGINT or SIGTERM, a correction's cutover or rollback starts nothing: no intent saved,
no commit, the record as it was (``signals.check`` before the journal's intent)."""

from __future__ import annotations

import signal

import pytest

from backfill_assets import signals
from backfill_assets.corrections import lifecycle, registry
from backfill_assets.corrections.registry import State
from backfill_assets_testkit.small_lake import CID, TABLES, copy


@pytest.fixture
def terminate():
    """Leaves this process as a step's handler does once a SIGTERM arrived; forgotten after."""
    yield lambda: signals.record(signal.SIGTERM)
    signals._first.clear()


def versions(lake) -> dict[str, int | None]:
    return {t: lake.version(t) for t in TABLES}


@pytest.mark.parametrize(
    ("lake_fixture", "action", "state"),
    [
        ("template", lifecycle.cutover, State.DIFFED),
        ("cut_over", lifecycle.rollback, State.CUT_OVER),
    ],
    ids=["cutover", "rollback"],
)
def test_an_operation_after_a_signal_commits_nothing(
    lake_fixture, action, state, request, tmp_path, terminate
):
    lake = copy(request.getfixturevalue(lake_fixture), tmp_path / "lake")
    before = versions(lake)
    terminate()
    with pytest.raises(signals.Stopped, match="SIGTERM"):
        action(lake, CID)
    c = registry.get(lake.root, CID)
    assert (c.state, c.pending) == (state, {})
    assert versions(lake) == before
