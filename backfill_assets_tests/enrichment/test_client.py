"""The segment service and its one shared client, for real on 127.0.0.1: dated deterministic
histories, 429 beyond the service's rate, retries with backoff, one bucket shared by two
processes that never exceeds the limit, and the live lane's reserved share."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import time
from datetime import date

import pytest

from backfill_assets.enrichment.client import (
    BACKFILL,
    LIVE,
    SegmentClient,
    SegmentServiceError,
    SharedBucket,
)
from backfill_assets_tests.enrichment.service_process import (
    histories_over_http,
    post,
    running_service,
    stats,
)

IDS = [f"C{k:05d}" for k in range(40)]


def test_histories_are_dated_deterministic_and_from_one_to_three_entries():
    with running_service(rps=50) as url:
        first = histories_over_http(url, IDS)
        again = histories_over_http(url, list(reversed(IDS)))
    assert first == again and set(first) == set(IDS)
    # one to three entries each, and among 40 customers each of those lengths occurs
    assert sorted({len(history) for history in first.values()}) == [1, 2, 3]
    for history in first.values():
        dates = [d for d, _ in history]
        assert dates == sorted(set(dates)) and all(d.day == 1 for d in dates)
        assert all(date(2022, 1, 1) <= d <= date(2026, 12, 1) for d in dates)
    assert len({tuple(h) for h in first.values()}) > 20  # they differ by customer
    assert len({s for h in first.values() for _, s in h}) > 1


def test_the_service_answers_429_beyond_its_rate_and_counts_per_second():
    with running_service(rps=3) as url:
        codes = [post(url, ["C00001"])[0] for _ in range(12)]
        s = stats(url)
    assert set(codes) == {200, 429}
    assert codes.count(429) == s["throttled_429"] > 0
    assert s["requests"] == codes.count(200) and s["max_rps"] == 3


def test_bad_requests_get_a_clear_400():
    with running_service(rps=50) as url:
        assert post(url, [""])[0] == 400
        assert post(url, ["x"] * 501)[0] == 400


def test_the_client_retries_429_with_backoff_and_gets_every_answer(tmp_path):
    with running_service(rps=3) as url:
        expected = histories_over_http(url, IDS)
        time.sleep(1.1)
        # A bucket far faster than the service: the service says 429 and the client retries.
        client = SegmentClient(
            url, SharedBucket(tmp_path / "bucket", 100, 0.0), BACKFILL, batch_size=4, backoff_s=0.05
        )
        got = client.histories(IDS)
        s = stats(url)
    assert got == expected
    assert client.stats.throttled_429 > 0
    assert client.stats.requests == 10 + client.stats.throttled_429
    assert s["max_rps"] <= 3


def test_the_client_gives_up_with_a_clear_error_after_its_retries(tmp_path):
    with running_service(rps=2) as url:
        client = SegmentClient(
            url,
            SharedBucket(tmp_path / "bucket", 100, 0.0),
            BACKFILL,
            batch_size=1,
            max_retries=0,
            backoff_s=0.0,
        )
        with pytest.raises(SegmentServiceError, match="429 after 0 retries"):
            client.histories([f"C{k:05d}" for k in range(20)])


CALLER = """
import sys
from backfill_assets.enrichment.client import SegmentClient, SharedBucket
url, bucket, first = sys.argv[1], sys.argv[2], int(sys.argv[3])
client = SegmentClient(url, SharedBucket(bucket, 10, 0.0), "backfill", batch_size=1)
client.histories([f"C{k:05d}" for k in range(first, first + 25)])
print(client.stats.requests, client.stats.throttled_429)
"""


def callers(url: str, buckets: tuple[str, str]) -> list[tuple[int, int]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CALLER, url, b, str(1000 * i)], stdout=subprocess.PIPE, text=True
        )
        for i, b in enumerate(buckets)
    ]
    return [_requests_and_throttled(p) for p in procs]


def _requests_and_throttled(proc: subprocess.Popen[str]) -> tuple[int, int]:
    """The two counts a caller prints."""
    requests, throttled = (int(x) for x in proc.communicate(timeout=120)[0].split())
    return requests, throttled


def test_two_processes_sharing_the_bucket_never_exceed_the_limit(tmp_path):
    shared = str(tmp_path / "shared")
    with running_service(rps=10) as url:
        counts = callers(url, (shared, shared))
        s = stats(url)
    assert counts == [(25, 0), (25, 0)]
    assert s["throttled_429"] == 0 and s["max_rps"] <= 10 and s["requests"] == 50


def test_two_processes_with_a_bucket_each_would_exceed_it(tmp_path):
    """The control: the limit above holds because the bucket is shared."""
    with running_service(rps=10) as url:
        callers(url, (str(tmp_path / "a"), str(tmp_path / "b")))
        s = stats(url)
    assert s["throttled_429"] > 0 and s["max_rps"] == 10


def test_a_backfill_cannot_take_the_live_lanes_share(tmp_path):
    bucket = SharedBucket(tmp_path / "bucket", 8, 0.5)  # 2 tokens, 6 a second, 1 reserved
    assert (bucket.capacity, bucket.rate, bucket.reserve) == (2, 6, 1)
    assert bucket.try_take(BACKFILL)
    assert not bucket.try_take(BACKFILL)  # the last token is the live lane's
    assert bucket.try_take(LIVE)
    assert not bucket.try_take(LIVE)


HAMMER = """
import sys, time
from pathlib import Path
from backfill_assets.enrichment.client import SharedBucket
bucket, stop = SharedBucket(sys.argv[1], 20, 0.4), Path(sys.argv[2])
taken, began = 0, time.monotonic()
while not stop.exists():
    bucket.take("backfill")
    taken += 1
