"""The landing scan on its own: which folders and files are new between two high-water marks.

Every mark is a change time read back from the file system with ``os.stat``, so each case sits
exactly on the boundary it is about.
"""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

from backfill_assets.late_data import LandingCursor
from backfill_assets.late_data.scan import DatasetScan, scan_dataset
from backfill_assets_testkit.file_clock import past_stamps

FIRST, JAN2, LAST = date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 31)
FOLDER = "orders/arrival_date=2024-01-02"


def _land(root: Path, name: str) -> int:
    """Lands one order file in the Jan 2 folder as a producer does (written aside, renamed into
    place); its change time, after every stamp already under ``root``: no two files share a
    clock tick."""
    folder = root / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    past_stamps(root)
    (folder / f"_{name}").write_text('{"order_id": "1"}\n')
    os.rename(folder / f"_{name}", folder / name)
    return os.stat(folder / name).st_ctime_ns


def _folder_stamp(root: Path) -> int:
    return os.stat(root / FOLDER).st_ctime_ns


def _changed(scan: DatasetScan) -> list[tuple[date, str, list[str]]]:
    return [(c.day, c.how, [f.path.rsplit("/", 1)[1] for f in c.new]) for c in scan.changed]


def test_a_new_folder_stamped_at_the_new_mark_waits_for_the_next_tick(tmp_path):
    """A folder within the settle time may still be filling: neither taken nor counted."""
    _land(tmp_path, "a.jsonl")
    stamp = _folder_stamp(tmp_path)
    waiting = scan_dataset(tmp_path, "orders", FIRST, LAST, {}, 0, stamp)
    assert (waiting.changed, waiting.counts, waiting.settling) == ([], {}, 1)
    taken = scan_dataset(tmp_path, "orders", FIRST, LAST, {}, 0, stamp + 1)
    assert _changed(taken) == [(JAN2, "new folder", ["a.jsonl"])]
    assert (taken.counts, taken.settling) == ({JAN2: 1}, 0)


def test_a_file_stamped_at_the_old_mark_is_new(tmp_path):
    """The cursor saw ``a`` (count 1) and put its mark at ``b``'s change time: ``b`` is new."""
    a = _land(tmp_path, "a.jsonl")
    b = _land(tmp_path, "b.jsonl")
    assert a < b
    scan = scan_dataset(tmp_path, "orders", FIRST, LAST, {JAN2: 1}, b, b + 1, recount=True)
    assert _changed(scan) == [(JAN2, "new files", ["b.jsonl"])]
    assert scan.counts == {JAN2: 2}


def test_a_file_stamped_at_the_new_mark_waits_for_the_next_tick(tmp_path):
    a = _land(tmp_path, "a.jsonl")
    b = _land(tmp_path, "b.jsonl")
    assert a < b
    waiting = scan_dataset(tmp_path, "orders", FIRST, LAST, {JAN2: 1}, a + 1, b, recount=True)
    assert (waiting.changed, waiting.counts, waiting.settling) == ([], {JAN2: 1}, 1)
    taken = scan_dataset(tmp_path, "orders", FIRST, LAST, {JAN2: 1}, b, b + 1, recount=True)
    assert _changed(taken) == [(JAN2, "new files", ["b.jsonl"])]
    assert taken.settling == 0


def test_a_known_folder_stamped_at_the_old_mark_is_listed(tmp_path):
    """Its change time is not before the mark: it may have gained a file since the last look."""
    _land(tmp_path, "a.jsonl")
    b = _land(tmp_path, "b.jsonl")
    stamp = _folder_stamp(tmp_path)
    scan = scan_dataset(tmp_path, "orders", FIRST, LAST, {JAN2: 1}, stamp, max(stamp, b) + 1)
    assert [c.day for c in scan.changed] == [JAN2]
    assert scan.counts == {JAN2: 2}


def test_a_known_folder_older_than_the_mark_keeps_its_count_until_a_full_count(tmp_path):
    """Not listed between full counts (the cursor's 0 stands); counted, a file the cursor never
    counted and the times cannot explain makes the whole folder new."""
    mark = max(_land(tmp_path, "a.jsonl"), _folder_stamp(tmp_path)) + 1
    between = scan_dataset(tmp_path, "orders", FIRST, LAST, {JAN2: 0}, mark, mark + 1)
    assert (between.changed, between.counts) == ([], {JAN2: 0})
    full = scan_dataset(tmp_path, "orders", FIRST, LAST, {JAN2: 0}, mark, mark + 1, recount=True)
    assert _changed(full) == [(JAN2, "unexplained change", ["a.jsonl"])]
    assert full.counts == {JAN2: 1}


def test_an_empty_folder_in_a_saved_cursor_is_not_new_on_the_next_tick(tmp_path):
    (tmp_path / FOLDER).mkdir(parents=True)
    stamp = _folder_stamp(tmp_path)
    first = scan_dataset(tmp_path, "orders", FIRST, LAST, {}, 0, stamp + 1)
    assert _changed(first) == [(JAN2, "new folder", [])]  # an empty folder is a landed day
    saved = LandingCursor(stamp + 1, {"orders": first.counts}).dumps()
    loaded = LandingCursor.loads(saved)
    assert loaded is not None
    again = scan_dataset(
        tmp_path, "orders", FIRST, LAST, loaded.counts["orders"], stamp + 1, stamp + 2, True
    )
    assert (again.changed, again.counts) == ([], {JAN2: 0})
