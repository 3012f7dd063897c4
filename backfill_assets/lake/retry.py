"""The commit-retry loop every write of the lake runs, on either engine: ``committing``.

A write commits at the version after the snapshot it read; when another writer committed first,
the commit fails and the write is tried again from a fresh snapshot (a lost race). Before an
error is taken for a lost race, the writer looks for its own commit: an engine writes its
checkpoint and cleans up old log files after the commit, in the same call, so an error there
comes after a commit that landed, and retrying it would commit the write twice.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from backfill_assets.lake.errors import LakeError

T = TypeVar("T")

# Attempts at one commit before a write gives up: enough for the handful of writers a lake has
# (the live lane, a backfill, a correction and maintenance), few enough to fail within seconds.
MAX_ATTEMPTS = 10


@dataclass
class Attempt:
    """One try at a commit: its number (1 first) and the newest version the try read before
    committing (its ``floor``: the commit, if it lands, is newer), set by the try."""

    number: int
    floor: int | None = None


@dataclass(frozen=True)
class Commit(Generic[T]):
    """A write's commit loop: ``attempt`` tries once and returns the result; ``landed`` returns
    the result of the try's own commit when it is in the log after all (None: not there);
    ``retry`` tells a lost race (True) from an error to raise as it is (False), and may raise an
    error of its own instead (a conflict found on the way)."""

    what: str
    attempt: Callable[[Attempt], T]
    landed: Callable[[Attempt], T | None]
    retry: Callable[[Exception, Attempt], bool]


def committing(commit: Commit[T]) -> tuple[T, int]:
    """Run ``commit`` until a try lands; (its result, the tries taken). A ``LakeError`` from a
    try was refused before anything was committed and is raised at once; after
    ``MAX_ATTEMPTS`` lost races, a LakeError naming the last."""
    last_error: Exception | None = None
    for number in range(1, MAX_ATTEMPTS + 1):
        attempt = Attempt(number)
        try:
            return commit.attempt(attempt), number
        except LakeError:
            raise
        except Exception as exc:
            found = commit.landed(attempt)
            if found is not None:
                return found, number
            if not commit.retry(exc, attempt):
                raise
            last_error = exc
        backoff(number)
    raise LakeError(
        f"{commit.what} lost {MAX_ATTEMPTS} races in a row: {last_error}"
    ) from last_error


def backoff(attempt: int) -> None:
    """Wait before try ``attempt + 1``: exponential, capped at 2 s, jittered so that writers who
    lost together do not meet again."""
    time.sleep(min(2.0, 0.05 * 2**attempt) * random.uniform(0.5, 1.5))
