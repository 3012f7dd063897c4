"""A cutover whose staged versions are gone (discarded or expired by maintain) is a clear
CorrectionError that says what to do, raised before anything is published; a rollback whose
guard passed never reverts a live write that lands while it commits."""

from __future__ import annotations

import os
import threading

import pytest

from backfill_assets.corrections import lifecycle, registry
from backfill_assets.corrections.diff import CORRECTED
from backfill_assets.corrections.registry import Correction, CorrectionError, State
from backfill_assets.lake import CommitInfo, Lake
from backfill_assets.testing.faults import forget_visits
from backfill_assets_testkit.small_lake import (
    CID,
    D1,
    SCHEMA,
    TABLES,
    after_cutover,
    copy,
    rows,
)
from backfill_assets_tests.lake.lake_support import age, killed_writer, wait_for

DAY = "2024-01-02"


def test_cutover_of_a_correction_whose_staged_versions_expired_says_what_to_do(tmp_path, spark):
    lake = Lake(tmp_path / "lake", spark, engine="delta-rs")
    c = Correction(
        id="expired-fix",
        reason="rates restated",
        created_by="tester",
        created_at=registry.now(),
        start=DAY,
        end=DAY,
        code_version="abc123",
        state=State.DIFFED,
        diff={
            "days": {DAY: {"revenue_pct": 1.0}},
            "versions": {t.path: None for t in CORRECTED},
        },
    )
    for t in CORRECTED:  # staged and diffed, but no staged version is open any more
        c.table(t.path).staged[DAY] = "run-1"
    registry.save(lake.root, c, create=True)
    with pytest.raises(CorrectionError, match=r"discarded or expired.*backfill-assets correct"):
        lifecycle.cutover(lake, c.id)
    assert all(lake.version(t.path) is None for t in CORRECTED)  # nothing was published
    assert registry.get(lake.root, c.id).state == State.DIFFED


def test_a_live_write_landing_while_a_rollback_commits_is_not_reverted(
    cut_over, tmp_path, spark, monkeypatch
):
    """The rollback's guard passes (nothing changed since the cutover) and it stops at its
    first table's commit; the live lane rewrites that table's D1 meanwhile. The rollback must
    fail saying so, leave the live rows, and touch neither table."""
    lake = copy(cut_over, tmp_path / "lake")
    staging, fact = TABLES
    pauses = tmp_path / "pauses"
    pauses.mkdir()
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_DIR", str(pauses))
    monkeypatch.setenv("BACKFILL_LAKE_PAUSE_AT", "before_commit")
    forget_visits()
    for visit in (2, 3):  # the live write's own commit goes on, as would the fact's
        (pauses / f"before_commit.{visit}.resume").touch()
    outcome: list[object] = []

    def rollback() -> None:
        try:
            outcome.append(lifecycle.rollback(lake, CID))
        except Exception as exc:
            outcome.append(exc)

    rolling_back = threading.Thread(target=rollback)
    rolling_back.start()
    live = {(D1, "live", 1)}
    try:
        wait_for(pauses / "before_commit.1.reached", [], timeout=300)
        Lake(lake.root, spark, engine="delta-rs").replace_partitions(
            staging,
            spark.createDataFrame(sorted(live), SCHEMA),
            "event_date",
            [D1],
            CommitInfo(run_id="live", code_version="abc123"),
        )
    finally:
        (pauses / "before_commit.1.resume").touch()
        rolling_back.join(timeout=300)
    monkeypatch.delenv("BACKFILL_LAKE_PAUSE_AT")
    assert len(outcome) == 1 and isinstance(outcome[0], CorrectionError), outcome
    assert "production changed after the cutover" in str(outcome[0])
    assert rows(lake.root, staging) == {r for r in after_cutover(staging) if r[0] != D1} | live
    assert rows(lake.root, fact) == after_cutover(fact)
    assert registry.get(lake.root, CID).state == State.CUT_OVER


def test_maintain_removes_a_killed_writers_temporary_record_past_the_retention(tmp_path, spark):
    """A correction command killed between writing its record and renaming it into place leaves
    a temporary file in ``_corrections/``: past the retention, maintain's decommission deletes
    it; a younger one stays."""
    lake = Lake(tmp_path / "lake", spark, engine="delta-rs")
    folder = tmp_path / "lake" / registry.FOLDER
    old, young = killed_writer(folder / "fix.json"), killed_writer(folder / "fix.md")
    age(folder / old, 8)
    age(folder / young, 6)
    assert lifecycle.decommission(lake, 7) == []  # no correction to close
    left = os.listdir(folder)
    assert old not in left and young in left
