"""Calendar days and months: how every layer spells out an inclusive range of partitions, and
the last day that is a partition."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta


def days_between(first: date, last: date) -> list[date]:
    """Every day from ``first`` to ``last``, both included; empty when ``last`` < ``first``."""
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def last_partition() -> date:
    """Daily partitions end with yesterday (UTC): today is not complete yet."""
    return datetime.now(UTC).date() - timedelta(days=1)


def next_month(day: date) -> date:
    """The first day of the month after ``day``'s."""
    return (day.replace(day=28) + timedelta(days=4)).replace(day=1)


def months_between(first: date, last: date) -> list[date]:
    """The first day of every month from ``first``'s to ``last``'s, both included."""
    months, month = [], first.replace(day=1)
    while month <= last:
        months.append(month)
        month = next_month(month)
    return months
