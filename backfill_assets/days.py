"""Calendar days: the one helper every layer uses to spell out an inclusive date range."""

from __future__ import annotations

from datetime import date, timedelta


def days_between(first: date, last: date) -> list[date]:
    """Every day from ``first`` to ``last``, both included; empty when ``last`` < ``first``."""
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]
