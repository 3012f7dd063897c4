"""The I/O faults: every file, manifest and record operation of the lake and the corrections, and
every engine commit, first calls ``seam.io(name)``, which the tests' hook passes to ``io_step``.

Inert until armed (one environment look-up, or one check of this module's plan). Armed, the
seam counts the operations of this process and, at the Nth:

- ``count``: does nothing (the harness learns how many operations a path has);
- ``error:N``: raises ``OSError(EIO)``, as a full disk or a failing device would;
- ``kill:N``: SIGKILLs the process, as a crash or the OOM killer would: no ``finally`` runs.

Every operation's name is appended to the log file when one is given, with ``!`` marking the
one that failed. ``arm`` plans for this process (the harness's error sweep); the
``BACKFILL_IOFAULT`` variable plans for a child process (the kill sweep). Names: ``<what>.<op>``,
e.g. ``manifest.write``, ``file.delete``, ``commit`` (before an engine's commit call) and
``commit.landed`` (just after it returned: a fault there is a commit that raised after it
landed).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass

from backfill_assets import seam
from backfill_assets.settings import iofault_log, iofault_plan

MODES = ("count", "error", "kill")


@dataclass
class Plan:
    mode: str
    at: int = 0  # the operation to fail, counted from 1 (0: none)
    log: str = ""
    done: int = 0  # operations seen so far

    @classmethod
    def parse(cls, text: str, log: str = "") -> Plan:
        mode, _, at = text.partition(":")
        if mode not in MODES or (mode != "count" and not at.isdigit()):
            raise ValueError(f"BACKFILL_IOFAULT must be count, error:N or kill:N, got {text!r}")
        return cls(mode, int(at or 0), log)


_plan: Plan | None = None
_from_env: tuple[str, Plan | None] = ("", None)


def _current() -> Plan | None:
    global _from_env
    if _plan is not None:
        return _plan
    text = iofault_plan()
    if not text:
        return None
    if _from_env[0] != text:
        _from_env = (text, Plan.parse(text, iofault_log()))
    return _from_env[1]


@contextlib.contextmanager
def arm(mode: str, at: int = 0, log: str = "") -> Iterator[Plan]:
    """Plan faults for this process while the block runs; the plan counts what it saw."""
    global _plan
    seam.install(importlib.import_module(seam.TEST_HOOK))  # the hook routes seam.io here
    plan = Plan.parse(f"{mode}:{at}" if mode != "count" else mode, log)
    previous, _plan = _plan, plan
    try:
        yield plan
    finally:
        _plan = previous


def io_step(name: str) -> None:
    """Mark one I/O operation; fails it, or kills the process there, when planned."""
    plan = _current()
    if plan is None:
        return
    plan.done += 1
    hit = plan.mode != "count" and plan.done == plan.at
    if plan.log:
        with open(plan.log, "a", encoding="utf-8") as out:
            out.write(f"{plan.done} {name}{' !' if hit else ''}\n")
            out.flush()
            os.fsync(out.fileno())
    if not hit:
        return
    if plan.mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise OSError(errno.EIO, f"injected I/O error at operation {plan.done} ({name})")
