"""Late-data detection without Dagster: new files, late folders, in-flight files, rates, cursor."""

from __future__ import annotations

import os
from datetime import date, timedelta

from backfill_assets.late_data import LandingCursor, PendingGroup, detect, release
from backfill_assets.late_data.scan import clock_ns
from backfill_assets_testkit.file_clock import clock_after, past_stamps
from backfill_assets_tests.automation.landing_files import (
    arrival_folder,
    deliver_folder,
    oracle_event_days,
    order,
    write_orders,
    write_rates,
)

FIRST, LAST, LATENESS = date(2024, 1, 1), date(2024, 3, 31), 7
RATE_MAX_AGE = 7  # the contract's rate window
D = date.fromisoformat


def tick(root, cursor, built=frozenset(), last=LAST, now_ns=None, settle_ns=0, built_at=None):
    """One detection; the folders in ``built`` count as built by a run that started at
    ``built_at`` (just now by default) and read them."""
    # what was written so far stamped before the mark: younger files wait for the next detection
    # (an S3 landing's objects are stamped to the second, at upload: the clock is past them)
    marked = clock_ns() if str(root).startswith("s3://") else past_stamps(root)
    now_ns = marked if now_ns is None else now_ns
    started = now_ns if built_at is None else built_at
    return detect(
        root,
        FIRST,
        last,
        LATENESS,
        RATE_MAX_AGE,
        cursor,
        lambda dataset: dict.fromkeys(built, started),
        now_ns,
        settle_ns,
    )


def raw(detection):
    return [(r.step, r.start, r.end) for r in detection.raw]


def baseline(root):
    """A cursor that has seen everything landed so far (all of it already built)."""
    cursor = tick(
        root,
        None,
        built={D("2024-01-10"), D("2024-01-12"), D("2024-01-13"), D("2024-01-20"), D("2024-01-22")},
    ).cursor
    return cursor


def test_cold_start_builds_only_folders_never_built_each_over_its_whole_window(tmp_path):
    write_orders(tmp_path, D("2024-01-10"), "a.jsonl", [order("1", "2024-01-09T10:00:00Z")])
    write_orders(tmp_path, D("2024-01-12"), "a.jsonl", [order("2", "2024-01-12T10:00:00Z")])
    found = tick(tmp_path, None, built={D("2024-01-10")})
    assert raw(found) == [("raw_orders", D("2024-01-12"), D("2024-01-12"))]
    assert found.group.days == tuple(D("2024-01-05") + timedelta(days=i) for i in range(8))
    assert found.cursor.counts["orders"] == {D("2024-01-10"): 1, D("2024-01-12"): 1}


def test_cold_start_spans_short_gaps_in_one_run_but_a_warm_tick_rebuilds_exact_days(tmp_path):
    for day, rate in (("2024-01-05", "1.08"), ("2024-01-08", "1.09"), ("2024-01-15", "1.10")):
        write_rates(tmp_path, D(day), "a.csv", {"EUR": rate})
    cold = tick(tmp_path, None)
    assert raw(cold) == [
        ("raw_fx_rates", D("2024-01-05"), D("2024-01-08")),  # over a weekend
        ("raw_fx_rates", D("2024-01-15"), D("2024-01-15")),
    ]
    write_rates(tmp_path, D("2024-01-05"), "b.csv", {"GBP": "1.26"})
    write_rates(tmp_path, D("2024-01-08"), "b.csv", {"GBP": "1.27"})
    warm = tick(tmp_path, cold.cursor)
    assert raw(warm) == [
        ("raw_fx_rates", D("2024-01-05"), D("2024-01-05")),
        ("raw_fx_rates", D("2024-01-08"), D("2024-01-08")),
    ]
    assert warm.group.days == tuple(D("2024-01-05") + timedelta(days=i) for i in range(11))


def test_cold_start_takes_files_stamped_after_their_folders_last_build_as_new(tmp_path):
    write_orders(tmp_path, D("2024-01-12"), "a.jsonl", [order("1", "2024-01-12T10:00:00Z")])
    built_at = past_stamps(tmp_path)  # after a.jsonl
    clock_after(built_at)  # b.jsonl after the build
    write_orders(tmp_path, D("2024-01-12"), "b.jsonl", [order("2", "2024-01-10T10:00:00Z")])
    found = tick(tmp_path, None, built={D("2024-01-12")}, built_at=built_at)
    assert raw(found) == [("raw_orders", D("2024-01-12"), D("2024-01-12"))]
    assert found.group.days == (D("2024-01-10"),)
    assert [f.path for f in found.findings] == ["orders/arrival_date=2024-01-12/b.jsonl"]


