"""Runless asset events, each stored in a millisecond of its own.

A correction's steps report what they did as runless events (``events.py``, ``pending.py``):
a partition's marker, its materialization after a cutover, the diff's observations, one per
partition, one after the other. Dagster's UI lists an asset's events on its Events page keyed
by run id, timestamp in milliseconds and kind, and keeps one event per key: two runless
observations stored in one millisecond show as one, and the other partition's latest event is
then an older one (on a fast machine, storing an event takes less than a millisecond). So each
event reported here is stored at least one millisecond after the one before it in this process
(the wait is at most a millisecond per event; a clock set back is waited for 10 ms at most).
"""

from __future__ import annotations

import threading
import time

import dagster as dg

# How long a clock set back by its owner is waited for.
MAX_WAIT_S = 0.01

_lock = threading.Lock()
_last_ms = 0  # the millisecond the last report here ended in


def _now_ms() -> int:
    return int(time.time() * 1000)  # as Dagster's GraphQL gives an event's timestamp


def report(
    instance: dg.DagsterInstance,
    event: dg.AssetMaterialization | dg.AssetObservation | dg.AssetCheckEvaluation,
) -> None:
    """``instance.report_runless_asset_event(event)``, in a millisecond no earlier report of
    this process was stored in."""
    global _last_ms
    with _lock:
        started = time.monotonic()
        while _now_ms() <= _last_ms and time.monotonic() - started < MAX_WAIT_S:
            time.sleep(0.0001)
        instance.report_runless_asset_event(event)
        _last_ms = _now_ms()
