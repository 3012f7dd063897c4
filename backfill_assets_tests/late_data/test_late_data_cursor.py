"""The late-data cursor on its own: day ranges, the text dumps() writes and what loads() reads."""

from __future__ import annotations

import json
from datetime import date

import pytest

from backfill_assets.late_data import LandingCursor, PendingGroup, day_ranges

D = date.fromisoformat


def test_day_ranges_split_at_a_gap_and_merge_consecutive_days():
    days = [D("2024-01-04"), D("2024-01-01"), D("2024-01-03"), D("2024-01-03")]
    assert day_ranges(days) == [
        (D("2024-01-01"), D("2024-01-01")),
        (D("2024-01-03"), D("2024-01-04")),
    ]


def test_day_ranges_run_across_a_month_end_and_of_nothing_are_none():
    days = [D("2024-03-01"), D("2024-02-28"), D("2024-02-29")]
    assert day_ranges(days) == [(D("2024-02-28"), D("2024-03-01"))]
    assert day_ranges([]) == []


def test_a_folder_counted_at_zero_is_kept_by_a_save_and_load():
    """An empty folder is a landed day (count 0); a day without a folder is written as -1. Were
    the 0 lost on loading, every later tick would take the empty folder for a new one."""
    counts = {"orders": {D("2024-01-01"): 0, D("2024-01-02"): 2, D("2024-01-04"): 0}}
    text = LandingCursor(7, counts, (), 9).dumps()
    assert json.loads(text) == {
        "v": 1,
        "hw": 7,
        "counted": 9,
        "counts": {"orders": ["2024-01-01", [0, 2, -1, 0]]},
        "pending": [],
    }
    assert LandingCursor.loads(text) == LandingCursor(7, counts, (), 9)


def test_a_dataset_without_folders_yet_is_left_out_of_the_text():
    cursor = LandingCursor(5, {"orders": {}, "fx_rates": {D("2024-01-05"): 1}})
    text = cursor.dumps()
    assert json.loads(text)["counts"] == {"fx_rates": ["2024-01-05", [1]]}
    loaded = LandingCursor.loads(text)
    assert loaded is not None
    assert loaded.counts == {"fx_rates": {D("2024-01-05"): 1}}


def test_pending_days_are_written_as_ranges_and_read_back_day_by_day():
    days = (D("2024-01-30"), D("2024-01-31"), D("2024-02-01"), D("2024-02-03"))
    group = PendingGroup("g1", days, ("raw_orders:a", "raw_fx_rates:b"), 1700000000.12345, "why")
    text = LandingCursor(1, {}, (group,)).dumps()
    assert json.loads(text)["pending"] == [
        {
            "id": "g1",
            "days": [["2024-01-30", "2024-02-01"], ["2024-02-03", "2024-02-03"]],
            "awaits": ["raw_orders:a", "raw_fx_rates:b"],
            "since": 1700000000.123,
            "why": "why",
        }
    ]
    loaded = LandingCursor.loads(text)
    assert loaded is not None
    assert loaded.pending == (
        PendingGroup("g1", days, ("raw_orders:a", "raw_fx_rates:b"), 1700000000.123, "why"),
    )


@pytest.mark.parametrize("text", [None, ""])
def test_no_cursor_is_a_cold_start(text):
    assert LandingCursor.loads(text) is None


@pytest.mark.parametrize(
    "text",
    [
        '{"v":2,"hw":1,"counted":0,"counts":{},"pending":[]}',  # another version
        '{"hw":1,"counted":0,"counts":{},"pending":[]}',  # no version
        '[1,"hw",{"counts":{}}]',  # a JSON list
        "1700000000",  # a number, as another sensor might keep
        "a cursor of some other sensor",  # not JSON
        '{"v":1}',  # version 1, without its fields
        '{"v":1,"hw":1,"counts":{"orders":"2024-01-01"},"pending":[]}',  # counts of another shape
        '{"v":1,"hw":"soon","counts":{},"pending":[]}',  # a mark that is no number
    ],
)
def test_a_foreign_cursor_is_refused_with_a_clear_error(text):
    with pytest.raises(ValueError, match="not a late-data cursor of version 1"):
        LandingCursor.loads(text)
