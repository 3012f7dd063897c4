"""The one client of the customer-segment service: every run and every process calls it here.

- **A token bucket shared across processes.** Its state (tokens, time) sits in one small file,
  read and written under an exclusive ``fcntl`` lock, so every process on the machine draws from
  the same bucket. Capacity ``C = ceil(rps / 4)`` tokens and refill ``rps - C`` tokens a second:
  in any one-second window at most ``C + (rps - C) = rps`` requests leave, so a client that
  honours the service's limit is never answered 429 for going faster than it.
- **A share reserved for the live lane.** The live lane (the runs the sensors and the schedule
  request) takes any token; a backfill takes one only while the bucket keeps
  ``live_share * C`` tokens after it. A backfill running flat out leaves the bucket at that
  reserve, so a live request finds its token at once and the refill goes to the live lane first
  while it asks: a backfill can never starve the live runs.
- **Batched requests**: up to ``batch_size`` customers per request.
- **Retries on 429** (and on a dropped connection) with exponential backoff, each retry taking a
  token again; ``Retry-After`` is honoured when longer.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

LIVE, BACKFILL = "live", "backfill"
LANES = (LIVE, BACKFILL)

History = list[tuple[date, str]]


class SegmentServiceError(RuntimeError):
    """The service could not answer (after the retries), or answered something unusable."""


class SharedBucket:
    """A token bucket whose state is a file shared by every process that opens the same path."""

    def __init__(self, path: str | os.PathLike, rps: float, live_share: float) -> None:
        if rps < 2:
            raise ValueError(f"the segment service's rate must be at least 2 requests/s, got {rps}")
        if not 0 <= live_share < 1:
            raise ValueError(f"the live lane's share must be in [0, 1), got {live_share}")
        self.path = Path(path)
        self.capacity = float(math.ceil(rps / 4))
        self.rate = rps - self.capacity
        self.reserve = min(live_share * self.capacity, self.capacity - 1)

    def take(self, lane: str, timeout_s: float = 600.0) -> float:
        """Take one token for ``lane``, waiting as long as needed; the seconds waited."""
        if lane not in LANES:
            raise ValueError(f"lane must be one of {LANES}, got {lane!r}")
        floor = 0.0 if lane == LIVE else self.reserve
        began = time.monotonic()
        while True:
            missing = self._try_take(floor)
            if missing <= 0:
                return time.monotonic() - began
            waited = time.monotonic() - began
            if waited > timeout_s:
                raise SegmentServiceError(f"no token for the {lane} lane in {timeout_s:.0f}s")
            time.sleep(min(missing / self.rate, 0.25))

    def try_take(self, lane: str) -> bool:
        """Take one token for ``lane`` if there is one for it now, without waiting."""
        return self._try_take(0.0 if lane == LIVE else self.reserve) <= 0

    def _try_take(self, floor: float) -> float:
        """Take a token if the bucket keeps ``floor`` after it: 0; else the tokens missing."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+", encoding="utf-8") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                f.seek(0)
                text = f.read()
                now = time.time()
                try:
                    state = json.loads(text)
                    tokens, at = float(state["tokens"]), float(state["at"])
                except (ValueError, KeyError, TypeError):
                    tokens, at = self.capacity, now  # a new (or unreadable) bucket starts full
                tokens = min(self.capacity, tokens + max(0.0, now - at) * self.rate)
                missing = floor + 1 - tokens
                if missing <= 0:
                    tokens -= 1
                f.seek(0)
                f.truncate()
                f.write(json.dumps({"tokens": tokens, "at": now}))
                f.flush()
                return max(missing, 0.0)
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)


@dataclass
class ClientStats:
    requests: int = 0  # HTTP requests sent, retries included
    throttled_429: int = 0
    token_waits_s: list[float] = field(default_factory=list)


class SegmentClient:
    """Customer histories from the service at ``url``, through ``bucket``, for one lane."""

    def __init__(
        self,
        url: str,
        bucket: SharedBucket,
        lane: str,
        batch_size: int = 50,
        max_retries: int = 6,
        backoff_s: float = 0.25,
        timeout_s: float = 30.0,
    ) -> None:
        if lane not in LANES:
            raise ValueError(f"lane must be one of {LANES}, got {lane!r}")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.url = url.rstrip("/")
        self.bucket, self.lane, self.batch_size = bucket, lane, batch_size
        self.max_retries, self.backoff_s, self.timeout_s = max_retries, backoff_s, timeout_s
        self.stats = ClientStats()

    def histories(self, customer_ids: Iterable[str]) -> dict[str, History]:
        """Every customer's history, oldest first, in requests of at most ``batch_size``."""
        ids = sorted(set(customer_ids))
        out: dict[str, History] = {}
        for i in range(0, len(ids), self.batch_size):
            batch = ids[i : i + self.batch_size]
            answer = self._post(batch)
            for cid in batch:
                if cid not in answer:
                    raise SegmentServiceError(f"the service's answer lacks customer {cid!r}")
                out[cid] = [
                    (date.fromisoformat(e["valid_from"]), str(e["segment"])) for e in answer[cid]
                ]
        return out

    def _post(self, batch: list[str]) -> dict:
        body = json.dumps({"customer_ids": batch}).encode("utf-8")
        for attempt in range(self.max_retries + 1):
            self.stats.token_waits_s.append(self.bucket.take(self.lane))
            self.stats.requests += 1
            request = urllib.request.Request(
                f"{self.url}/segments",
                data=body,
                method="POST",
                headers={"Content-Type": "application/json"},
            )
            delay = self.backoff_s * 2**attempt
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    return json.loads(response.read())["histories"]
            except urllib.error.HTTPError as exc:
                if exc.code != 429:
                    raise SegmentServiceError(
                        f"{self.url}/segments answered {exc.code}: {exc.read()[:200]!r}"
                    ) from exc
                self.stats.throttled_429 += 1
                delay = max(delay, _seconds(exc.headers.get("Retry-After")))
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                if attempt == self.max_retries:
                    raise SegmentServiceError(f"{self.url} unreachable: {exc}") from exc
            except (ValueError, KeyError) as exc:
                raise SegmentServiceError(
                    f"{self.url}/segments answered something unusable: {exc}"
                ) from exc
            if attempt < self.max_retries:
                time.sleep(min(delay, 8.0))
        raise SegmentServiceError(
            f"{self.url}/segments still answered 429 after {self.max_retries} retries"
        )


def _seconds(text: str | None) -> float:
    try:
        return max(0.0, float(text)) if text else 0.0
    except ValueError:
        return 0.0