def test_cold_start_takes_a_folder_moved_in_after_its_empty_build_as_new(tmp_path):
    staged = arrival_folder(tmp_path / "elsewhere", D("2024-01-16"))
    (staged / "x.jsonl").write_text(order("1", "2024-01-15T08:00:00Z") + "\n")
    arrival_folder(tmp_path, D("2024-01-16"))  # built empty, before the delivery
    built_at = past_stamps(tmp_path)
    clock_after(built_at)  # the move after the build
    os.rename(staged, tmp_path / "orders" / staged.name)  # its file is older than the build
    found = tick(tmp_path, None, built={D("2024-01-16")}, built_at=built_at)
    assert found.group.days == (D("2024-01-15"),)
    assert found.findings[0].detail.startswith("folder changed after its last build")


def test_new_file_rebuilds_its_arrival_and_exactly_the_utc_event_days_it_carries(tmp_path):
    write_orders(tmp_path, D("2024-01-12"), "a.jsonl", [order("1", "2024-01-12T10:00:00Z")])
    cursor = baseline(tmp_path)
    write_orders(
        tmp_path,
        D("2024-01-12"),
        "late.jsonl",
        [
            order("2", "2024-01-09T10:00:00Z"),
            order("3", "2024-01-09T23:59:59.123456789Z"),
            order("4", "2024-01-10T23:30-02:00"),  # 2024-01-11T01:30Z
            order("5", "2024-01-12T01:00:00+05:00"),  # 2024-01-11T20:00Z
        ],
    )
    found = tick(tmp_path, cursor)
    assert raw(found) == [("raw_orders", D("2024-01-12"), D("2024-01-12"))]
    assert found.group.days == (D("2024-01-09"), D("2024-01-11"))
    assert [f.path for f in found.findings] == ["orders/arrival_date=2024-01-12/late.jsonl"]
    assert found.group.awaits == (found.raw[0].key,)
    assert tick(tmp_path, found.cursor).raw == []


def test_records_too_late_or_from_the_future_change_no_event_day(tmp_path):
    write_orders(tmp_path, D("2024-01-12"), "a.jsonl", [order("1", "2024-01-12T10:00:00Z")])
    cursor = baseline(tmp_path)
    write_orders(
        tmp_path,
        D("2024-01-12"),
        "odd.jsonl",
        [
            order("2", "2024-01-04T23:59:59Z"),  # 8 days before its arrival: too late
            order("3", "2024-01-13T00:00:01Z"),  # after its arrival: future_event
            "{not json",
            '{"order_id": "5"}',
            "",
            order("6", "2024-01-05T00:00:00Z"),  # exactly 7 days: inside the window
        ],
    )
    found = tick(tmp_path, cursor)
    assert raw(found) == [("raw_orders", D("2024-01-12"), D("2024-01-12"))]
    assert found.group.days == (D("2024-01-05"),)
    assert "1 record(s) beyond the lateness window" in found.findings[0].detail


def test_folder_delivered_days_late_is_new_as_a_whole_despite_its_older_file_times(tmp_path):
    staged = arrival_folder(tmp_path / "elsewhere", D("2024-01-16"))
    (staged / "x.jsonl").write_text(
        order("1", "2024-01-15T08:00:00Z") + "\n" + order("2", "2024-01-16T08:00:00Z") + "\n"
    )
    write_orders(tmp_path, D("2024-01-20"), "a.jsonl", [order("9", "2024-01-20T10:00:00Z")])
    cursor = baseline(tmp_path)
    clock_after(cursor.high_water_ns)
    deliver_folder(staged, tmp_path)  # four days after its date's successor folders
    found = tick(tmp_path, cursor)
    assert raw(found) == [("raw_orders", D("2024-01-16"), D("2024-01-16"))]
    assert found.group.days == (D("2024-01-15"), D("2024-01-16"))
    assert found.findings[0].detail.startswith("new folder")


