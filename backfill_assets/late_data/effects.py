"""Which event days new landed files change: read only the new files, in plain Python.

Order files: the UTC event date of every record that is a JSON object with an ISO 8601
``event_time`` carrying a zone, when that date lies in the arrival's lateness window
(arrival - lateness .. arrival). Records from further back are counted (the raw layer puts
them in quarantine as ``too_late``) and change no day. The other validation rules are not
repeated here: a record rejected for another reason can at worst make its day rebuild for
nothing, which is safe, whereas a second copy of every rule could drift from the pipeline's.

Rate files: a rate listed at R for currency C is the rate of C on the days R .. R + 7 (the
settings' rate window), up to
the next rate date that lists C, and only if the new file is the one that wins at R (within a
rate date, the file whose name sorts last).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from backfill_assets.catalog import FX_RATES_DATASET
from backfill_assets.landing.layout import DATASETS, FX_HEADER, Root, join, open_landed
from backfill_assets.late_data.scan import LandedFile, complete_files

_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::\d{2}(?:\.\d{1,9})?)?(?:Z|([+-])(\d{2}):(\d{2}))"
)
_CURRENCY = re.compile(r"[A-Z]{3}")
_RATE = re.compile(r"\d{1,6}(\.\d{1,8})?")


@dataclass(frozen=True)
class OrderEffect:
    """The event days one order file changes, and how many of its records came too late."""

    days: frozenset[date]
    too_late: int


def event_date(text: object) -> date | None:
    """The UTC date of an ISO 8601 date-time with a zone (``Z`` or ``±HH:MM``), else None."""
    if not isinstance(text, str):
        return None
    m = _TIMESTAMP.fullmatch(text)
    if m is None:
        return None
    year, month, day, hour, minute, sign, off_h, off_m = m.groups()
    try:
        local = datetime(int(year), int(month), int(day), int(hour), int(minute), tzinfo=UTC)
        offset = timedelta(hours=int(off_h or 0), minutes=int(off_m or 0))
        return (local + offset if sign == "-" else local - offset).date()
    except (ValueError, OverflowError):
        return None


def _lines(path: Root) -> Iterable[str]:
    with open_landed(path) as src:
        text = src.read().decode("utf-8", errors="replace")
    for line in text.split("\n"):
        if line.strip():
            yield line.removesuffix("\r")


def order_file_effect(path: Root, arrival: date, first: date, lateness: int) -> OrderEffect:
    """The event days (from ``first``, within ``lateness`` of ``arrival``) its records carry."""
    days: set[date] = set()
    too_late = 0
    for line in _lines(path):
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            continue
        day = event_date(record.get("event_time")) if isinstance(record, dict) else None
        if day is None or day > arrival:
            continue
        if (arrival - day).days > lateness:
            too_late += 1
        elif day >= first:
            days.add(day)
    return OrderEffect(frozenset(days), too_late)


def rate_file_currencies(path: Root) -> set[str]:
    """The currencies a rate file lists validly (USD, always 1, excepted)."""
    lines = list(_lines(path))
    if not lines or lines[0] != FX_HEADER:
        return set()
    listed = set()
    for line in lines[1:]:
        parts = line.split(",")
        if (
            len(parts) == 2
            and _CURRENCY.fullmatch(parts[0])
            and _RATE.fullmatch(parts[1])
            and float(parts[1]) > 0
            and parts[0] != "USD"
        ):
            listed.add(parts[0])
    return listed


class RateFolders:
    """The currencies each rate file lists, read once per detection; a rate listed at R is the
    rate of R .. R + ``max_age_days`` (the contract's as-of window, from ``Settings``)."""

    def __init__(self, root: Root, max_age_days: int) -> None:
        self.root = root
        self.max_age_days = max_age_days
        self._files: dict[date, list[LandedFile]] = {}
        self._listed: dict[str, set[str]] = {}

    def files(self, day: date) -> list[LandedFile]:
        if day not in self._files:
            ds = DATASETS[FX_RATES_DATASET]
            self._files[day] = complete_files(self.root, ds.relative_folder(day), ds)
        return self._files[day]

    def listed(self, file: LandedFile) -> set[str]:
        if file.path not in self._listed:
            self._listed[file.path] = rate_file_currencies(join(self.root, file.path))
        return self._listed[file.path]

    def lists(self, day: date, currency: str) -> bool:
        return any(currency in self.listed(f) for f in self.files(day))


def rate_effects(
    folders: RateFolders, rate_date: date, new_paths: set[str], first: date, last: date
) -> dict[str, tuple[str, tuple[date, ...]]]:
    """Per currency whose rate at ``rate_date`` a new file sets: (that file, the event days
    whose rate it now is)."""
    winners: dict[str, str] = {}
    for file in folders.files(rate_date):  # sorted by name: the last listing a currency wins
        for currency in folders.listed(file):
            winners[currency] = file.path
    effects = {}
    for currency, path in sorted(winners.items()):
        if path not in new_paths:
            continue
        end = min(rate_date + timedelta(days=folders.max_age_days), last)
        for later in range(1, (end - rate_date).days + 1):
            if folders.lists(rate_date + timedelta(days=later), currency):
                end = rate_date + timedelta(days=later - 1)
                break
        span = (end - rate_date).days + 1
        days = tuple(d for d in (rate_date + timedelta(days=i) for i in range(span)) if d >= first)
        if days:
            effects[currency] = (path, days)
    return effects
