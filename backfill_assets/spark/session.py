"""Spark configuration shared by the Dagster resource, the CLI and the tests.

Spark is configured in one place so that tests exercise the session the
pipeline uses: UTC everywhere, ANSI mode on (untrusted input goes through
``try_`` functions), no UI, and a fixed driver heap (2 GiB by default): a long range
spills to disk instead of growing the driver, so its memory does not depend on the range.

The driver's JVM collects with the serial collector (``settings.DRIVER_GC``). Java's default,
G1, sizes its heap by the share of time it spends collecting rather than by what is live: it grew a
30-day run's heap to 1.7 GiB with under 250 MiB live, and a year's to the cap. The serial
collector grows the heap as the live data needs (by default until 40% of it is free after a full
collection; 20% here, so a range's transient peak of Spark's execution pages leaves less
headroom behind), and the shuffles by blocks of days (``day_blocks``) keep that the same for a
month and a year. In local mode the driver's JVM
runs the tasks; a cluster's executors keep their own collector. It maps Spark's classes from
set-up's class-data archive when there is one (``spark_class_archive``): a session starts
sooner (docs/benchmarks.md).

With ``BACKFILL_LAKE_ENGINE=delta-spark`` the session also gets Delta's jars
(from set-up's ``.jars/delta``) and its SQL extension and catalog. ``auto`` and
``delta-rs`` leave them off: the embedded engine needs none, and a session whose
Delta comes from elsewhere (a cluster's or Spark Connect server's own
configuration) is still picked up by ``Lake``'s ``auto``. With delta-spark and
``BACKFILL_LAKE_DIR=s3://...`` it gets Hadoop's s3a jars (from set-up's ``.jars/s3a``) and
settings too (``spark/s3a.py``); the lake puts the AWS variables' values in when it opens.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from backfill_assets.settings import SparkSettings, jvm_locale
from backfill_assets.signals import handlers_kept
from backfill_assets.spark import plain_line_jar, s3a
from backfill_assets.spark.delta_jars import (
    DELTA_SESSION_CONF,
    S3A,
    checked_jars,
    delta_conf,
    jar_paths,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def spark_config(
    master: str | None = None,
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    lake_engine: str | None = None,
    driver_gc: str | None = None,
    settings: SparkSettings | None = None,
) -> dict[str, str]:
    """The Spark conf the pipeline runs with; the arguments override ``settings`` (by default
    ``SparkSettings.from_env()``, read now).

    ``BACKFILL_SPARK_MASTER`` selects a cluster master (``spark://host:7077``),
    ``BACKFILL_SPARK_REMOTE`` a Spark Connect URL (``sc://host:15002``),
    ``BACKFILL_LAKE_ENGINE`` (or ``lake_engine``) ``delta-spark`` adds Delta to the session,
    ``BACKFILL_SPARK_DRIVER_GC`` (or ``driver_gc``) replaces ``settings.DRIVER_GC``'s JVM option.
    """
    s = SparkSettings.from_env() if settings is None else settings
    gc = driver_gc or s.driver_gc
    conf = {
        "spark.app.name": "backfill_assets",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions or s.shuffle_partitions),
        "spark.driver.memory": driver_memory or s.driver_memory,
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.extraJavaOptions": " ".join(
            o for o in ("-Duser.timezone=UTC", gc, archive_options(s)) if o
        ),
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    }
    if s.remote:
        conf["spark.remote"] = s.remote
    else:
        conf["spark.master"] = master or s.master
        # Raw's plain-line reader (spark/plain_line_jar.py), while set-up has built it.
        if jars := plain_line_jar.session_jars():
            conf["spark.jars"] = ",".join(jars)
    engine = lake_engine or s.lake_engine
    # A Connect server's Delta is the server's own configuration, not the client's.
    if engine == "delta-spark" and not s.remote:
        conf.update(delta_conf(jar_paths(s) + plain_line_jar.session_jars()))
        if s.lake_on_s3:
            jars = conf["spark.jars"].split(",") + S3A.jar_paths(s)
            conf.update(s3a.session_conf(jars))
        # Delta rebuilds a snapshot's file list with 50 tasks by default: far more than one
        # machine's tables need; as many as a shuffle has here.
        conf["spark.databricks.delta.snapshotPartitions"] = conf["spark.sql.shuffle.partitions"]
    return conf


DELTA_EXTENSION = "DeltaSparkSessionExtension"


def engine_without_session(settings: SparkSettings | None = None) -> str | None:
    """The lake engine a session built from ``spark_config`` would take, when it is known
    without starting one: ``delta-rs`` when asked for, or with ``auto`` when nothing can put
    Delta's SQL extension into the session (over Spark Connect ``auto`` is always delta-rs).
    None when only the session can tell: ``delta-spark`` asked for, or ``auto`` with Delta's
    extension possibly set by spark-submit's own sources (``PYSPARK_SUBMIT_ARGS``, a properties
    file, a ``spark-defaults.conf``)."""
    s = SparkSettings.from_env() if settings is None else settings
    if s.lake_engine == "delta-rs" or (s.lake_engine == "auto" and s.remote):
        return "delta-rs"
    if s.lake_engine != "auto":
        return None
    if DELTA_EXTENSION in s.submit_args or "--properties-file" in s.submit_args:
        return None
    for folder in _spark_conf_dirs(s):
        try:
            defaults = (folder / "spark-defaults.conf").read_text(errors="replace")
        except OSError:
            continue  # none there
        if DELTA_EXTENSION in defaults:
            return None
    return "delta-rs"


def _spark_conf_dirs(s: SparkSettings) -> list[Path]:
    """Where spark-submit may read ``spark-defaults.conf``: ``SPARK_CONF_DIR``, and the
    ``conf`` of ``SPARK_HOME`` or of the pyspark package (its home when none is set)."""
    import pyspark

    home = s.spark_home or os.path.dirname(pyspark.__file__)
    return [*([Path(s.conf_dir)] if s.conf_dir else []), Path(home) / "conf"]


# The JVM's own messages about an archive it cannot use (built for another Java or class path):
# off, the archive is only a speed-up.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path(settings: SparkSettings | None = None) -> Path | None:
    """The driver's class-data archive (built by ``spark/class_archive.py``):
    ``BACKFILL_SPARK_CLASS_ARCHIVE``, by default the project's ``.jars/spark-classes.jsa``, or
    None when that is ``off``."""
    s = SparkSettings.from_env() if settings is None else settings
    if s.class_archive == "off":
        return None
    if s.class_archive:
        return Path(s.class_archive).absolute()
    return Path(__file__).resolve().parents[2] / ".jars" / "spark-classes.jsa"


def archive_options(settings: SparkSettings | None = None) -> str:
    """The driver's JVM options that map the archive, or ``""`` while there is none."""
    path = archive_path(settings)
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def check_delta_jars(conf: dict[str, str]) -> None:
    """Before a session starts with Delta: a DeltaJarsError naming the fix if the jars are wrong."""
    if (
        DELTA_SESSION_CONF["spark.sql.extensions"] in conf.get("spark.sql.extensions", "")
        and "spark.jars" in conf
    ):
        checked_jars()
        if conf.get("spark.hadoop.fs.s3.impl") == s3a.S3A_FILESYSTEM:
            S3A.checked()


def use_this_python_for_workers() -> None:
    """Spark's Python workers must run this interpreter (with pyarrow and the project), not the
    system's ``python3``; PySpark reads only the environment variable for that."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def build_session(conf: dict[str, str]) -> SparkSession:
    """Get or create the process's SparkSession from a conf dict."""
    from pyspark.sql import SparkSession

    use_this_python_for_workers()
    os.environ.update(jvm_locale())  # the JVM's file names in UTF-8, whatever the locale
    check_delta_jars(conf)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    with handlers_kept():  # not PySpark's SIGINT handler: see backfill_assets.signals
        return builder.getOrCreate()


@contextmanager
def listing_on_driver(spark: SparkSession, paths: int) -> Iterator[None]:
    """Stat ``paths`` paths on the driver instead of in a Spark job, while a reader is built.

    Given more than ``parallelPartitionDiscovery.threshold`` paths (32), Spark runs a
    distributed job just to stat them, one task per path: for a year of daily files or folders
    that job costs more than the read it prepares.
    The paths are the lake's files from its snapshot or the landing's day folders, so a serial
    listing is cheap. The index is built while the reader's
    ``parquet()`` or ``text()`` runs, so the setting is restored right after.
    """
    key = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    previous = spark.conf.get(key, None)
    spark.conf.set(key, str(max(paths + 1, int(previous or 32))))
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, previous)
