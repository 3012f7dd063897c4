"""The race of a range backfill with new arrival folders and a rebuild beside it: the landing
zone it starts from, and the lake compared with the reference once the dust settles."""

from __future__ import annotations

import os
import re
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

from deltalake import DeltaTable

from backfill_assets.demo.generate import generate_feed
from backfill_assets_testkit.reference import Reference

FIRST, LAST = date(2024, 1, 1), date(2024, 1, 10)  # the range backfill's event days
LATENESS = 7
LAST_ARRIVAL = LAST + timedelta(days=LATENESS)
# The arrival folders that land while the range runs: their windows reach back to Jan 3.
LATE_ARRIVALS = (date(2024, 1, 10), date(2024, 1, 12), date(2024, 1, 13))
REBUILD = (date(2024, 1, 9), date(2024, 1, 10))  # the rebuild of the last days, beside it


RUN_LINE = re.compile(r"\] stg_orders\+fct_daily_revenue (\S+)\.\.(\S+) \.\.\.")


def rebuilt_days(output: str) -> set[date]:
    """The event days of the staging + fact runs a command's output announces."""
    found: set[date] = set()
    for start, end in RUN_LINE.findall(output):
        found.update(days(date.fromisoformat(start), date.fromisoformat(end)))
    return found


def days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def folder(landing: Path, arrival: date) -> Path:
    return landing / "orders" / f"arrival_date={arrival.isoformat()}"


def generate_and_hold_back(landing: Path, outbox: Path) -> None:
    """The feed of FIRST .. LAST as of LAST_ARRIVAL, its LATE_ARRIVALS moved aside."""
    generate_feed(landing, FIRST, LAST, orders_per_day=12, seed=11, last_arrival=LAST_ARRIVAL)
    outbox.mkdir(parents=True, exist_ok=True)
    for arrival in LATE_ARRIVALS:
        os.rename(folder(landing, arrival), outbox / folder(landing, arrival).name)


def land_late_arrivals(landing: Path, outbox: Path) -> None:
    """The held-back folders delivered whole (their files keep their older times)."""
    for arrival in LATE_ARRIVALS:
        os.rename(outbox / folder(landing, arrival).name, folder(landing, arrival))


def _rows(lake: Path, table: str) -> list[dict]:
    path = lake / table
    if not (path / "_delta_log").exists():
        return []
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def mismatches(landing: Path, lake: Path) -> dict[str, tuple]:
    """Per table, (in the lake only, in the reference only) where they differ, for the arrivals
    FIRST .. LAST_ARRIVAL and the event days FIRST .. LAST; empty when every table is equal."""
    reference = Reference(landing, LATENESS)
    arrivals = [a for a in reference.arrival_dates if FIRST <= a <= LAST_ARRIVAL]
    expected = reference.expected(days(FIRST, LAST))
    assert not expected.held, "the feed has a rate for every order"
    raw_expected = reference.raw_orders(arrivals)
    tables: dict[str, tuple[Counter, Counter]] = {
        "raw/orders": (
            Counter(
                (r["arrival_date"], r["source_file"], r["line_number"], r["payload"])
                for r in _rows(lake, "raw/orders")
            ),
            Counter(
                (r.arrival_date, r.source_file, r.line_number, r.payload) for r in raw_expected
            ),
        ),
        "quarantine/orders": (
            Counter(
                (r["arrival_date"], r["source_file"], r["line_number"], r["reason"])
                for r in _rows(lake, "quarantine/orders")
            ),
            Counter(
                (q.arrival_date, q.source_file, q.line_number, q.reason)
                for q in reference.quarantine(arrivals)
            ),
        ),
        "staging/orders": (
            Counter(
                (r["event_date"], r["order_id"], r["status"], r["amount_usd"])
                for r in _rows(lake, "staging/orders")
            ),
            Counter((s.event_date, s.order_id, s.status, s.amount_usd) for s in expected.staging),
        ),
        "fact/daily_revenue": (
            Counter(
                (r["event_date"], r["country"], r["orders"], r["paid_orders"], r["revenue_usd"])
                for r in _rows(lake, "fact/daily_revenue")
            ),
            Counter(
                (f.event_date, f.country, f.orders, f.paid_orders, f.revenue_usd)
                for f in expected.fact
            ),
        ),
    }
    return {
        name: (sorted(actual - wanted), sorted(wanted - actual))
        for name, (actual, wanted) in tables.items()
        if actual != wanted
    }


def differing_days(found: dict[str, tuple]) -> set[date]:
    """The event (or arrival) dates named by ``mismatches``' rows."""
    return {row[0] for only in found.values() for side in only for row in side}
