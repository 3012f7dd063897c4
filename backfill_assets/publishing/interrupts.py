"""Stopping a run: SIGINT or SIGTERM ends the step now, publishes nothing more and retries nothing.

Left alone, a signal does not stop a ranged run: PySpark's own SIGINT handler calls the JVM
through the interrupted thread's busy py4j connection, so nothing is cancelled; Dagster's
in-process executor turns an interrupt in a step with a retry policy into a retry
(dagster-io/dagster#15026); and the Spark job runs on. So, while a step's body runs
(``stops_on_interrupt``, around every Spark step):

- a SIGINT or SIGTERM is remembered for the whole process, and a thread of its own (its own
  py4j connection) cancels the session's Spark jobs, again every ``CANCEL_EVERY`` seconds until
  the step ends: the busy call returns with the cancelled job's error. The handler itself never
  raises, so no py4j call is left half-read for the next one;
- no commit starts after the signal (``check``, called before each publish); a commit already
  under way lands or not, as a kill's would: every day of every table is wholly before or
  wholly after;
- the step fails with ``dg.Failure(allow_retries=False)``, which Dagster never retries, and
  every later step of the run (of any run in this process) fails at once the same way. A run the
  UI terminated (status CANCELING) then ends Canceled, and a run retry policy leaves a canceled
  run alone.

The command's side (``watch_signals``): a pipe given to ``signal.set_wakeup_fd`` receives the
number of every signal a Python handler catches, whichever handler Dagster or this module has
installed at that moment, so a signal that lands between two steps or two runs is seen too,
and a second SIGINT or SIGTERM ends the process at once (``os._exit``: what a kill leaves, the
lake already recovers from).

What a parent's ignored SIGINT, Dagster's run and PySpark's SparkContext do to the handlers
is undone by ``backfill_assets.signals``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING

import dagster as dg

from backfill_assets.signals import STOPS, keep_working

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CANCEL_EVERY = 0.2  # seconds between two cancellations of the session's jobs after a signal


class Stopped(Exception):
    """Raised where work would start after a SIGINT or SIGTERM (``check``)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"stopped by {signal_name(signum)}: nothing more is published")


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


class _Received:
    """The first stopping signal this process received (None until one arrives)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.lock = threading.Lock()

    def record(self, signum: int) -> bool:
        """Remember ``signum`` unless a signal was remembered already; True the first time."""
        with self.lock:
            if self.signum is not None:
                return False
            self.signum = signum
            return True


_received = _Received()


def received() -> int | None:
    """The first SIGINT or SIGTERM this process received, or None."""
    return _received.signum


def check() -> None:
    """Raise ``Stopped`` when a SIGINT or SIGTERM has arrived: called before each commit."""
    signum = received()
    if signum is not None:
        raise Stopped(signum)


def stopped_failure(signum: int) -> dg.Failure:
    """The step's failure after a signal: never retried (not by the step's retry policy)."""
    return dg.Failure(
        description=(
            f"stopped by {signal_name(signum)}: the step's Spark jobs were cancelled and "
            "nothing more was published; not retried"
        ),
        metadata={"signal": signal_name(signum)},
        allow_retries=False,
    )


class _Canceller:
    """After a signal: cancels the session's Spark jobs from a thread of its own, every
    ``CANCEL_EVERY`` seconds, until the step ends (a job started after one cancel meets the
    next)."""

    def __init__(self, session: Callable[[], SparkSession | None]) -> None:
        self.session = session
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="cancel-spark-jobs", daemon=True)
            self.thread.start()

    def stop(self) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            spark = self.session()
            if spark is not None:
                with contextlib.suppress(Exception):  # a session stopping as we cancel
                    cancel_jobs(spark)
            if self.done.wait(CANCEL_EVERY):
                return


def cancel_jobs(spark: SparkSession) -> None:
    """Cancel every job the session runs: through this thread's own py4j connection on a
    classic session, ``interruptAll`` on Spark Connect."""
    context = getattr(spark, "_sc", None)
    if context is not None:
        context.cancelAllJobs()
    else:
        spark.interruptAll()


@contextlib.contextmanager
def stops_on_interrupt(session: Callable[[], SparkSession | None]) -> Iterator[None]:
    """Around a step's body: a SIGINT or SIGTERM cancels ``session()``'s Spark jobs and fails
    the step without retry (``stopped_failure``); a step starting after one fails at once.

    Off the main thread (where no signal handler can be set) the body just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if (signum := received()) is not None:
        raise stopped_failure(signum)
    canceller = _Canceller(session)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        _received.record(signum)
        canceller.start()

    previous = {s: signal.getsignal(s) for s in STOPS}
    for s in STOPS:
        signal.signal(s, on_signal)
    try:
        yield
    except GeneratorExit:  # Dagster closing the step's events early: not a failure of ours
        raise
    except BaseException:
        if (signum := received()) is not None:
            # The cancelled job's error is the signal's doing: not shown as the cause.
            raise stopped_failure(signum) from None
        raise
    finally:
        canceller.stop()
        for s, handler in previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
    if (signum := received()) is not None:  # it landed after the body's last Spark job
        raise stopped_failure(signum)


_watching = threading.Event()


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    _received.record(signum)
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
                _received.record(signum)
                seen += 1
                if seen >= 2:
                    if on_second is not None and terminal is not None:
                        with contextlib.suppress(OSError):
                            os.write(terminal, (on_second(signum) + "\n").encode())
                    os._exit(128 + signum)

    threading.Thread(target=watch, name="watch-signals", daemon=True).start()


def exit_code() -> int:
    """128 + the signal that stopped the process (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + (received() or signal.SIGINT)
