"""After a SIGINT or SIGTERM, a correction's cutover or rollback starts nothing: no intent saved,
no commit, the record as it was (``signals.check`` before the journal's intent)."""

from __future__ import annotations

import signal

import pytest

from backfill_assets import signals
from backfill_assets.corrections import lifecycle, registry
from backfill_assets.corrections.registry import State
from backfill_assets_tests.corrections.small_lake import CID, TABLES, copy


@pytest.fixture
def terminated():
    """This process as a step's handler leaves it once a SIGTERM arrived."""
    signals.record(signal.SIGTERM)
    yield
    signals._first.clear()


def versions(lake) -> dict[str, int | None]:
    return {t: lake.version(t) for t in TABLES}


def test_a_cutover_after_a_signal_publishes_nothing(template, tmp_path, terminated):
    lake = copy(template, tmp_path / "lake")
    before = versions(lake)
    with pytest.raises(signals.Stopped, match="SIGTERM"):
        lifecycle.cutover(lake, CID)
    c = registry.get(lake.root, CID)
    assert (c.state, c.pending) == (State.DIFFED, {})
    assert versions(lake) == before


def test_a_rollback_after_a_signal_restores_nothing(cut_over, tmp_path, terminated):
    lake = copy(cut_over, tmp_path / "lake")
    before = versions(lake)
    with pytest.raises(signals.Stopped, match="SIGTERM"):
        lifecycle.rollback(lake, CID)
    c = registry.get(lake.root, CID)
    assert (c.state, c.pending) == (State.CUT_OVER, {})
    assert versions(lake) == before
