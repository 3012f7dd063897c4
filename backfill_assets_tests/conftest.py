"""Shared fixtures: one Spark session for the whole test run, small and quiet."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# The pipeline's Spark resource applies its spark_config() to the shared session at every run,
# shuffle partitions included (8 unless this says otherwise): the tests' small data in 2, as the
# session below starts, and as the runs the tests start in other processes inherit.
os.environ.setdefault("BACKFILL_SPARK_SHUFFLE_PARTITIONS", "2")


@pytest.fixture(scope="session")
def spark():
    from backfill_assets.spark_session import build_session, spark_config

    session = build_session(
        spark_config(master="local[2]", shuffle_partitions=2, driver_memory="2g")
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
