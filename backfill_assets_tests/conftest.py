"""Shared fixtures: one Spark session for the whole test run, small and quiet; the hooks of
the side lane (``side_lane.py``), which runs the ``e2e`` and ``beside`` tests beside the
others; and the check of a run's skips against an allowlist (``skip_allowlist.py``)."""

from __future__ import annotations

import os
import sys

import pytest

from backfill_assets_testkit import scratch
from backfill_assets_testkit.side_lane import (  # noqa: F401 (hooks: pytest finds them here)
    pytest_collection_modifyitems,
    pytest_runtest_protocol,
    pytest_unconfigure,
)
from backfill_assets_testkit.skip_allowlist import (  # noqa: F401 (hooks: pytest finds them here)
    pytest_addoption,
    pytest_configure,
)

pytest_plugins = ["backfill_assets_testkit.reverse_order"]  # --reverse-order

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# The pipeline's Spark resource applies its spark_config() to the shared session at every run,
# shuffle partitions included (8 unless this says otherwise): the tests' small data in 2, as the
# session below starts, and as the runs the tests start in other processes inherit.
os.environ.setdefault("BACKFILL_SPARK_SHUFFLE_PARTITIONS", "2")
# Every Spark driver JVM the tests start (this session's, and those of the pipeline's processes
# they start, which inherit this) with the C1 compiler only and the serial collector, as
# spark_servers.py starts its daemons: the tests' JVMs are short and their data small, and on a
# busy 2-core box they start and run faster so (docs/benchmarks.md, "The test suite"). C1 alone
# reserves the JIT's code cache of a JVM without tiers, 48 MB; the session the whole suite shares
# filled it, and a JVM out of code cache cannot link a method handle: its scheduler died with
# "Out of space in CodeCache". So the cache of tiered compilation, 240 MB.
os.environ.setdefault(
    "SPARK_SUBMIT_OPTS",
    "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC",
)
# And every session pyspark starts for them runs its queries without whole-stage code
# generation: for the tests' few rows, compiling classes per query costs more than it saves
# (docs/benchmarks.md, "The test suite"). The plans and results are the same; the
# benchmarks, the demo and production keep Spark's default.
os.environ.setdefault(
    "PYSPARK_SUBMIT_ARGS", "--conf spark.sql.codegen.wholeStage=false pyspark-shell"
)
# Everything the run's processes put in the system's temp folder goes into the run's scratch
# folder instead, deleted when this process, the run's first, exits (``scratch.py``).
scratch.use_for_this_run()


@pytest.fixture(scope="session")
def spark():
    from backfill_assets.spark.session import build_session, spark_config

    session = build_session(
        spark_config(master="local[2]", shuffle_partitions=2, driver_memory="2g")
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """One SeaweedFS S3 server for the session (``demo/local_s3.py``); a failure saying why where
    its binary cannot run."""
    from backfill_assets.demo.local_s3 import S3Server, binary_problem

    problem = binary_problem()
    if problem:
        pytest.fail(f"{problem}: run `make setup`", pytrace=False)
    server = S3Server.start(tmp_path_factory.mktemp("seaweedfs"))
    yield server
    server.stop()


@pytest.fixture
def s3_bucket(s3_server):
    """A new bucket of its own on the session's server, with the standard AWS variables set to
    reach it while the test runs (a patch of its own, which a test's ``monkeypatch.undo()``
    leaves alone); its name. Deleted after the test: the server gives each bucket volumes of
    its own, as many as the free disk allows in all, and the suite makes hundreds."""
    import uuid

    bucket = f"t-{uuid.uuid4().hex[:20]}"
    s3_server.create_bucket(bucket)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in s3_server.env().items():
            patch.setenv(name, value)
        yield bucket
    s3_server.delete_bucket(bucket)
