"""The late-data cursor: what the landing zone held at the last detection, and the event days
still waiting for the raw partitions they read.

It is stored by Dagster with every sensor tick, so it is kept small: no file names. Per dataset
it holds one integer per partition folder (how many complete files it had, -1 for no folder),
which over three years is some 4 KB, plus a single high-water mark: files whose change time
(``st_ctime_ns``) is before it were taken into account, files at or after it are new. The
counts catch what the times cannot explain (see ``scan.py``); ``counted`` is when every
folder's files were last counted (a cursor without it is counted on its next detection).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import date, timedelta

from backfill_assets.days import days_between

VERSION = 1


def day_ranges(days: Iterable[date]) -> list[tuple[date, date]]:
    """Contiguous runs of days, in order: [1st, 2nd, 4th] -> [(1st, 2nd), (4th, 4th)]."""
    ranges: list[tuple[date, date]] = []
    for day in sorted(set(days)):
        if ranges and day == ranges[-1][1] + timedelta(days=1):
            ranges[-1] = (ranges[-1][0], day)
        else:
            ranges.append((day, day))
    return ranges


def _expand(ranges: list[list[str]]) -> tuple[date, ...]:
    days: list[date] = []
    for first, last in ranges:
        start, end = date.fromisoformat(first), date.fromisoformat(last)
        days += days_between(start, end)
    return tuple(days)


@dataclass(frozen=True)
class PendingGroup:
    """Event days found by one detection, to be rebuilt once the raw runs it requested succeeded.

    ``awaits`` are the request keys of those raw runs (tagged on them), ``since`` the detection
    time in epoch seconds, ``why`` a one-line account for logs, run tags and ``catch-up``.
    """

    id: str
    days: tuple[date, ...]
    awaits: tuple[str, ...]
    since: float
    why: str

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "days": [[a.isoformat(), b.isoformat()] for a, b in day_ranges(self.days)],
            "awaits": list(self.awaits),
            "since": round(self.since, 3),
            "why": self.why,
        }

    @classmethod
    def from_json(cls, data: dict) -> PendingGroup:
        return cls(
            data["id"],
            _expand(data["days"]),
            tuple(data["awaits"]),
            float(data["since"]),
            data.get("why", ""),
        )


@dataclass(frozen=True)
class LandingCursor:
    """High-water mark, complete-file count per partition folder, and pending event days."""

    high_water_ns: int
    counts: dict[str, dict[date, int]] = field(default_factory=dict)
    pending: tuple[PendingGroup, ...] = ()
    counted_ns: int = 0  # when every folder's files were last counted (see ``scan.py``)

    def with_pending(self, pending: Iterable[PendingGroup]) -> LandingCursor:
        return replace(self, pending=tuple(pending))

    def dumps(self) -> str:
        counts = {}
        for dataset, by_day in sorted(self.counts.items()):
            if not by_day:
                continue
            first, last = min(by_day), max(by_day)
            span = (last - first).days + 1
            counts[dataset] = [
                first.isoformat(),
                [by_day.get(first + timedelta(days=i), -1) for i in range(span)],
            ]
        return json.dumps(
            {
                "v": VERSION,
                "hw": self.high_water_ns,
                "counted": self.counted_ns,
                "counts": counts,
                "pending": [g.to_json() for g in self.pending],
            },
            separators=(",", ":"),
        )

    @classmethod
    def loads(cls, text: str | None) -> LandingCursor | None:
        """The cursor, or None for no cursor (a cold start); a foreign cursor is an error."""
        if not text:
            return None
        foreign = f"not a late-data cursor of version {VERSION}: {text[:80]!r}"
        try:
            data = json.loads(text)
        except ValueError:
            raise ValueError(foreign) from None
        if not isinstance(data, dict) or data.get("v") != VERSION:
            raise ValueError(foreign)
        # Version 1 by its tag, yet fields missing or of another shape: someone else's text.
        try:
            return cls._from_json(data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{foreign} ({type(exc).__name__}: {exc})") from exc

    @classmethod
    def _from_json(cls, data: dict) -> LandingCursor:
        counts: dict[str, dict[date, int]] = {}
        for dataset, (first, values) in data["counts"].items():
            start = date.fromisoformat(first)
            counts[dataset] = {start + timedelta(days=i): n for i, n in enumerate(values) if n >= 0}
        pending = tuple(PendingGroup.from_json(g) for g in data["pending"])
        return cls(int(data["hw"]), counts, pending, int(data.get("counted", 0)))