def test_in_flight_file_is_ignored_until_renamed(tmp_path):
    folder = arrival_folder(tmp_path, D("2024-01-13"))
    cursor = baseline(tmp_path)
    (folder / "_part.jsonl").write_text(order("1", "2024-01-13T10:00:00Z") + "\n")
    (folder / ".hidden.jsonl").write_text(order("2", "2024-01-13T10:00:00Z") + "\n")
    waiting = tick(tmp_path, cursor)
    assert waiting.raw == [] and waiting.group is None
    os.rename(folder / "_part.jsonl", folder / "part.jsonl")
    found = tick(tmp_path, waiting.cursor)
    assert raw(found) == [("raw_orders", D("2024-01-13"), D("2024-01-13"))]
    assert found.group.days == (D("2024-01-13"),)


def test_file_younger_than_the_settle_margin_waits_for_the_next_tick(tmp_path):
    write_orders(tmp_path, D("2024-01-12"), "a.jsonl", [order("1", "2024-01-12T10:00:00Z")])
    cursor = baseline(tmp_path)
    write_orders(tmp_path, D("2024-01-12"), "b.jsonl", [order("2", "2024-01-11T10:00:00Z")])
    now = clock_ns()
    early = tick(tmp_path, cursor, now_ns=now, settle_ns=5_000_000_000)
    assert early.raw == [] and early.cursor.counts["orders"][D("2024-01-12")] == 1
    later = tick(tmp_path, early.cursor, now_ns=now + 6_000_000_000, settle_ns=5_000_000_000)
    assert later.group.days == (D("2024-01-11"),)


def test_folder_replaced_by_a_move_is_rebuilt_whole_when_times_cannot_explain_it(tmp_path):
    staged = arrival_folder(tmp_path / "elsewhere", D("2024-01-22"))
    (staged / "x.jsonl").write_text(order("1", "2024-01-21T08:00:00Z") + "\n")
    arrival_folder(tmp_path, D("2024-01-22"))  # an empty day, seen as such
    cursor = baseline(tmp_path)
    assert cursor.counts["orders"][D("2024-01-22")] == 0
    clock_after(cursor.high_water_ns)
    os.rename(staged, tmp_path / "orders" / staged.name)  # replaces the empty folder
    found = tick(tmp_path, cursor)
    assert found.group.days == (D("2024-01-21"),)
    assert found.findings[0].detail.startswith("unexplained change")


def test_file_its_change_times_hide_is_found_by_the_periodic_count_of_every_folder(tmp_path):
    """Clock skew with a file server (or a network share's attribute cache) stamps a new file
    and its folder before the high-water mark the last tick stored: only the folder's count
    shows it, and only if that count is consulted."""
    first = write_orders(tmp_path, D("2024-01-12"), "a.jsonl", [order("1", "2024-01-12T10:00:00Z")])
    ahead = 60 * 10**9  # the sensor's clock runs a minute ahead of the file server's
    cursor = tick(tmp_path, None, built={D("2024-01-12")}, now_ns=clock_ns() + ahead).cursor
    hidden = write_orders(
        tmp_path, D("2024-01-12"), "b.jsonl", [order("2", "2024-01-10T10:00:00Z")]
    )
    missed = tick(tmp_path, cursor, now_ns=clock_ns() + ahead)
    assert missed.raw == []  # stamped before the mark: the times alone do not show it
    ten_minutes = 10 * 60 * 10**9  # the documented default: every folder counted every 10 min
    found = tick(tmp_path, missed.cursor, now_ns=clock_ns() + ahead + ten_minutes)
    assert raw(found) == [("raw_orders", D("2024-01-12"), D("2024-01-12"))]
    assert set(found.group.days) == oracle_event_days([first, hidden])  # the whole folder
    assert found.findings[0].detail.startswith("unexplained change")
    assert tick(tmp_path, found.cursor, now_ns=clock_ns() + ahead + ten_minutes).raw == []


def test_folder_after_the_last_partition_waits_until_its_day_is_a_partition(tmp_path):
    write_orders(tmp_path, D("2024-01-12"), "a.jsonl", [order("1", "2024-01-12T10:00:00Z")])
    cursor = baseline(tmp_path)
    write_orders(tmp_path, D("2024-04-01"), "today.jsonl", [order("2", "2024-03-31T22:00:00Z")])
    today = tick(tmp_path, cursor)
    assert today.raw == [] and D("2024-04-01") not in today.cursor.counts["orders"]
    tomorrow = tick(tmp_path, today.cursor, last=D("2024-04-01"))
    assert raw(tomorrow) == [("raw_orders", D("2024-04-01"), D("2024-04-01"))]
    assert tomorrow.group.days == (D("2024-03-31"),)


