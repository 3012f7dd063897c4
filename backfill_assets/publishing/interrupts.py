"""Stopping a run: SIGINT or SIGTERM ends the step now, publishes nothing more and retries nothing.

Left alone, a signal does not stop a ranged run: PySpark's own SIGINT handler calls the JVM
through the interrupted thread's busy py4j connection, so nothing is cancelled; Dagster's
in-process executor turns an interrupt in a step with a retry policy into a retry
(dagster-io/dagster#15026); and the Spark job runs on. So, while a step's body runs
(``stops_on_interrupt``, around every Spark step):

- a SIGINT or SIGTERM is remembered for the whole process (``signals.received``), and a
  thread of its own (its own py4j connection) cancels the session's Spark jobs, again every
  ``CANCEL_EVERY`` seconds until the step ends: the busy call returns with the cancelled job's
  error. The handler itself never raises, so no py4j call is left half-read for the next one;
- no commit starts after the signal (``signals.check``, called before each publish, each
  correction's commit and each step of maintenance); a commit already under way lands or not,
  as a kill's would: every day of every table is wholly before or wholly after;
- the step fails with ``dg.Failure(allow_retries=False)``, which Dagster never retries, and
  every later step of the run (of any run in this process) fails at once the same way. A run the
  UI terminated (status CANCELING) then ends Canceled, and a run retry policy leaves a canceled
  run alone.

The command's side, and what a parent's ignored SIGINT, Dagster's run and PySpark's
SparkContext do to the handlers, are ``backfill_assets.signals``'s.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING

import dagster as dg

from backfill_assets import signals
from backfill_assets.signals import STOPS, received, signal_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CANCEL_EVERY = 0.2  # seconds between two cancellations of the session's jobs after a signal


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
        signals.record(signum)
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
