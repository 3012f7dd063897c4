"""Calendar days and months: how every layer spells out an inclusive range of partitions, the
rate dates raw_fx_rates' partitions hold, the last day that is a partition and the last month
that is one."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta


def days_between(first: date, last: date) -> list[date]:
    """Every day from ``first`` to ``last``, both included; empty when ``last`` < ``first``."""
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def rate_dates(partitions: list[date], first_partition: date, window_days: int) -> list[date]:
    """The rate dates raw_fx_rates' ``partitions`` hold: each partition its own, and the first
    partition also the ``window_days`` before it, whose rates its first days may take (the
    contract's D - R <= 7 days); no other partition reaches them."""
    lead_in = (
        days_between(first_partition - timedelta(days=window_days), first_partition)
        if first_partition in partitions
        else []
    )
    return sorted(set(partitions) | set(lead_in))


def rate_partition(rate_date: date, first_partition: date) -> date:
    """The raw_fx_rates partition that holds ``rate_date`` (see ``rate_dates``)."""
    return max(rate_date, first_partition)


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


def month_of(day: date) -> date:
    return day.replace(day=1)


def days_of_month(month: date, first_partition: date) -> list[date]:
    """The daily partitions of ``month``: its days from the first partition to the last."""
    first = max(month, first_partition)
    last = min(next_month(month) - timedelta(days=1), last_partition())
    return days_between(first, last)


def last_complete_month() -> date:
    """The monthly report's last partition: the month before today's (UTC), whose days are all
    partitions."""
    return month_of(month_of(datetime.now(UTC).date()) - timedelta(days=1))
