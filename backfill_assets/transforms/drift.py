"""Robust bands for the warning checks: a day's figure against the same figure over its trailing
days (median and MAD), in plain Python (no Spark, no Dagster).

A figure's band is ``median +- max(k * 1.4826 * MAD, floor)``: 1.4826 * MAD estimates the
standard deviation of normal data without letting the outliers it is meant to catch widen it.
The floor keeps a constant history (MAD 0) from warning on every small change: a relative
tolerance of the median for counts and revenue, an absolute one for shares. A share on a day
of few orders also carries its own sampling noise, sqrt(p (1 - p) / n) for a share p of n
orders: its band is at least k times that wide, so a quiet day's shares do not warn for
being quiet (its volume check says that).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from math import sqrt
from statistics import median

MAD_TO_SIGMA = 1.4826
RELATIVE_FLOOR = 0.05  # counts and revenue per order: at least +-5% of the median
SHARE_FLOOR = 0.02  # shares: at least +-2 percentage points


@dataclass(frozen=True)
class Band:
    median: float
    lower: float
    upper: float
    history_days: int

    def holds(self, value: float) -> bool:
        return self.lower <= value <= self.upper


def robust_band(values: list[float], k: float, floor: float) -> Band:
    """The band of ``values`` (not empty): median +- max(k * 1.4826 * MAD, floor)."""
    mid = median(values)
    mad = median(abs(v - mid) for v in values)
    half = max(k * MAD_TO_SIGMA * mad, floor)
    return Band(mid, mid - half, mid + half, len(values))


@dataclass(frozen=True)
class DayFigures:
    """What the warning checks watch on one day of one table."""

    rows: int  # staging rows; the fact's orders
    statuses: Mapping[str, int]
    currencies: Mapping[str, int] | None  # None where the table has no currency (the fact)
    paid_orders: int
    paid_revenue: Decimal = Decimal(0)

    def shares(self, of: str) -> dict[str, float]:
        counts = self.statuses if of == "status" else self.currencies or {}
        total = sum(counts.values())
        return {k: v / total for k, v in counts.items()} if total else {}

    @property
    def revenue_per_order(self) -> float | None:
        """Paid revenue per paid order (USD); None on a day without a paid order."""
        return float(self.paid_revenue) / self.paid_orders if self.paid_orders else None


def trailing(day: date, figures: Mapping[date, DayFigures], days: int) -> list[DayFigures]:
    """The figures of the days [day - days, day - 1] that have figures, oldest first."""
    window = [day - timedelta(days=n) for n in range(days, 0, -1)]
    return [figures[d] for d in window if d in figures]


@dataclass(frozen=True)
class Verdict:
    """One figure of one day against its band; ``band`` None: not enough history."""

    passed: bool
    actual: float | None
    band: Band | None
    worst_key: str | None = None  # for shares: the category furthest outside (or nearest the edge)
    actuals: dict[str, float] = field(default_factory=dict)
    out_of_band: dict[str, tuple[float, float, float]] = field(default_factory=dict)


def _enough(history: list, min_history: int) -> bool:
    return len(history) >= min_history


def row_count_verdict(
    today: DayFigures, history: list[DayFigures], k: float, min_history: int
) -> Verdict:
    if not _enough(history, min_history):
        return Verdict(True, today.rows, None)
    values = [float(h.rows) for h in history]
    band = robust_band(values, k, RELATIVE_FLOOR * abs(median(values)))
    return Verdict(band.holds(today.rows), today.rows, band)


def revenue_per_order_verdict(
    today: DayFigures, history: list[DayFigures], k: float, min_history: int
) -> Verdict:
    values = [v for v in (h.revenue_per_order for h in history) if v is not None]
    actual = today.revenue_per_order
    if actual is None or not _enough(values, min_history):
        return Verdict(True, actual, None)
    band = robust_band(values, k, RELATIVE_FLOOR * abs(median(values)))
    return Verdict(band.holds(actual), actual, band)


def share_verdict(
    today: DayFigures, history: list[DayFigures], of: str, k: float, min_history: int
) -> Verdict:
    """Every category's share against its band (a category absent on a day has share 0 that
    day); fails when any is outside. The verdict's band is the worst category's."""
    actuals = today.shares(of)
    past = [h.shares(of) for h in history if h.rows]
    if not actuals or not _enough(past, min_history):
        return Verdict(True, None, None, actuals=actuals)
    keys = sorted(set(actuals).union(*past))
    orders = sum((today.statuses if of == "status" else today.currencies or {}).values())
    worst: tuple[float, str, Band] | None = None
    outside = {}
    for key in keys:
        values = [p.get(key, 0.0) for p in past]
        typical = median(values)
        noise = k * sqrt(typical * (1 - typical) / orders)
        band = robust_band(values, k, max(SHARE_FLOOR, noise))
        value = actuals.get(key, 0.0)
        half = (band.upper - band.lower) / 2
        distance = abs(value - band.median) / half  # > 1: outside the band
        if worst is None or distance > worst[0]:
            worst = (distance, key, band)
        if not band.holds(value):
            outside[key] = (value, band.lower, band.upper)
    if worst is None:  # keys holds today's categories, so the loop ran: no verdict without one
        raise ValueError("share_verdict: no category to judge")
    _, key, band = worst
    return Verdict(not outside, actuals.get(key, 0.0), band, key, actuals, outside)


def staging_figures(stats: Mapping[date, dict]) -> dict[date, DayFigures]:
    """``transforms.audit.staging_stats``'s per-day figures as ``DayFigures``."""
    return {
        d: DayFigures(s["rows"], s["statuses"], s["currencies"], s["paid_orders"], s["paid_usd"])
        for d, s in stats.items()
        if s["rows"]
    }


def fact_figures(totals: Mapping[date, dict]) -> dict[date, DayFigures]:
    """``transforms.totals.fact_totals``'s per-day totals as ``DayFigures`` (no currency)."""
    return {
        d: DayFigures(
            t["orders"],
            {
                "placed": t["placed_orders"],
                "paid": t["paid_orders"],
                "cancelled": t["cancelled_orders"],
            },
            None,
            t["paid_orders"],
            t["revenue_usd"],
        )
        for d, t in totals.items()
        if t["orders"]
    }


def history_of(
    days: Iterable[date], figures: Mapping[date, DayFigures], held: set[date], trailing_days: int
) -> dict[date, list[DayFigures]]:
    """Per day of ``days``: its trailing figures, leaving out the days held (never published)."""
    usable = {d: f for d, f in figures.items() if d not in held}
    return {d: trailing(d, usable, trailing_days) for d in days}
