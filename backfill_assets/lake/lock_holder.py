"""Who holds a lock, recorded so that another process can tell, without doubt, that it is gone.

A pid names a process only within its PID namespace and until it is reused: containers that
share a hostname but not a PID namespace each see the other's pids as absent (or as someone
else's). So a holder records, beside its host and pid, the inode of its PID namespace
(``/proc/self/ns/pid``), the kernel's boot id (``/proc/sys/kernel/random/boot_id``) and its
start time in clock ticks since that boot (``/proc/self/stat`` field 22).

``gone`` says a holder is gone only when the judge runs on the same boot, in the same PID
namespace, with a ``/proc`` that shows that namespace, and then the holder's pid is absent,
a zombie, or a later process's (another start time). Anything else (a field missing or
unreadable, another boot, another namespace) is doubt, and doubt means alive: its lock waits
for a hand release.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import socket
from typing import Any

PROC = "/proc"


def identity() -> dict[str, Any]:
    """This process, as ``gone`` judges it: host, pid, pid_ns, boot_id, started (None where
    this machine does not show it)."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_ns": _pid_ns(),
        "boot_id": _boot_id(),
        "started": _start_time("self"),
    }


def gone(found: dict[str, Any]) -> bool:
    """Whether the holder ``found`` records is proven gone (see the module docstring)."""
    pid = found.get("pid")
    here = identity()
    if not isinstance(pid, int) or pid <= 0 or not _proc_is_ours(here["pid"]):
        return False
    for field in ("pid_ns", "boot_id", "started"):
        if found.get(field) is None or here[field] is None:
            return False
    if found["pid_ns"] != here["pid_ns"] or found["boot_id"] != here["boot_id"]:
        return False
    try:
        with open(f"{PROC}/{pid}/stat") as stat:
            fields = _stat_fields(stat.read())
    except FileNotFoundError:
        return True  # no such process in this namespace
    except OSError:
        return False
    if fields is None:
        return False
    state, started = fields
    return state == "Z" or started != found["started"]  # a zombie holds nothing


def describe(found: dict[str, Any]) -> str:
    """The holder a lock records, in words, with its lease (see ``s3_lock``) where it has one."""
    text = (
        f"host {found.get('host')}, pid {found.get('pid')}, since {found.get('since')}, "
        f"for {found.get('what')}"
    )
    left = lease_left(found)
    if left is None:
        return text
    if left < 0:
        expires = found["expires_at"]
        return f"{text}; its lease ran out at {expires}, not renewed since: probably gone"
    return f"{text}; lease renewed until {found['expires_at']}"


def lease_left(found: dict[str, Any]) -> float | None:
    """Seconds until the lease the lock records runs out (negative: ran out); None when it
    records none."""
    expires = found.get("expires_at")
    if not isinstance(expires, str):
        return None
    try:
        return (dt.datetime.fromisoformat(expires) - dt.datetime.now(dt.UTC)).total_seconds()
    except (TypeError, ValueError):
        return None


def _proc_is_ours(pid: int) -> bool:
    """Whether ``/proc`` shows this process's PID namespace (a container may mount another's)."""
    try:
        return os.readlink(f"{PROC}/self") == str(pid)
    except OSError:
        return False


def _pid_ns() -> str | None:
    try:
        return os.readlink(f"{PROC}/self/ns/pid")  # "pid:[<inode>]"
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def _boot_id() -> str | None:
    try:
        with open(f"{PROC}/sys/kernel/random/boot_id") as src:
            return src.read().strip() or None
    except OSError:
        return None


def _start_time(pid: str) -> int | None:
    try:
        with open(f"{PROC}/{pid}/stat") as stat:
            fields = _stat_fields(stat.read())
    except OSError:
        return None
    return None if fields is None else fields[1]


def _stat_fields(text: str) -> tuple[str, int] | None:
    """(state, start time) from a ``/proc/<pid>/stat`` line: fields 3 and 22, counted after
    the command name, which is in parentheses and may hold spaces."""
    rest = text.rsplit(")", 1)[-1].split()
    try:
        return rest[0], int(rest[19])
    except (IndexError, ValueError):
        return None