def test_new_rate_file_changes_its_currencies_up_to_their_next_rate_date(tmp_path):
    write_rates(tmp_path, D("2024-01-10"), "a.csv", {"EUR": "1.08", "GBP": "1.27"})
    write_rates(tmp_path, D("2024-01-13"), "a.csv", {"EUR": "1.09"})
    cursor = tick(tmp_path, None, built={D("2024-01-10"), D("2024-01-13")}).cursor
    write_rates(tmp_path, D("2024-01-10"), "0-first.csv", {"EUR": "1.07"})  # sorts first: loses
    write_rates(tmp_path, D("2024-01-10"), "b.csv", {"GBP": "1.28", "USD": "1"})
    found = tick(tmp_path, cursor)
    assert raw(found) == [("raw_fx_rates", D("2024-01-10"), D("2024-01-10"))]
    by_file = {f.path.rsplit("/", 1)[1]: f.days for f in found.findings}
    assert by_file["0-first.csv"] == ()
    gbp = tuple(D("2024-01-10") + timedelta(days=i) for i in range(8))  # no later GBP rate
    assert by_file["b.csv"] == gbp and found.group.days == gbp
    write_rates(tmp_path, D("2024-01-11"), "a.csv", {"EUR": "1.10"})
    eur = tick(tmp_path, found.cursor)
    assert eur.group.days == (D("2024-01-11"), D("2024-01-12"))  # Jan 13 has its own EUR


def test_a_rate_file_landed_before_the_first_partition_rebuilds_the_first_partition(tmp_path):
    """raw_fx_rates' first partition holds the rate window before it: a file landing there
    rebuilds that partition and the first days whose rate it sets."""
    friday = FIRST - timedelta(days=3)
    write_rates(tmp_path, FIRST - timedelta(days=4), "a.csv", {"EUR": "1.08"})
    write_rates(tmp_path, D("2024-01-04"), "a.csv", {"EUR": "1.09"})
    cold = tick(tmp_path, None)
    assert raw(cold) == [("raw_fx_rates", FIRST, D("2024-01-04"))]  # over a short gap
    assert cold.group.days == tuple(FIRST + timedelta(days=i) for i in range(11))
    assert tick(tmp_path, None, built={FIRST, D("2024-01-04")}).raw == []  # read by that build
    write_rates(tmp_path, friday, "a.csv", {"EUR": "1.10"})
    found = tick(tmp_path, cold.cursor)
    assert raw(found) == [("raw_fx_rates", FIRST, FIRST)]
    assert found.group.days == (FIRST, D("2024-01-02"), D("2024-01-03"))  # Jan 4 has its own
    assert [f.path for f in found.findings] == [f"fx_rates/rate_date={friday}/a.csv"]
    write_rates(tmp_path, FIRST - timedelta(days=8), "a.csv", {"EUR": "1.11"})
    assert tick(tmp_path, found.cursor).raw == []  # beyond the window: no day takes it


def test_cursor_stays_small_over_three_years_of_folders():
    first = date(2022, 1, 1)
    counts = {
        "orders": {first + timedelta(days=i): 3 for i in range(1100)},
        "fx_rates": {first + timedelta(days=i): 1 for i in range(1100) if i % 7 < 5},
    }
    group = PendingGroup("g1", (D("2024-01-01"), D("2024-01-02")), ("k1",), 1.5, "why")
    cursor = LandingCursor(123, counts, (group,))
    text = cursor.dumps()
    assert len(text) < 6000
    assert LandingCursor.loads(text) == cursor


def test_release_merges_contiguous_days_of_ready_groups_with_stable_run_keys():
    a = PendingGroup("a", (D("2024-01-01"), D("2024-01-02")), ("ka",), 0.0, "why a")
    b = PendingGroup("b", (D("2024-01-03"), D("2024-01-07")), ("kb",), 0.0, "why b")
    c = PendingGroup("c", (D("2024-01-04"),), ("kc",), 0.0, "why c")
    cursor = LandingCursor(1, {}, (a, b, c))
    requests, rest = release(cursor, lambda g: g.id != "c")
    assert [(r.step, r.start, r.end) for r in requests] == [
        ("event_days", D("2024-01-01"), D("2024-01-03")),
        ("event_days", D("2024-01-07"), D("2024-01-07")),
    ]
    assert rest.pending == (c,)
    again, _ = release(cursor, lambda g: g.id != "c")
    assert [r.key for r in again] == [r.key for r in requests] and len(
        {r.key for r in requests}
    ) == 2
