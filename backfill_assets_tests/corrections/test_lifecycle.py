"""A cutover whose staged versions are gone (discarded or expired by maintain) is a clear
CorrectionError that says what to do, raised before anything is published."""

from __future__ import annotations

import pytest

from backfill_assets.corrections import lifecycle, registry
from backfill_assets.corrections.diff import CORRECTED
from backfill_assets.corrections.registry import Correction, CorrectionError, State
from backfill_assets.lake import Lake

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
    registry.save(lake.root, c)
    with pytest.raises(CorrectionError, match=r"discarded or expired.*backfill-assets correct"):
        lifecycle.cutover(lake, c.id)
    assert all(lake.version(t.path) is None for t in CORRECTED)  # nothing was published
    assert registry.get(lake.root, c.id).state == State.DIFFED
