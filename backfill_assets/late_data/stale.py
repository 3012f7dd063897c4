"""Stale event days: days whose raw inputs were built again after their last staging attempt.

Detection by files (``detect``) asks which landed files are new; this asks the event log what
was built after what, so a raw rebuild whose event days nobody rebuilt (a ``backfill`` of a few
days rebuilds the raw of their whole window, the arrivals of the days before them included) is
never counted as handled. It compares Dagster storage ids, which grow with every event stored,
never clocks. No Dagster API here: ``automation/state.py`` reads the ids. The same ids say
which days of customer LTV, a cumulative table, are stale (``first_stale``).

Event day D reads the raw_orders arrivals D .. D + lateness and the raw_fx_rates rate dates
D - rate window .. D. Its *attempt* is its latest planned materialization of stg_orders (Dagster
stores one per partition when a run that is to build it is created). D is stale when:

- its last attempt did not publish it (held, or its run failed), and a raw partition of its
  window was built after that attempt, by any run: a day held because its window was
  incomplete, or lacked a rate, is built again once its inputs land in raw;
- its last attempt published it, and a raw partition of its window was built after that
  attempt by a run outside the late-data lane (a backfill, the daily refresh, the UI). The
  lane's raw runs need not count: their pending groups rebuild exactly the days their new
  files change, and a published day's window held every landed file when it was built.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, timedelta

from backfill_assets.catalog import EVENT_DAYS_STEP, FX_RATES_DATASET, ORDERS_DATASET
from backfill_assets.days import days_between
from backfill_assets.late_data.cursor import day_ranges
from backfill_assets.late_data.detect import Request, shorten
from backfill_assets.settings import Settings

STALE = "stale"


@dataclass(frozen=True)
class Windows:
    """The partitions' reach: the first partition, lateness and rate window in days."""

    first: date
    lateness: int
    rate_max_age: int

    @classmethod
    def of(cls, settings: Settings) -> Windows:
        """The windows the settings give: start date, lateness and rate age."""
        return cls(settings.start_date, settings.max_lateness_days, settings.rate_max_age_days)

    def inputs(self, day: date) -> dict[str, list[date]]:
        """The raw partitions event day ``day`` reads, per dataset."""
        rates_from = max(day - timedelta(days=self.rate_max_age), self.first)
        return {
            ORDERS_DATASET: [day + timedelta(days=i) for i in range(self.lateness + 1)],
            FX_RATES_DATASET: [
                rates_from + timedelta(days=i) for i in range((day - rates_from).days + 1)
            ],
        }

    def readers(self, dataset: str, start: date, end: date) -> tuple[date, date]:
        """The event days that read raw partitions ``start .. end`` of ``dataset``."""
        if dataset == ORDERS_DATASET:
            return max(start - timedelta(days=self.lateness), self.first), end
        return start, end + timedelta(days=self.rate_max_age)


@dataclass(frozen=True)
class EventDayLog:
    """Latest storage ids from the event log: per event day, its latest staging attempt
    (planned materialization) and publication; per dataset and raw partition, its latest
    materialization by any run, and by a run outside the late-data lane."""

    attempted: Mapping[date, int]
    published: Mapping[date, int]
    built: Mapping[str, Mapping[date, int]]
    built_outside_lane: Mapping[str, Mapping[date, int]]


@dataclass(frozen=True)
class StaleDay:
    day: date
    attempt: int  # the storage id of its last attempt
    newest: int  # the newest raw materialization of its window that makes it stale
    inputs: tuple[tuple[str, date], ...]  # (dataset, raw partition) built after the attempt
    held: bool  # its last attempt did not publish it


def _attempt(log: EventDayLog, day: date) -> int | None:
    # A publication without a planned event (reported outside a run) is an attempt too.
    return log.attempted.get(day, log.published.get(day))


def since_attempt(log: EventDayLog, windows: Windows) -> dict[str, dict[date, int]]:
    """Per dataset, the raw partitions built after the attempt of a day that reads them, each
    with the oldest such attempt: where a run outside the lane must be looked for."""
    found: dict[str, dict[date, int]] = {}
    for day in log.attempted.keys() | log.published.keys():
        attempt = _attempt(log, day)
        assert attempt is not None
        for dataset, partitions in windows.inputs(day).items():
            built = log.built.get(dataset, {})
            for partition in partitions:
                if built.get(partition, -1) > attempt:
                    mine = found.setdefault(dataset, {})
                    mine[partition] = min(mine.get(partition, attempt), attempt)
    return found


def stale_days(
    log: EventDayLog, windows: Windows, last: date, skip: Container[date] = ()
) -> list[StaleDay]:
    """The stale event days up to ``last`` (see the module docstring), but those in ``skip``
    (already pending, or in the hands of a run not yet ended)."""
    stale = []
    for day in sorted(log.attempted.keys() | log.published.keys()):
        attempt = _attempt(log, day)
        if attempt is None or day in skip or not windows.first <= day <= last:
            continue
        held = log.published.get(day, -1) < attempt
        builds = log.built if held else log.built_outside_lane
        after = [
            (built, (dataset, partition))
            for dataset, partitions in windows.inputs(day).items()
            for partition in partitions
            if (built := builds.get(dataset, {}).get(partition, -1)) > attempt
        ]
        if after:
            newest = max(b for b, _ in after)
            stale.append(StaleDay(day, attempt, newest, tuple(w for _, w in sorted(after)), held))
    return stale


def _spans(stale: Iterable[StaleDay]) -> str:
    """``orders 2024-01-10..2024-01-12, fx_rates 2024-01-08``: the inputs built after."""
    built: dict[str, set[date]] = {}
    for s in stale:
        for dataset, day in s.inputs:
            built.setdefault(dataset, set()).add(day)
    return ", ".join(
        f"{dataset} " + ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in day_ranges(days))
        for dataset, days in sorted(built.items())
    )


def stale_requests(stale: Iterable[StaleDay]) -> list[Request]:
    """Staging + fact of the stale days, contiguous days as one ranged run. A run key names the
    days and the newest raw build that made them stale: evaluated again before the run exists,
    the same key (Dagster launches nothing twice); once the run exists its planned events are
    newer than that build, so only a later build makes the days stale again, under a new key."""
    by_day = {s.day: s for s in stale}
    requests = []
    for a, b in day_ranges(by_day):
        mine = [s for d, s in sorted(by_day.items()) if a <= d <= b]
        newest = max(s.newest for s in mine)
        held = sum(1 for s in mine if s.held)
        why = shorten(
            [
                f"{STALE}: {len(mine)} event day(s), {held} of them held, whose raw inputs were "
                f"built after their last staging attempt: {_spans(mine)}"
            ]
        )
        key = f"{EVENT_DAYS_STEP}:{a}..{b}:{STALE}:{newest}"
        requests.append(Request(EVENT_DAYS_STEP, a, b, key, why))
    return requests


def first_stale(
    first: date, last: date, staging: dict[date, int], ltv: dict[date, int]
) -> date | None:
    """The first day of [first, last] whose LTV is not published, or was published before the
    staging of a day up to it (storage ids of their latest materializations); None if none."""
    newest_staging = 0
    for day in days_between(first, last):
        newest_staging = max(newest_staging, staging.get(day, 0))
        if day not in ltv or ltv[day] < newest_staging:
            return day
    return None


def first_unpublished(first: date, last: date, published: Container[date]) -> date | None:
    return next((d for d in days_between(first, last) if d not in published), None)
