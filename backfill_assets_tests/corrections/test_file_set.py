"""A cutover publishes exactly the staged files its diff compared: files kept into the correction
after the diff (a rebuild's) are refused before anything is published, and so are files kept
while the cutover runs, by the check inside its publish; a rebuild stopped between its keep
and its record's save leaves the correction to be diffed again."""

from __future__ import annotations

import os
import time

import pytest

from backfill_assets.corrections import keeping, lifecycle, registry
from backfill_assets.corrections.registry import CorrectionError, State
from backfill_assets.lake import CommitInfo, Lake
from backfill_assets.testing.iofault import arm
from backfill_assets_testkit.correction_sweep import operations
from backfill_assets_testkit.small_lake import (
    CID,
    FIXED,
    SCHEMA,
    TABLES,
    copy,
    production_rows,
    rows,
    staged_files,
    start_cutover,
)

STAGING, FACT = TABLES


def rebuilt_rows(table: str) -> set[tuple]:
    """What a rebuild stages for the correction's days: far more than the diff approved."""
    return {(d, f"{table}:{d.day}:1", 900 * d.day) for d in FIXED}


def stage_rebuild(lake: Lake, spark, table: str = STAGING):
    """A rebuild's staged version of ``table``'s corrected days (not yet kept)."""
    writer = Lake(lake.root, spark, engine="delta-rs")
    frame = spark.createDataFrame(sorted(rebuilt_rows(table)), SCHEMA)
    commit = CommitInfo(run_id="rebuild-run", code_version="abc123", input_versions={"raw/x": 2})
    return writer.staging.stage(table, frame, "event_date", FIXED, commit, stage_id="rebuild-run")


def assert_untouched(lake: Lake, versions: dict[str, int | None]) -> None:
    for table in TABLES:
        assert lake.version(table) == versions[table], table
        assert rows(lake.root, table) == production_rows(table), table


def test_files_kept_after_the_diff_are_refused_before_anything_is_published(
    template, tmp_path, spark
):
    lake = copy(template, tmp_path / "lake")
    before = {t: lake.version(t) for t in TABLES}
    # What a rebuild killed between its keep and its record's save leaves: the correction's
    # manifest holds the rebuild's files, the record still says diffed.
    lake.staging.keep(stage_rebuild(lake, spark), FIXED, into=CID)
    assert staged_files(lake.root, STAGING) != registry.get(lake.root, CID).diff["files"][STAGING]
    with pytest.raises(CorrectionError, match=rf"rebuilt since the diff \({STAGING}: .*diff {CID}"):
        lifecycle.cutover(lake, CID, force=True)  # forced: the guardrail is not what stops it
    assert_untouched(lake, before)
    c = registry.get(lake.root, CID)
    assert c.state == State.DIFFED and c.pending == {}


def test_files_kept_while_the_cutover_runs_are_refused_inside_its_publish(
    template, tmp_path, spark
):
    """The cutover stops once it compared the record's generation for its intent (after its own
    file-set check); the rebuild's keep lands then, in this process. The publish must refuse."""
    lake = copy(template, tmp_path / "lake")
    before = {t: lake.version(t) for t in TABLES}
    rebuild = stage_rebuild(lake, spark)
    pause = tmp_path / "pause"
    pause.mkdir()
    env = {
        **os.environ,
        "BACKFILL_LAKE_PAUSE_DIR": str(pause),
        "BACKFILL_LAKE_PAUSE_AT": "record_compared",
    }
    child = start_cutover(lake.root, env)
    try:
        for n in range(2, 6):  # its later saves (the recovery's) go on at once
            (pause / f"record_compared.{n}.resume").touch()
        reached = pause / "record_compared.1.reached"
        for _ in range(3000):
            if reached.exists() or child.poll() is not None:
                break
            time.sleep(0.02)
        assert reached.exists(), child.communicate()
        lake.staging.keep(rebuild, FIXED, into=CID)
        (pause / "record_compared.1.resume").touch()
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode != 0
    assert "holds other files" in err, err[-3000:]
    assert_untouched(lake, before)
    c = registry.get(lake.root, CID)
    assert c.pending == {} and c.state == State.DIFFED


def keep_rebuild(lake: Lake, spark):
    """The rebuild's keep into the correction, as a correction run makes it."""
    c = registry.get(lake.root, CID)
    rebuild = stage_rebuild(lake, spark)
    return lambda target: keeping.keep(target, c, rebuild, FIXED, "rebuild-run")


def test_a_rebuild_stopped_before_its_record_save_leaves_the_correction_to_diff_again(
    template, tmp_path, spark
):
    count = copy(template, tmp_path / "count")
    names = operations(count, keep_rebuild(count, spark))
    assert names[-1] == "record.rename", names  # the record's save is the keep's last step
    lake = copy(template, tmp_path / "lake")
    before = {t: lake.version(t) for t in TABLES}
    run = keep_rebuild(lake, spark)
    with arm("error", len(names) - 1), pytest.raises(OSError):
        run(lake)  # the keep landed; the record's save failed
    assert staged_files(lake.root, STAGING) != staged_files(template, STAGING)
    c = registry.get(lake.root, CID)
    assert c.state == State.STAGED  # the trace: this correction must be diffed again
    assert "rebuild-run" in c.history[-1]["detail"]
    with pytest.raises(CorrectionError, match="has not been diffed"):
        lifecycle.cutover(lake, CID, force=True)
    assert_untouched(lake, before)


def test_a_diff_that_recorded_no_file_set_is_refused_until_diffed_again(template, tmp_path):
    lake = copy(template, tmp_path / "lake")
    before = {t: lake.version(t) for t in TABLES}
    c = registry.get(lake.root, CID)
    del c.diff["files"]  # a record diffed before file sets were recorded
    registry.save(lake.root, c)
    with pytest.raises(CorrectionError, match=rf"recorded no file set.*diff {CID} again"):
        lifecycle.cutover(lake, CID)
    assert_untouched(lake, before)
