"""The lease of an operation's intent: whether a pending cutover, rollback, discard or undo is
being carried out now, by any process on any host, or was interrupted.

The process carrying out an intent holds it (``hold``): the intent names the process (its
machine and PID namespace, pid and start time) and carries a lease, ``heartbeat`` and
``expires`` (``LEASE`` later). The process renews the lease, saving the record, before each of
its steps (each table's commit, discard or restore, ``journal.renew``); a recovery takes the
intent over the same way before acting. The record is compare-and-swap (``registry.save``), so
once another process took an intent over, the first one's next renewal fails and it stops.

``held_elsewhere`` is what recovery asks before touching an intent:

- this very process's intent (an operation that failed and recovers at once) is its own;
- an intent of another process in this PID namespace is live while that process runs (its pid
  and start time) and its lease has not expired; a process gone is interrupted at once;
- an intent from another machine or container, whose pid means nothing here, is live until its
  lease expires, whatever host it came from: a live cutover is never taken for an interrupted one;
- an intent saved before leases existed is judged as then: live while its process runs on this
  host, for at most ``LEGACY_AT_MOST``.

A process stalled longer than the lease between a renewal and its commit (a pause of more than
``LEASE``) could still land that one commit after another process took its intent over; the
takeover then finds it in the log by its write id and does not commit it twice.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import socket

import psutil

LEASE = dt.timedelta(minutes=10)  # far longer than any one step of a correction's operation
LEGACY_AT_MOST = dt.timedelta(hours=1)


def clock() -> dt.datetime:
    """Now, in UTC: what leases are granted and judged by."""
    return dt.datetime.now(dt.UTC)


@functools.cache
def machine() -> str:
    """This machine's boot and PID namespace (``boot_id:pid-ns``): where a pid names the same
    process. Two containers sharing a host name, or two hosts of the same name, differ here."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as found:
            boot = found.read().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:  # no /proc: the host name is all there is
        return socket.gethostname()


def _started(pid: int) -> float | None:
    """The start time of process ``pid`` here, None when there is none."""
    try:
        return round(psutil.Process(pid).create_time(), 2)
    except psutil.NoSuchProcess:
        return None
    except psutil.Error:  # exists, but not ours to inspect
        return -1.0


def hold(pending: dict) -> None:
    """Make ``pending`` this process's, with a lease from now (not saved)."""
    at = clock()
    pending.update(
        host=socket.gethostname(),
        machine=machine(),
        pid=os.getpid(),
        started=_started(os.getpid()),
        heartbeat=at.isoformat(timespec="seconds"),
        expires=(at + LEASE).isoformat(timespec="seconds"),
    )


def held_elsewhere(pending: dict) -> bool:
    """Whether another process is carrying out ``pending`` now (see the module docstring)."""
    if "expires" not in pending:
        return _legacy_running_elsewhere(pending)
    here = pending.get("machine") == machine()
    if here and pending.get("pid") == os.getpid():
        return False
    if clock() >= dt.datetime.fromisoformat(pending["expires"]):
        return False
    if not here:
        return True
    started = _started(int(pending["pid"]))
    return started is not None and started in (pending.get("started"), -1.0)


def _legacy_running_elsewhere(pending: dict) -> bool:
    if pending.get("host") != socket.gethostname() or pending.get("pid") in (None, os.getpid()):
        return False
    if clock() - dt.datetime.fromisoformat(pending["at"]) > LEGACY_AT_MOST:
        return False
    return _started(int(pending["pid"])) is not None
