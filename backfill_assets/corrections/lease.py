"""The lease of an operation's intent: whether a pending cutover, rollback, discard or undo is
being carried out now, by any process on any host, or was interrupted.

The process carrying out an intent holds it (``hold``): the intent names the process as a
commit lock names its holder (``lake/lock_holder.py``: host, boot, PID namespace, pid and start
time) and carries a lease, ``heartbeat`` and
``expires`` (``LEASE`` later). The process renews the lease, saving the record, before each of
its steps (each table's commit, discard or restore, ``journal.renew``); a recovery takes the
intent over the same way before acting. The record is compare-and-swap (``registry.save``), so
once another process took an intent over, the first one's next renewal fails and it stops.

``held_elsewhere`` is what recovery asks before touching an intent:

- this very process's intent (an operation that failed and recovers at once) is its own;
- an intent of another process is live until its lease expires, unless that process is proven
  gone (``lock_holder.gone``: this boot and PID namespace, its pid absent, a zombie or reused),
  when it is interrupted at once; from another machine or container nothing is proven, so a
  live cutover is never taken for an interrupted one;
- an intent saved before leases existed is judged as then: live while its process runs on this
  host, for at most ``LEGACY_AT_MOST``.

A process stalled longer than the lease between a renewal and its commit (a pause of more than
``LEASE``) could still land that one commit after another process took its intent over; the
takeover then finds it in the log by its write id and does not commit it twice.
"""

from __future__ import annotations

import datetime as dt
import os
import socket

import psutil

import backfill_assets.lake.lock_holder as lock_holder

LEASE = dt.timedelta(minutes=10)  # far longer than any one step of a correction's operation
LEGACY_AT_MOST = dt.timedelta(hours=1)


def clock() -> dt.datetime:
    """Now, in UTC: what leases are granted and judged by."""
    return dt.datetime.now(dt.UTC)


def hold(pending: dict) -> None:
    """Make ``pending`` this process's (``lock_holder.identity``), with a lease from now (not
    saved)."""
    at = clock()
    pending.update(
        **lock_holder.identity(),
        heartbeat=at.isoformat(timespec="seconds"),
        expires=(at + LEASE).isoformat(timespec="seconds"),
    )


def held_elsewhere(pending: dict) -> bool:
    """Whether another process is carrying out ``pending`` now (see the module docstring)."""
    if "expires" not in pending:
        return _legacy_running_elsewhere(pending)
    me = lock_holder.identity()
    if all(pending.get(k) == me[k] for k in ("boot_id", "pid_ns", "pid", "started")):
        return False  # this very process
    if clock() >= dt.datetime.fromisoformat(pending["expires"]):
        return False
    return not lock_holder.gone(pending)


def _legacy_running_elsewhere(pending: dict) -> bool:
    if pending.get("host") != socket.gethostname() or pending.get("pid") in (None, os.getpid()):
        return False
    if clock() - dt.datetime.fromisoformat(pending["at"]) > LEGACY_AT_MOST:
        return False
    return psutil.pid_exists(int(pending["pid"]))
