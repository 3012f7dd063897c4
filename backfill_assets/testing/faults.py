"""Fault injection for tests: pause points in the lake's write path (``seam.pause``, which the
tests' hook passes to ``pause_point``), so crash and concurrency tests can stop a writer at a
known moment, and retry tests can make it fail there as a transient I/O error would.

Inert unless ``BACKFILL_LAKE_PAUSE_DIR`` is set: until then a pause point costs one environment
look-up (``settings.fault_settings``) and does nothing. At a point named in
``BACKFILL_LAKE_PAUSE_AT`` (comma-separated: ``before_files``, ``mid_files``, ``after_files``,
``before_commit``, ``after_commit``; a publish's ``publish_read`` and ``publish_intent``, once it
read its manifest and once it saved its intent; a correction record's save's ``record_compared``,
once it compared the generation it read) the process creates ``<dir>/<point>.<n>.reached`` (n
counts visits of that point) and waits until ``<dir>/<point>.<n>.resume`` exists, or forever if
never resumed: the test then SIGKILLs it. ``before_commit`` pauses only a write's first commit
attempt, so a writer that lost a race retries without waiting again. Works in executors too,
since Python workers inherit the driver's environment.

``BACKFILL_LAKE_FAIL_AT`` names points that raise ``OSError`` instead, the first
``BACKFILL_LAKE_FAIL_TIMES`` (default 1) times any process reaches them, counted with
``<dir>/<point>.failed.<n>`` files so that a retry in another process sees the count.
"""

from __future__ import annotations

import os
import time

from backfill_assets.settings import fault_settings

POINTS = ("before_files", "mid_files", "after_files", "before_commit", "after_commit")
# Reached only by ``Staging.stage``, once its manifest is saved: between stage and publish.
STAGED = "staged"
_visits: dict[str, int] = {}


def armed(name: str) -> bool:
    """True when a test asked to pause or fail at ``name``: for hooks that cost something to set."""
    faults = fault_settings()
    return faults is not None and (name in faults.pause_at or name in faults.fail_at)


def claim_visit(name: str) -> int:
    """The next visit number of ``name`` in this process, for a pause that happens in another one
    (a Spark task): pass it to ``pause_point`` there."""
    _visits[name] = _visits.get(name, 0) + 1
    return _visits[name]


def forget_visits() -> None:
    """Count visits from 1 again: for a test that pauses in this process after another did."""
    _visits.clear()


def pause_point(name: str, visit: int | None = None) -> None:
    """Block at ``name`` (or fail there) if a test asked for it; otherwise return at once."""
    faults = fault_settings()
    if faults is None:
        return
    if name in faults.fail_at:
        _fail(faults.pause_dir, name, faults.fail_times)
    if name not in faults.pause_at:
        return
    if visit is None:
        visit = claim_visit(name)
    stem = os.path.join(faults.pause_dir, f"{name}.{visit}")
    with open(f"{stem}.reached", "w") as marker:
        marker.write(str(os.getpid()))
    deadline = time.monotonic() + 600
    while not os.path.exists(f"{stem}.resume"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"pause point {name} was never resumed")
        time.sleep(0.02)


def _fail(folder: str, name: str, times: int) -> None:
    for n in range(1, times + 1):
        try:
            with open(os.path.join(folder, f"{name}.failed.{n}"), "x") as marker:
                marker.write(str(os.getpid()))
        except FileExistsError:
            continue
        raise OSError(f"injected transient I/O failure at {name} ({n} of {times})")
