"""The I/O-fault sweep's ledger (``iofault_ledger.py``): a path's line counts only while the code
it exercised is unchanged; a change to the lake, or a line with no hash, makes the path run
again. Checked on a copy of the project's files, so that the test can change one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from backfill_assets_testkit import iofault_harness
from backfill_assets_testkit.iofault_ledger import CODE_FOLDERS, REPO, Ledger, loaded_files

MODES = ["error", "kill"]


def copy_project(to: Path) -> None:
    for folder in CODE_FOLDERS:
        shutil.copytree(REPO / folder, to / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "uv.lock", to / "uv.lock")


def record(ledger: Ledger, points: int) -> None:
    """One path's sweep as the bench records it: ``points`` errors, no problem."""
    tally = iofault_harness.Tally()
    with ledger.path(tally, "delta-spark", "publish_some") as done:
        tally.paths.add("publish_some")
        tally.points += points
        tally.faults["error"] += points
        done(points)


def taken(ledger_file: Path, root: Path) -> int | None:
    """The points the ledger gives for the path, or None when the path must run."""
    tally = iofault_harness.Tally()
    if not Ledger(ledger_file, MODES, root=root).take(tally, "delta-spark", "publish_some"):
        return None
    return tally.points


def test_a_line_is_taken_while_its_code_is_unchanged_and_never_after_the_lake_changed(tmp_path):
    root = tmp_path / "project"
    copy_project(root)
    ledger_file = tmp_path / "ledger.jsonl"
    record(Ledger(ledger_file, MODES, root=root), 7)
    line = json.loads(ledger_file.read_text())
    # this process loaded the harness, hence the lake: the line names them among its code
    assert {"backfill_assets/lake/table.py", "backfill_assets_testkit/iofault_harness.py"} <= set(
        line["files"]
    )
    assert "backfill_assets/lake/table.py" in loaded_files()
    assert taken(ledger_file, root) == 7

    with (root / "backfill_assets/lake/table.py").open("a") as table:
        table.write("# a comment\n")
    assert taken(ledger_file, root) is None, "a line of the lake's old code was taken as current"


def test_a_line_without_the_hash_of_its_code_is_never_taken(tmp_path):
    root = tmp_path / "project"
    copy_project(root)
    ledger_file = tmp_path / "ledger.jsonl"
    record(Ledger(ledger_file, MODES, root=root), 3)
    line = json.loads(ledger_file.read_text())
    del line["code"], line["files"]  # as the lines written before the ledger hashed its code
    ledger_file.write_text(json.dumps(line) + "\n")
    assert taken(ledger_file, root) is None


def test_a_path_recorded_again_counts_with_its_newest_line(tmp_path):
    root = tmp_path / "project"
    copy_project(root)
    ledger_file = tmp_path / "ledger.jsonl"
    record(Ledger(ledger_file, MODES, root=root), 3)
    (root / "backfill_assets/lake/table.py").write_text(
        (REPO / "backfill_assets/lake/table.py").read_text() + "# changed\n"
    )
    assert taken(ledger_file, root) is None
    record(Ledger(ledger_file, MODES, root=root), 5)
    assert taken(ledger_file, root) == 5
