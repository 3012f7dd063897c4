"""A restore given the version its caller checked (a rollback's cutover) never reverts a newer
write: refused when a commit after that version changed one of its days, whether it landed
before the restore began or while its commit was being made; a write to other days is no
conflict."""

from __future__ import annotations

import threading

import pytest

from backfill_assets.lake import LakeConflict
from backfill_assets.testing.faults import forget_visits
from backfill_assets_tests.lake.lake_support import THINGS, commit, content, wait_for
from backfill_assets_tests.lake.test_lake_staged import D1, D2, frame

TABLE = THINGS
OLD = [(D1, 1, "old"), (D2, 2, "old")]
CUT = [(D1, 10, "cut")]
LIVE = [(D1, 20, "live")]


def cut_over(lake) -> int:
    """Version 0 the old rows, version 1 D1 replaced (a cutover); the version a rollback checks."""
    lake.replace_partitions(TABLE, frame(lake, OLD), "d", [D1, D2], commit("old"))
    return lake.replace_partitions(TABLE, frame(lake, CUT), "d", [D1], commit("cut")).version


def test_a_restore_refuses_a_write_that_landed_after_the_checked_version(lake):
    checked = cut_over(lake)
    lake.replace_partitions(TABLE, frame(lake, LIVE), "d", [D1], commit("live"))
    with pytest.raises(LakeConflict, match=f"changed after version {checked}"):
        lake.restore_partitions(TABLE, "d", [D1], 0, commit("rollback"), since=checked)
    assert content(lake) == sorted([*LIVE, OLD[1]]) and lake.version(TABLE) == checked + 1
    # a write to another day after the checked version is no conflict
    checked = lake.version(TABLE)
    lake.replace_partitions(TABLE, frame(lake, [(D2, 3, "d2")]), "d", [D2], commit("d2"))
    lake.restore_partitions(TABLE, "d", [D1], 0, commit("rollback"), since=checked)
    assert content(lake) == sorted([OLD[0], (D2, 3, "d2")])


def test_a_write_landing_while_the_restore_commits_is_not_reverted(lake, tmp_path, monkeypatch):
    """The restore stops at its first commit attempt (``before_commit``), its guard already
    passed; a live write to the same day lands; the restore then must not commit over it."""
    checked = cut_over(lake)
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_DIR", str(pauses))
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_AT", "before_commit")
    forget_visits()
    (pauses / "before_commit.2.resume").touch()  # the live write's own first attempt goes on
    outcome: list[BaseException | object] = []

    def rollback() -> None:
        try:
            outcome.append(
                lake.restore_partitions(TABLE, "d", [D1], 0, commit("rollback"), since=checked)
            )
        except BaseException as exc:
            outcome.append(exc)

    restoring = threading.Thread(target=rollback)
    restoring.start()
    try:
        wait_for(pauses / "before_commit.1.reached", [], timeout=300)
        lake.replace_partitions(TABLE, frame(lake, LIVE), "d", [D1], commit("live"))
    finally:
        (pauses / "before_commit.1.resume").touch()
        restoring.join(timeout=300)
    monkeypatch.delenv("BACKFILL_LAKE_PAUSE_AT")
    assert len(outcome) == 1 and isinstance(outcome[0], LakeConflict), outcome
    assert content(lake) == sorted([*LIVE, OLD[1]])
