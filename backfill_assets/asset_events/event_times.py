"""Each materialization and observation of an asset stored in a millisecond of its own.

Dagster's UI lists an asset's events on its Events page keyed by run id, timestamp in
milliseconds and kind, and keeps one event per key: two materializations (or observations)
stored by one run, or two runless ones, in the same millisecond show as one, and the other
partition's latest event on that page is then an older one. Storing an event can take less
than a millisecond: a year's ranged run stored two pairs of ``raw_fx_rates``'s materializations
in one millisecond each, and a correction's markers of consecutive days often share one.

So before each such event, ``Pace`` waits for a millisecond later than the one in which the
event before it had been stored: at most a millisecond per event, and nothing where other
events (a day's check evaluations) already stand between them. A clock set back is waited for
``MAX_WAIT_S`` at most.

- ``paced``: a step's events as it yields them (``publication.Publication.drain``); Dagster
  stores each yielded event before the step goes on, so the millisecond after the yield is
  one the event's own timestamp is not later than.
- ``report_runless``: ``report_runless_asset_event`` for the corrections' lifecycle, paced
  across the process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator

import dagster as dg

MAX_WAIT_S = 0.01

# The events the Events page lists, and keys by millisecond.
LISTED = (dg.AssetMaterialization, dg.AssetObservation)


def _now_ms() -> int:
    return int(time.time() * 1000)  # as Dagster's GraphQL gives an event's timestamp


class Pace:
    """The millisecond the last paced event was stored by, and the wait for a later one."""

    def __init__(self) -> None:
        self._last_ms = 0

    def wait(self) -> None:
        started = time.monotonic()
        while _now_ms() <= self._last_ms and time.monotonic() - started < MAX_WAIT_S:
            time.sleep(0.0001)

    def stored(self) -> None:
        self._last_ms = _now_ms()


def paced(events: Iterable, pace: Pace) -> Iterator:
    """``events``, each materialization and observation yielded in a millisecond after the one
    the previous was stored by (Dagster stores a yielded event before the generator resumes)."""
    for event in events:
        if isinstance(event, LISTED):
            pace.wait()
            yield event
            pace.stored()
        else:
            yield event


_runless = Pace()
_runless_lock = threading.Lock()


def report_runless(
    instance: dg.DagsterInstance,
    event: dg.AssetMaterialization | dg.AssetObservation | dg.AssetCheckEvaluation,
) -> None:
    """``instance.report_runless_asset_event(event)``, in a millisecond no earlier runless event
    of this process was stored in."""
    with _runless_lock:
        _runless.wait()
        instance.report_runless_asset_event(event)
        _runless.stored()
