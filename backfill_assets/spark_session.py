"""Spark configuration shared by the Dagster resource, the CLI and the tests.

Spark is configured in one place so that tests exercise the session the
pipeline uses: UTC everywhere, ANSI mode on (untrusted input goes through
``try_`` functions), no UI, and a fixed driver heap (2 GiB by default): a long range
spills to disk instead of growing the driver, so its memory does not depend on the range.
"""

from __future__ import annotations

import os
import sys

DEFAULT_MASTER = "local[*]"


def spark_config(
    master: str | None = None,
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
) -> dict[str, str]:
    """The Spark conf the pipeline runs with; environment variables override defaults.

    ``BACKFILL_SPARK_MASTER`` selects a cluster master (``spark://host:7077``),
    ``BACKFILL_SPARK_REMOTE`` a Spark Connect URL (``sc://host:15002``).
    """
    conf = {
        "spark.app.name": "backfill_assets",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(
            shuffle_partitions or os.environ.get("BACKFILL_SPARK_SHUFFLE_PARTITIONS", "8")
        ),
        "spark.driver.memory": driver_memory or os.environ.get("BACKFILL_SPARK_DRIVER_MEMORY", "2g"),
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    }
    remote = os.environ.get("BACKFILL_SPARK_REMOTE")
    if remote:
        conf["spark.remote"] = remote
    else:
        conf["spark.master"] = master or os.environ.get("BACKFILL_SPARK_MASTER", DEFAULT_MASTER)
    return conf


def use_this_python_for_workers() -> None:
    """Spark's Python workers must run this interpreter (with pyarrow and the project), not the
    system's ``python3``; PySpark reads only the environment variable for that."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def build_session(conf: dict[str, str]):
    """Get or create the process's SparkSession from a conf dict."""
    from pyspark.sql import SparkSession

    use_this_python_for_workers()
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
