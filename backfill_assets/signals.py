"""SIGINT and SIGTERM kept working in every process of the project, whatever its parent ignored.

A process started with SIGINT ignored (cron, nohup, a background job of a non-interactive
shell) passes the ignored disposition on to everything it starts. Dagster then maps SIGTERM to
SIGINT's handler on the way out of a run, so such a process would ignore SIGTERM too after its
first run, and so would every process it starts after that. And creating a SparkContext
replaces SIGINT's handler with PySpark's own, which calls the JVM through whatever py4j
connection the interrupted thread holds. ``handlers_kept`` undoes both around a run or a
session's start.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

STOPS = (signal.SIGINT, signal.SIGTERM)


def keep_working() -> None:
    """Neither SIGINT nor SIGTERM ignored in this process (nor in what it starts): an ignored
    SIGINT gets Python's default handler (KeyboardInterrupt), an ignored SIGTERM its default
    action."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_IGN:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def handlers_kept() -> Iterator[None]:
    """SIGINT's and SIGTERM's handlers after the block as they were before it (neither
    ignored: ``keep_working``), whatever the block installed. Off the main thread, where no
    handler can be set, the block just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    keep_working()
    previous: dict[int, Any] = {s: signal.getsignal(s) for s in STOPS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
