"""The test run's scratch folder: what the run's processes would leave in the system's temp
folder goes into one folder of the run's own, removed when the run ends.

A JVM that ends without its shutdown hooks (the tests kill drivers, workers and daemons on
purpose) leaves Spark's scratch (``spark-*``, ``blockmgr-*``) and the native libraries it
unpacked (``liblz4-java*``, ``snappy-*``) behind; the browser, the S3 server and Python's
``tempfile`` users leave theirs. On the 2-core CI machine a day of runs left 4.6 GB in /tmp.

The first process of a run (the pytest that ``make test`` starts) creates the folder and points
every tool's temp folder into it: ``TMPDIR`` (Python's ``tempfile``, Node's and Go's temp folder),
``SPARK_LOCAL_DIRS`` (Spark's scratch in its drivers, workers and executors) and
``-Djava.io.tmpdir`` in ``SPARK_SUBMIT_OPTS`` (every driver JVM spark-submit starts). Every
process the run starts inherits them (the side lane, pytest-xdist's workers, the pipeline's
processes); one that already has a scratch folder makes none. The folder is open to other users
(the tests' PostgreSQL server runs as a user of its own). pytest's own ``tmp_path`` folders stay
where pytest keeps them (``PYTEST_DEBUG_TEMPROOT``: the system's temp folder), with its
retention of the last runs.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import MutableMapping
from pathlib import Path

SCRATCH_ENV = "BACKFILL_TEST_SCRATCH"


def enter(env: MutableMapping[str, str]) -> Path | None:
    """Create the run's scratch folder and point ``env``'s temp folders into it; None (``env``
    unchanged) when ``env`` already names one: a process the run started."""
    if env.get(SCRATCH_ENV):
        return None
    system_temp = tempfile.gettempdir()
    folder = Path(tempfile.mkdtemp(prefix="backfill-tests-", dir=system_temp))
    folder.chmod(0o755)
    env[SCRATCH_ENV] = str(folder)
    env.setdefault("PYTEST_DEBUG_TEMPROOT", system_temp)
    env["TMPDIR"] = str(folder)
    env["SPARK_LOCAL_DIRS"] = str(folder)
    java_opts = f"{env.get('SPARK_SUBMIT_OPTS', '')} -Djava.io.tmpdir={folder}"
    env["SPARK_SUBMIT_OPTS"] = java_opts.strip()
    if env is os.environ:
        tempfile.tempdir = None  # this process's tempfile reads TMPDIR again
    return folder


def use_for_this_run() -> None:
    """``enter`` on this process's environment; the folder it made, if any, removed when this
    process exits (after pytest's last hook: the side lane's child has ended by then)."""
    folder = enter(os.environ)
    if folder is not None:
        atexit.register(remove, folder)


def remove(folder: Path) -> None:
    """Delete the scratch folder and whatever the run left in it."""
    shutil.rmtree(folder, ignore_errors=True)
