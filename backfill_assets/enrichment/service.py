"""A small real HTTP customer-segment service, for ``stg_orders_enriched``, the demo and tests.

    python -m backfill_assets.enrichment.service --port 8765 --rps 20

Binds 127.0.0.1 only. Every customer has a deterministic, dated segment history derived from
their id (1 to 3 entries, each valid from the first day of a month between 2022-01 and
2026-12): the segment of a customer on day D is the one of the latest entry valid from D or
earlier, and none before their first entry.

- ``POST /segments`` with ``{"customer_ids": [...]}`` answers
  ``{"histories": {id: [{"valid_from": "YYYY-MM-DD", "segment": "..."}, ...]}}``, oldest first;
  at most ``MAX_BATCH`` ids per request.
- ``GET /stats`` answers the counts since start: accepted requests, 429s, and the most requests
  accepted within one wall-clock second (``max_rps``).
- Beyond ``--rps`` requests within one wall-clock second, a request is answered 429 with
  ``Retry-After`` (the seconds to the next window) and counted as throttled.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

SEGMENTS = ("bronze", "silver", "gold", "platinum")
FIRST_YEAR, MONTHS = 2022, 60  # entries start on a month's first day in 2022-01 .. 2026-12
MAX_BATCH = 500


def segment_history(customer_id: str) -> list[tuple[date, str]]:
    """The customer's history, oldest first: the same answer for the same id, always."""
    digest = hashlib.sha256(customer_id.encode("utf-8")).digest()
    entries = 1 + digest[0] % 3
    months = sorted({digest[1 + 2 * i] * 256 + digest[2 + 2 * i] for i in range(entries)})
    history = []
    for k, m in enumerate(months):
        month = m % MONTHS
        history.append(
            (
                date(FIRST_YEAR + month // 12, 1 + month % 12, 1),
                SEGMENTS[digest[10 + k] % len(SEGMENTS)],
            )
        )
    return sorted(dict(history).items())


class Limiter:
    """Requests per wall-clock second: accept up to ``rps`` in each, count the rest as 429s."""

    def __init__(self, rps: int) -> None:
        self.rps = rps
        self.lock = threading.Lock()
        self.window, self.in_window = -1, 0
        self.accepted = self.throttled = self.max_rps = 0

    def admit(self) -> float | None:
        """None when admitted; else the seconds until the next window."""
        now = time.time()
        with self.lock:
            second = int(now)
            if second != self.window:
                self.window, self.in_window = second, 0
            if self.in_window >= self.rps:
                self.throttled += 1
                return second + 1 - now
            self.in_window += 1
            self.accepted += 1
            self.max_rps = max(self.max_rps, self.in_window)
            return None

    def stats(self) -> dict:
        with self.lock:
            return {
                "requests": self.accepted,
                "throttled_429": self.throttled,
                "max_rps": self.max_rps,
                "limit_rps": self.rps,
            }


def handler_for(limiter: Limiter) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet: the counts are in /stats
            pass

        def answer(self, status: int, body: dict, headers: dict | None = None) -> None:
            data = json.dumps(body).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/stats":
                self.answer(200, limiter.stats())
            else:
                self.answer(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            if self.path != "/segments":
                self.answer(404, {"error": "not found"})
                return
            wait = limiter.admit()
            if wait is not None:
                self.answer(
                    429,
                    {"error": f"more than {limiter.rps} requests per second"},
                    {"Retry-After": f"{wait:.3f}"},
                )
                return
            try:
                ids = json.loads(body)["customer_ids"]
                if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
                    raise ValueError("customer_ids must be a list of non-empty strings")
                if len(ids) > MAX_BATCH:
                    raise ValueError(f"at most {MAX_BATCH} customer_ids per request")
            except (ValueError, KeyError, TypeError) as exc:
                self.answer(400, {"error": str(exc)})
                return
            histories = {
                i: [{"valid_from": d.isoformat(), "segment": s} for d, s in segment_history(i)]
                for i in ids
            }
            self.answer(200, {"histories": histories})

    return Handler


class SegmentService:
    """The service on a background thread of this process (tests, the demo): ``url``."""

    def __init__(self, rps: int, port: int = 0) -> None:
        self.limiter = Limiter(rps)
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler_for(self.limiter))
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="segment-service", daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        if isinstance(host, bytes):  # an AF_UNIX address; this server listens on 127.0.0.1
            host = host.decode()
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="The customer-segment service, on 127.0.0.1.")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--rps", type=int, default=20, help="requests per second before 429s")
    args = p.parse_args(argv)
    if args.rps < 1:
        p.error("--rps must be at least 1")
    service = SegmentService(args.rps, args.port)
    print(f"segment service on {service.url} ({args.rps} requests/s)", flush=True)
    try:
        service.server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        service.server.server_close()


if __name__ == "__main__":
    main()
