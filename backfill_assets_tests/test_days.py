"""Days and months of the partitions: the monthly report's last partition is the one Dagster's
monthly partitioning names, and a month's daily partitions are its calendar days within the
first and last daily partition."""

from __future__ import annotations

import calendar
from datetime import UTC, date, datetime, timedelta

import pytest

from backfill_assets.days import days_of_month, last_complete_month, last_partition
from backfill_assets.defs.partitions import monthly_partitions
from backfill_assets.settings import Settings


def test_the_last_complete_month_is_dagsters_last_monthly_partition():
    settings = Settings.from_env({"BACKFILL_START_DATE": "2020-01-15"})
    dagsters = monthly_partitions(settings).get_last_partition_key()
    assert dagsters is not None
    assert last_complete_month() == date.fromisoformat(dagsters)


@pytest.mark.parametrize(
    ("month", "first", "expected"),
    [
        (date(2024, 2, 1), date(2024, 1, 1), (date(2024, 2, 1), 29)),  # a leap February, whole
        (date(2023, 2, 1), date(2023, 1, 1), (date(2023, 2, 1), 28)),
        (date(2024, 3, 1), date(2024, 3, 10), (date(2024, 3, 10), 22)),  # from the first partition
        (date(2024, 1, 1), date(2024, 2, 1), (None, 0)),  # a month before the first partition
    ],
)
def test_a_months_daily_partitions_run_from_the_first_partition_to_its_last_day(
    month, first, expected
):
    days = days_of_month(month, first)
    start, count = expected
    assert days == [start + timedelta(days=i) for i in range(count)]
    if count:
        assert days[-1] == month.replace(day=calendar.monthrange(month.year, month.month)[1])


def test_the_current_month_ends_with_the_last_daily_partition():
    today = datetime.now(UTC).date()
    days = days_of_month(today.replace(day=1), date(2020, 1, 1))
    assert days == [today.replace(day=d) for d in range(1, today.day)]
    assert not days or days[-1] == last_partition()
