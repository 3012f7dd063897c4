"""Shared fixtures: one Spark session for the whole test run, small and quiet."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark():
    from backfill_assets.spark_session import build_session, spark_config

    session = build_session(
        spark_config(master="local[2]", shuffle_partitions=2, driver_memory="2g")
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
