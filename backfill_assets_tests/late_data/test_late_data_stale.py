"""The stale event day rule in plain Python: storage ids in, stale days and their requests out."""

from __future__ import annotations

from datetime import date, timedelta

from backfill_assets.late_data.stale import (
    EventDayLog,
    Windows,
    since_attempt,
    stale_days,
    stale_requests,
)

D = date.fromisoformat
W = Windows(D("2024-01-01"), lateness=7, rate_max_age=7)
LAST = D("2024-03-01")


def log(
    attempted: dict[str, int],
    published: dict[str, int] | None = None,
    orders: dict[str, int] | None = None,
    rates: dict[str, int] | None = None,
    orders_outside: dict[str, int] | None = None,
    rates_outside: dict[str, int] | None = None,
) -> EventDayLog:
    def dated(ids: dict[str, int] | None) -> dict[date, int]:
        return {D(k): v for k, v in (ids or {}).items()}

    return EventDayLog(
        dated(attempted),
        dated(published),
        {"orders": dated(orders), "fx_rates": dated(rates)},
        {"orders": dated(orders_outside), "fx_rates": dated(rates_outside)},
    )


def days(found) -> list[str]:
    return [s.day.isoformat() for s in found]


def test_windows_are_the_arrivals_and_rate_dates_an_event_day_reads():
    inputs = W.inputs(D("2024-01-05"))
    assert inputs["orders"] == [D("2024-01-05") + timedelta(days=i) for i in range(8)]
    assert inputs["fx_rates"] == [D("2024-01-01") + timedelta(days=i) for i in range(5)]  # first
    assert W.readers("orders", D("2024-01-10"), D("2024-01-12")) == (
        D("2024-01-03"),
        D("2024-01-12"),
    )
    assert W.readers("fx_rates", D("2024-01-10"), D("2024-01-10")) == (
        D("2024-01-10"),
        D("2024-01-17"),
    )


def test_a_held_day_is_stale_once_any_raw_of_its_window_is_built_after_its_attempt():
    held = log({"2024-01-03": 10}, orders={"2024-01-10": 20})  # the lane's build counts too
    found = stale_days(held, W, LAST)
    assert days(found) == ["2024-01-03"]
    assert (
        found[0].held
        and found[0].newest == 20
        and found[0].inputs == (("orders", D("2024-01-10")),)
    )


def test_a_held_day_whose_window_was_built_before_its_attempt_is_not_stale():
    assert stale_days(log({"2024-01-03": 30}, orders={"2024-01-10": 20}), W, LAST) == []


def test_raw_outside_the_window_does_not_make_a_day_stale():
    after_window = log({"2024-01-03": 10}, orders={"2024-01-11": 20}, rates={"2024-01-04": 20})
    assert stale_days(after_window, W, LAST) == []


def test_a_published_day_is_stale_only_for_a_build_outside_the_late_data_lane():
    lane_only = log({"2024-01-03": 10}, {"2024-01-03": 11}, orders={"2024-01-10": 20})
    assert stale_days(lane_only, W, LAST) == []
    backfill = log(
        {"2024-01-03": 10},
        {"2024-01-03": 11},
        orders={"2024-01-10": 20},
        orders_outside={"2024-01-10": 15},
    )
    found = stale_days(backfill, W, LAST)
    assert days(found) == ["2024-01-03"] and not found[0].held and found[0].newest == 15


def test_a_rate_built_after_the_attempt_makes_the_days_it_reaches_stale():
    held_days = log(
        {"2024-01-08": 10, "2024-01-16": 10, "2024-01-17": 10}, rates={"2024-01-09": 20}
    )
    assert days(stale_days(held_days, W, LAST)) == ["2024-01-16"]


def test_a_publication_after_a_held_attempt_means_published():
    # attempt 10 held, a re-execution (attempt 12) published at 13: the build at 11 was read
    assert (
        stale_days(log({"2024-01-03": 12}, {"2024-01-03": 13}, {"2024-01-05": 11}), W, LAST) == []
    )


def test_skipped_days_and_days_beyond_the_last_partition_are_left_alone():
    many = log({"2024-01-03": 10, "2024-01-04": 10}, orders={"2024-01-10": 20})
    assert days(stale_days(many, W, LAST, skip={D("2024-01-03")})) == ["2024-01-04"]
    assert days(stale_days(many, W, D("2024-01-03"))) == ["2024-01-03"]


def test_a_day_never_attempted_is_not_stale():
    assert stale_days(log({}, orders={"2024-01-10": 20}), W, LAST) == []


def test_since_attempt_names_the_oldest_attempt_reading_each_partition_built_since():
    found = since_attempt(
        log({"2024-01-03": 10, "2024-01-05": 14, "2024-01-20": 30}, orders={"2024-01-10": 20}), W
    )
    assert found == {"orders": {D("2024-01-10"): 10}}


def test_contiguous_stale_days_are_one_request_keyed_by_days_and_newest_build():
    found = stale_days(
        log(
            {"2024-01-03": 10, "2024-01-04": 10, "2024-01-06": 10},
            orders={"2024-01-10": 20, "2024-01-11": 25},
        ),
        W,
        LAST,
    )
    requests = stale_requests(found)
    assert [(r.step, str(r.start), str(r.end), r.key) for r in requests] == [
        ("event_days", "2024-01-03", "2024-01-04", "event_days:2024-01-03..2024-01-04:stale:25"),
        ("event_days", "2024-01-06", "2024-01-06", "event_days:2024-01-06..2024-01-06:stale:25"),
    ]
    assert "orders 2024-01-10..2024-01-11" in requests[0].why
    assert stale_requests(found) == requests  # evaluated again: the same keys