print(taken, time.monotonic() - began)
"""


def tokens_now(bucket: SharedBucket) -> float:
    """The tokens in ``bucket`` now, read from the file every process shares (under its lock)
    and refilled at its rate since: its capacity while no process has written it."""
    if not bucket.path.exists():
        return bucket.capacity
    with open(bucket.path, encoding="utf-8") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_SH)
        text = f.read()
    if not text:
        return bucket.capacity
    state = json.loads(text)
    refilled = float(state["tokens"]) + max(0.0, time.time() - float(state["at"])) * bucket.rate
    return min(bucket.capacity, refilled)


def test_a_backfill_flat_out_in_another_process_leaves_the_live_lane_its_tokens(tmp_path):
    path, stop = tmp_path / "bucket", tmp_path / "stop"
    bucket = SharedBucket(path, 20, 0.4)  # 5 tokens, 15 a second, 2 reserved
    hammer = subprocess.Popen(
        [sys.executable, "-c", HAMMER, str(path), str(stop)], stdout=subprocess.PIPE, text=True
    )
    try:
        # The backfill drains the bucket to its floor: no token left that it may take.
        give_up = time.monotonic() + 60
        while tokens_now(bucket) >= bucket.reserve + 1:
            assert hammer.poll() is None, "the backfill's process ended before it drained"
            assert time.monotonic() < give_up, f"not drained: {tokens_now(bucket)} tokens"
            time.sleep(0.01)
        there = []
        for _ in range(8):
            assert hammer.poll() is None  # the backfill is still taking flat out
            # whether a token was there at once (how long the file's lock took is the
            # machine's, not the bucket's)
            there.append(bucket.try_take(LIVE))
            time.sleep(0.2)
        assert hammer.poll() is None
    finally:
        stop.touch()
    taken, seconds = hammer.communicate(timeout=60)[0].split()
    assert all(there), there  # a token was there every time: the reserve refills first
    # and the backfill ran at the rest of the rate meanwhile
    assert int(taken) > 0.5 * bucket.rate * float(seconds), (taken, seconds)
