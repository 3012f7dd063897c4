"""The one seam between the write path and the tests that stop or fail it.

Production code marks the moments a crash, I/O-fault or concurrency test needs to reach, and
nothing more: ``pause(point)`` (a pause or failure point: ``before_files``, ``before_commit``,
``publish_intent``, ...), ``io(operation)`` (each file, manifest and record operation, and each
engine commit: ``manifest.write``, ``commit``, ``commit.landed``, ...) and ``in_write_job``
(delta-spark's write job, which writes files and commits in one JVM call: a hook may add a task
to it that pauses inside the job).

A no-op in production: each call returns at once unless a hook is installed, and only tests
install one: in their own process (``install``), or in the processes they start, by setting
``BACKFILL_LAKE_PAUSE_DIR`` or ``BACKFILL_IOFAULT`` (``settings.seam_armed``), which
installs the tests' hook (``TEST_HOOK``, imported by its name: nothing here depends on it) when
a call first sees them.
"""

from __future__ import annotations

import datetime as dt
import importlib
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from backfill_assets.settings import seam_armed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TEST_HOOK = "backfill_assets.testing.hook"


class Hook(Protocol):
    def pause(self, point: str) -> None: ...

    def io(self, operation: str) -> None: ...

    def in_write_job(
        self, spark: SparkSession, df: DataFrame, column: str, dates: list[dt.date]
    ) -> DataFrame: ...


_hook: Hook | ModuleType | None = None


def install(hook: Hook | ModuleType) -> None:
    """Route this process's seam calls to ``hook`` (an object or a module with the ``Hook``
    functions) from now on."""
    global _hook
    _hook = hook


def _installed() -> Hook | ModuleType | None:
    if _hook is None and seam_armed():
        install(importlib.import_module(TEST_HOOK))
    return _hook


def pause(point: str) -> None:
    """A pause or failure point."""
    hook = _installed()
    if hook is not None:
        hook.pause(point)


def io(operation: str) -> None:
    """An I/O operation, called right before it (``commit.landed``: right after a commit)."""
    hook = _installed()
    if hook is not None:
        hook.io(operation)


def in_write_job(
    spark: SparkSession, df: DataFrame, column: str, dates: list[dt.date]
) -> DataFrame:
    """``df``, as the first attempt of delta-spark's write of ``dates`` is to write it."""
    hook = _installed()
    return df if hook is None else hook.in_write_job(spark, df, column, dates)
