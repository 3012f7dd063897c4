"""The e2e scenario: five event days to backfill from the UI, the middle one lacking a EUR rate."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

from backfill_assets.demo.generate import generate_feed, remove_rates

FEED_START, FEED_END = date(2024, 1, 1), date(2024, 1, 12)
RANGE_START, RANGE_END = date(2024, 1, 8), date(2024, 1, 12)
# Its EUR rates of Jan 3..10 are removed: Jan 8 and 9 still find Jan 1 or 2 within the
# seven days back, Jan 11 and 12 have their own, so exactly this day is held.
HELD = date(2024, 1, 10)
DAYS = [RANGE_START + timedelta(days=i) for i in range((RANGE_END - RANGE_START).days + 1)]
GOOD = [d for d in DAYS if d != HELD]
LATENESS = 7
PARTITION_START = FEED_START
# What the UI's partition text field is given: Dagster's own range syntax.
RANGE_TEXT = f"[{RANGE_START.isoformat()}...{RANGE_END.isoformat()}]"


def write_landing(landing: Path) -> None:
    generate_feed(
        landing, FEED_START, FEED_END, orders_per_day=20, seed=23, max_lateness_days=LATENESS
    )
    remove_rates(landing, "EUR", HELD - timedelta(days=7), HELD)


def raw_ranges(landed_arrivals: list[date]) -> tuple[tuple[date, date], tuple[date, date]]:
    """Raw ranges staging of DAYS reads: landed arrivals D .. D + lateness, and rates D - 7 .. D."""
    last = max(d for d in landed_arrivals if d <= RANGE_END + timedelta(days=LATENESS))
    rates_from = max(RANGE_START - timedelta(days=7), PARTITION_START)
    return (RANGE_START, last), (rates_from, RANGE_END)
