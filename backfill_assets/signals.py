"""SIGINT and SIGTERM in every process of the project: what arrived, and handlers that keep
working whatever the parent ignored.

What arrived: the first SIGINT or SIGTERM is remembered for the whole process (``received``),
whichever handler caught it: a step's (``publishing/interrupts.py``) or the command's
(``watch_signals``). Work that must not start after it (a publish, a correction's commit, the
next table of maintenance) calls ``check`` first, which raises ``Stopped``.

Handlers that keep working: a process started with SIGINT ignored (cron, nohup, a background
job of a non-interactive shell) passes the ignored disposition on to everything it starts.
Dagster then maps SIGTERM to SIGINT's handler on the way out of a run, so such a process would
ignore SIGTERM too after its first run, and so would every process it starts after that. And
creating a SparkContext replaces SIGINT's handler with PySpark's own, which calls the JVM
through whatever py4j connection the interrupted thread holds. ``handlers_kept`` undoes both
around a run or a session's start.

The command's side (``watch_signals``): a pipe given to ``signal.set_wakeup_fd`` receives the
number of every signal a Python handler catches, whichever handler Dagster or a step has
installed at that moment, so a signal that lands between two steps or two runs is seen too,
and a second SIGINT or SIGTERM ends the process at once (``os._exit``: what a kill leaves, the
lake already recovers from).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

STOPS = (signal.SIGINT, signal.SIGTERM)


class Stopped(Exception):
    """Raised where work would start after a SIGINT or SIGTERM (``check``)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"stopped by {signal_name(signum)}: nothing more is published")


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


_first: list[int] = []  # the first stopping signal this process received
_first_lock = threading.Lock()


def record(signum: int) -> None:
    """Remember ``signum`` unless a signal was remembered already."""
    with _first_lock:
        if not _first:
            _first.append(signum)


def received() -> int | None:
    """The first SIGINT or SIGTERM this process received, or None."""
    return _first[0] if _first else None


def check() -> None:
    """Raise ``Stopped`` when a SIGINT or SIGTERM has arrived: called before each commit."""
    signum = received()
    if signum is not None:
        raise Stopped(signum)


def exit_code() -> int:
    """128 + the signal that stopped the process (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + (received() or signal.SIGINT)


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


_watching = threading.Event()


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    record(signum)
    raise KeyboardInterrupt


def watch_signals(on_second: Callable[[int], str] | None = None) -> None:
    """For a command: a SIGINT or SIGTERM outside a run raises KeyboardInterrupt (the command
    reports what was published and exits ``exit_code()``); one inside a run is remembered
    whichever handler caught it; a second one ends the process at once with its exit code,
    after writing the line ``on_second(signum)`` to the command's standard error as it was
    now (during a run, Dagster points the process's own at the run's captured logs). Once per
    process: a later call changes nothing."""
    if _watching.is_set() or threading.current_thread() is not threading.main_thread():
        return
    _watching.set()
    try:  # the process's standard error as it is now (not sys.stderr: a test may replace it)
        terminal: int | None = os.dup(2)
    except OSError:
        terminal = None
    keep_working()
    for s in STOPS:
        signal.signal(s, _raise_keyboard_interrupt)
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)

    def watch() -> None:
        seen = 0
        while chunk := os.read(read_end, 64):
            for signum in chunk:
                if signum not in STOPS:
                    continue
                record(signum)
                seen += 1
                if seen >= 2:
                    if on_second is not None and terminal is not None:
                        with contextlib.suppress(OSError):
                            os.write(terminal, (on_second(signum) + "\n").encode())
                    os._exit(128 + signum)

    threading.Thread(target=watch, name="watch-signals", daemon=True).start()
