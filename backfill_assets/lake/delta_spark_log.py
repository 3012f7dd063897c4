"""What the native engine reads from Delta's own log: conflicts, file statistics, checkpoints.

- A lost race is recognised by the class of the JVM exception: delta-spark
  throws subclasses of ``io.delta.exceptions.DeltaConcurrentModificationException``
  (``ConcurrentAppendException``, ``ConcurrentDeleteReadException``,
  ``ConcurrentDeleteDeleteException``, ``ConcurrentTransactionException``,
  ``MetadataChangedException``, ``ProtocolChangedException``); never by message text.
- Rows per partition come from the snapshot's add actions (``numRecords`` in
  each file's statistics), through ``DeltaLog`` in the session's JVM.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from backfill_assets.lake.keys import LakeError

CONFLICT_BASE = "io.delta.exceptions.DeltaConcurrentModificationException"


def jvm_of(spark: SparkSession) -> Any:
    """The driver's JVM gateway; LakeError on a session without one (Spark Connect)."""
    if spark._jvm is None:
        raise LakeError("delta-spark's log needs a classic Spark session's JVM, not Spark Connect")
    return spark._jvm


def java_class(spark: SparkSession, name: str) -> Any:
    jvm = jvm_of(spark)
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    return jvm.java.lang.Class.forName(name, True, loader)


def _java_exceptions(exc: BaseException) -> Iterator[Any]:
    """The JVM throwable behind a PySpark exception and its causes (none for a Python error)."""
    origin = getattr(exc, "_origin", None)
    if origin is None:
        from py4j.protocol import Py4JJavaError

        if isinstance(exc, Py4JJavaError):
            origin = exc.java_exception
    seen = 0
    while origin is not None and seen < 10:
        yield origin
        origin, seen = origin.getCause(), seen + 1


def is_lost_race(spark: SparkSession, exc: BaseException) -> bool:
    """True when ``exc`` is Delta's signal that a concurrent commit invalidated this one."""
    base = java_class(spark, CONFLICT_BASE)
    return any(base.isInstance(origin) for origin in _java_exceptions(exc))


def error_condition(exc: BaseException) -> str | None:
    """Spark's error condition (e.g. ``DELTA_REPLACE_WHERE_MISMATCH``), when it has one."""
    getter = getattr(exc, "getCondition", None)
    return getter() if callable(getter) else None


def snapshot_at(spark: SparkSession, table_dir: str, version: int) -> Any:
    delta = jvm_of(spark).org.apache.spark.sql.delta
    log = delta.DeltaLog.forTable(spark._jsparkSession, table_dir)
    defaults = [getattr(log, f"getSnapshotAt$default${n}")() for n in (2, 3, 4)]
    return log.getSnapshotAt(version, *defaults)


def write_checkpoint(spark: SparkSession, table_dir: str, version: int) -> None:
    """A checkpoint of ``version`` (and ``_last_checkpoint``), as Delta writes one every
    ``delta.checkpointInterval`` commits; delta-spark offers no public API for it."""
    delta_log = jvm_of(spark).org.apache.spark.sql.delta.DeltaLog.forTable(
        spark._jsparkSession, table_dir
    )
    delta_log.checkpoint(
        snapshot_at(spark, table_dir, version), getattr(delta_log, "checkpoint$default$2")()
    )


def snapshot_files(spark: SparkSession, table_dir: str, version: int) -> DataFrame:
    """The add actions of ``version``'s snapshot: path, partitionValues, stats, ..."""
    return DataFrame(snapshot_at(spark, table_dir, version).allFiles().toDF(), spark)


def protocol(spark: SparkSession, table_dir: str, version: int) -> dict:
    """Reader/writer versions and table features of ``version``, as Delta-spark sees them."""
    found = snapshot_at(spark, table_dir, version).protocol()
    features = set()
    for getter in ("readerFeatures", "writerFeatures"):
        option = getattr(found, getter)()
        if option.isDefined():
            features |= {str(name) for name in option.get().toSeq().toList()}
    return {
        "min_reader_version": found.minReaderVersion(),
        "min_writer_version": found.minWriterVersion(),
        "features": sorted(features),
    }


def file_row_counts(
    spark: SparkSession, table_dir: str, column: str, version: int
) -> tuple[dict[dt.date, int], list[dt.date]]:
    """Rows per partition from file statistics, and the partitions with a file lacking them."""
    files = snapshot_files(spark, table_dir, version).select(
        F.col("partitionValues")[column].alias("day"),
        F.get_json_object("stats", "$.numRecords").cast("long").alias("records"),
    )
    per_day = files.groupBy("day").agg(
        F.sum("records").alias("rows"), F.count_if(F.col("records").isNull()).alias("unknown")
    )
    counts: dict[dt.date, int] = {}
    unknown: list[dt.date] = []
    for row in per_day.collect():
        if row["day"] is None:
            raise LakeError(f"{table_dir}: version {version} has a file without a {column} value")
        day = dt.date.fromisoformat(row["day"])
        counts[day] = row["rows"] or 0
        if row["unknown"]:
            unknown.append(day)
    return counts, unknown
