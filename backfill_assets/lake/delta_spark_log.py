"""What the native engine reads from Delta's own log: conflicts, file statistics, checkpoints.

- A lost race is recognised by the class of the JVM exception: delta-spark
  throws subclasses of ``io.delta.exceptions.DeltaConcurrentModificationException``
  (``ConcurrentAppendException``, ``ConcurrentDeleteReadException``,
  ``ConcurrentDeleteDeleteException``, ``ConcurrentTransactionException``,
  ``MetadataChangedException``, ``ProtocolChangedException``); never by message text.
- Rows per partition come from the snapshot's add actions (``numRecords`` in
  each file's statistics): from the log replayed in Python (``log.replay``), else through
  ``DeltaLog`` in the session's JVM, whose reconstruction of the state runs Spark jobs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from backfill_assets.lake.errors import LakeError
from backfill_assets.lake.log import physical_name, replay

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


def _python_conflicts() -> tuple[type, ...]:
    """The Python classes delta-spark's package raises for Delta's conflicts (none when it is
    not installed): ``io.delta.exceptions``'s, which share no Python base class."""
    try:
        from delta.exceptions import base
    except ImportError:
        return ()
    return (
        base.DeltaConcurrentModificationException,
        base.ConcurrentWriteException,
        base.MetadataChangedException,
        base.ProtocolChangedException,
        base.ConcurrentAppendException,
        base.ConcurrentDeleteReadException,
        base.ConcurrentDeleteDeleteException,
        base.ConcurrentTransactionException,
    )


def is_lost_race(spark: SparkSession, exc: BaseException) -> bool:
    """True when ``exc`` is Delta's signal that a concurrent commit invalidated this one:
    its JVM exception, or the Python class delta-spark's package converts it to once imported
    (``delta.exceptions``, which keeps no JVM origin)."""
    if isinstance(exc, _python_conflicts()):
        return True
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


def transaction_version(spark: SparkSession, table_dir: str, app_id: str) -> int | None:
    """The version Delta's transaction id of ``app_id`` records at the table's latest version
    (None: it has none), which a checkpoint keeps when log cleanup deletes the commit. Read from
    a snapshot the log is listed for now: a cached one may name commit files cleaned up since."""
    log = jvm_of(spark).org.apache.spark.sql.delta.DeltaLog.forTable(
        spark._jsparkSession, table_dir
    )
    defaults = [getattr(log, f"update$default${n}")() for n in (1, 2, 3)]
    found = log.update(*defaults).transactions().get(app_id)
    return int(found.get()) if found.isDefined() else None


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
    """Rows per partition from file statistics (``numRecords`` less the rows a file's deletion
    vector deletes), and the partitions with a file lacking them: from the log replayed in
    Python when it can be, else from the JVM's snapshot (``snapshot_records``)."""
    replayed = replay(table_dir, version)
    if replayed is None:
        return snapshot_records(spark, table_dir, column, version)
    counts, unknown = replayed.records(column)
    return _by_date(table_dir, column, version, [(d, n, d in unknown) for d, n in counts.items()])


def snapshot_records(
    spark: SparkSession, table_dir: str, column: str, version: int
) -> tuple[dict[dt.date, int], list[dt.date]]:
    """``file_row_counts`` from the snapshot Delta's JVM reconstructs, in Spark jobs."""
    snapshot = snapshot_at(spark, table_dir, version)
    key = physical_name({"schemaString": str(snapshot.metadata().schemaString())}, column)
    files = DataFrame(snapshot.allFiles().toDF(), spark).select(
        F.col("partitionValues")[key].alias("day"),
        (
            F.get_json_object("stats", "$.numRecords").cast("long")
            - F.coalesce(F.col("deletionVector.cardinality"), F.lit(0))
        ).alias("records"),
    )
    grouped = files.groupBy("day").agg(
        F.sum("records").alias("rows"), F.count_if(F.col("records").isNull()).alias("unknown")
    )
    rows = [(r["day"], r["rows"], bool(r["unknown"])) for r in grouped.collect()]
    return _by_date(table_dir, column, version, rows)


def _by_date(
    table_dir: str, column: str, version: int, per_day: list[tuple[str | None, int | None, bool]]
) -> tuple[dict[dt.date, int], list[dt.date]]:
    by_date: dict[dt.date, int] = {}
    lacking: list[dt.date] = []
    for text, records, is_unknown in per_day:
        if text is None:
            raise LakeError(f"{table_dir}: version {version} has a file without a {column} value")
        day = dt.date.fromisoformat(text)
        by_date[day] = records or 0
        if is_unknown:
            lacking.append(day)
    return by_date, lacking
