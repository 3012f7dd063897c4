"""The segment service as the project ships it, in its own process on 127.0.0.1, and plain
urllib calls to it (independent of the client under test)."""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import urllib.request
from datetime import date


@contextlib.contextmanager
def running_service(rps: int):
    """``python -m backfill_assets.enrichment.service`` on a free port; its URL."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "backfill_assets.enrichment.service",
            "--port",
            "0",
            "--rps",
            str(rps),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None  # stdout=PIPE
    try:
        line = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+", line)
        assert found, f"the service did not say where it listens: {line!r}"
        yield found.group(0)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def stats(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as r:
        return json.loads(r.read())


def post(url: str, ids: list[str]) -> tuple[int, dict]:
    """One raw POST /segments: (status, body)."""
    req = urllib.request.Request(
        f"{url}/segments",
        data=json.dumps({"customer_ids": ids}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def histories_over_http(url: str, ids: list[str]) -> dict[str, list[tuple[date, str]]]:
    """The service's answers, one batch of 100 at a time, waiting out any 429."""
    import time

    out = {}
    for i in range(0, len(ids), 100):
        while True:
            status, body = post(url, ids[i : i + 100])
            if status != 429:
                break
            time.sleep(0.5)
        assert status == 200, body
        for cid, entries in body["histories"].items():
            out[cid] = [(date.fromisoformat(e["valid_from"]), e["segment"]) for e in entries]
    return out
