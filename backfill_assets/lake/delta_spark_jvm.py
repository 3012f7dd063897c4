"""Delta's JVM internals, the one module that reaches them (through the session's py4j
gateway), with their version gate: what the native engine reads from Delta's log, and the
metadata-only commits of its publish and restore.

Reads (conflicts, file statistics, checkpoints, transaction ids):

- A lost race is recognised by the class of the JVM exception: delta-spark
  throws subclasses of ``io.delta.exceptions.DeltaConcurrentModificationException``
  (``ConcurrentAppendException``, ``ConcurrentDeleteReadException``,
  ``ConcurrentDeleteDeleteException``, ``ConcurrentTransactionException``,
  ``MetadataChangedException``, ``ProtocolChangedException``); never by message text.
- Rows per partition of a version deltalake cannot list (``lake.snapshot``) come from the add
  actions (``numRecords`` in each file's statistics) of ``DeltaLog``'s snapshot in the
  session's JVM, whose reconstruction of the state runs Spark jobs.

Metadata-only commits: one transaction of Delta's JVM API that takes files out of partitions
and puts others in. No data is read or written.

- ``open_transaction`` pins the transaction's read version (``startTransaction`` with a
  snapshot); ``partition_files`` lists the files of the dates at that version and records, as
  ``filterFiles`` does, the read predicate and the files read, which Delta's conflict detection
  checks concurrent commits against. The files come from deltalake's snapshot
  (``lake.snapshot``), with no Spark job; ``filterFiles`` itself, which reconstructs the
  version's state in Spark jobs, only for a version deltalake cannot list.
- Removes are ``AddFile.removeWithTimestamp(ms, dataChange=true)``; adds are parsed by
  ``Action.fromJson`` from the log's own JSON form. ``dataChange`` is true on both: with false,
  Delta would check the commit under snapshot isolation and miss conflicts.
- ``new_table_transaction`` is the transaction of a table's first commit (``CREATE TABLE``'s
  ``updateMetadataForNewTable``): the publish into a table that does not exist yet creates it
  in the same commit that adds the staged files.
- ``txn_action`` is the write's Delta transaction id (``SetTransaction``), committed with them.
- ``commit`` commits them as one ``WRITE`` in overwrite mode (``overwrite``), as a
  ``replaceWhere`` records itself, the operation carrying the commit's ``userMetadata``. Not a
  ``Manual Update``: Delta reconstructs the whole table state after one of those, to write the
  version's checksum, where after a ``WRITE`` it derives it from the previous one.

These are Delta's internal classes, whose signatures changed within 4.x. ``SIGNATURES`` lists
every method of them called here, pinned by a test; ``TESTED_DELTA_VERSIONS`` the jars they
were checked with. On another version the engine publishes and restores by copying
(``native_commits``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Iterator
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from backfill_assets.lake.errors import LakeError
from backfill_assets.lake.keys import date_text
from backfill_assets.lake.log import physical_name

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


def snapshot_records(
    spark: SparkSession, table_dir: str, column: str, version: int
) -> tuple[dict[dt.date, int], list[dt.date]]:
    """Rows per partition from the file statistics of the snapshot Delta's JVM reconstructs, in
    Spark jobs (``numRecords`` less the rows a file's deletion vector deletes), and the
    partitions with a file lacking them."""
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
    by_date: dict[dt.date, int] = {}
    lacking: list[dt.date] = []
    for row in grouped.collect():
        if row["day"] is None:
            raise LakeError(f"{table_dir}: version {version} has a file without a {column} value")
        day = dt.date.fromisoformat(row["day"])
        by_date[day] = row["rows"] or 0
        if row["unknown"]:
            lacking.append(day)
    return by_date, lacking


LOGGER = logging.getLogger(__name__)
TESTED_DELTA_VERSIONS = ("4.4.0",)
_OPTION = "scala.Option"
_SEQ = "scala.collection.immutable.Seq"
# Class -> (method, parameter types) of every JVM call this module makes on Delta's classes.
SIGNATURES: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "org.apache.spark.sql.delta.DeltaLog": [
        ("forTable", ("org.apache.spark.sql.SparkSession", "java.lang.String")),
        ("getSnapshotAt", ("long", _OPTION, _OPTION, "boolean")),
        ("getSnapshotAt$default$2", ()),
        ("getSnapshotAt$default$3", ()),
        ("getSnapshotAt$default$4", ()),
        ("startTransaction", (_OPTION, _OPTION)),
        ("startTransaction", ()),
        ("update", ("boolean", _OPTION, _OPTION)),
        ("update$default$1", ()),
        ("update$default$2", ()),
        ("update$default$3", ()),
    ],
    "org.apache.spark.sql.delta.Snapshot": [
        ("allFiles", ()),
        ("deltaLog", ()),
        ("metadata", ()),
        ("transactions", ()),
    ],
    "org.apache.spark.sql.delta.OptimisticTransaction": [
        ("filterFiles", (_SEQ, "boolean")),
        ("trackReadPredicates", (_SEQ, "boolean", "boolean")),
        ("trackReadPredicates$default$2", ()),
        ("trackReadPredicates$default$3", ()),
        ("trackFilesRead", (_SEQ,)),
        ("commit", (_SEQ, "org.apache.spark.sql.delta.DeltaOperations$Operation")),
        ("metadata", ()),
        ("updateMetadataForNewTable", ("org.apache.spark.sql.delta.actions.Metadata",)),
    ],
    "org.apache.spark.sql.delta.actions.Metadata": [
        ("schemaString", ()),
        ("partitionColumns", ()),
        ("configuration", ()),
    ],
    "org.apache.spark.sql.delta.actions.AddFile": [
        ("removeWithTimestamp", ("long", "boolean")),
        ("json", ()),
        ("path", ()),
    ],
    "org.apache.spark.sql.delta.actions.Action": [("fromJson", ("java.lang.String",))],
}
WRITE_NAME = "DeltaOperations$Write"
WRITE = f"org.apache.spark.sql.delta.{WRITE_NAME}"
# The parameters of DeltaOperations.Write that ``overwrite`` passes, in order; the rest default.
WRITE_PARAMETERS = ("org.apache.spark.sql.SaveMode", _OPTION, _OPTION, _OPTION)
_warned: set[str] = set()


def delta_version(spark: SparkSession) -> str | None:
    """The version of the delta-spark jar the session runs (its manifest's), or None."""
    found = java_class(spark, "org.apache.spark.sql.delta.DeltaLog").getPackage()
    return None if found is None else found.getImplementationVersion()


def native_commits(spark: SparkSession) -> bool:
    """True when the session's Delta is a version this module was tested with; otherwise a
    warning (once per version) and False, and the engine publishes and restores by copying."""
    version = delta_version(spark)
    if version in TESTED_DELTA_VERSIONS:
        return True
    if str(version) not in _warned:
        _warned.add(str(version))
        LOGGER.warning(
            "delta-spark %s is not one of the versions its metadata-only commits were tested "
            "with (%s): publish and restore copy the data instead",
            version,
            ", ".join(TESTED_DELTA_VERSIONS),
        )
    return False


def missing_signatures(spark: SparkSession) -> list[str]:
    """The methods of ``SIGNATURES`` the session's Delta classes lack (empty: all there)."""
    missing = []
    for class_name, methods in SIGNATURES.items():
        found = {
            (m.getName(), tuple(str(p.getName()) for p in m.getParameterTypes()))
            for m in java_class(spark, class_name).getMethods()
        }
        missing += [
            f"{class_name}.{name}({', '.join(params)})"
            for name, params in methods
            if (name, params) not in found
        ]
    constructors = java_class(spark, WRITE).getConstructors()
    params = [str(p.getName()) for p in constructors[0].getParameterTypes()] if constructors else []
    defaults = {str(m.getName()) for m in java_class(spark, WRITE + "$").getMethods()}
    if (
        len(constructors) != 1
        or tuple(params[: len(WRITE_PARAMETERS)]) != WRITE_PARAMETERS
        or any(f"$lessinit$greater$default${n}" not in defaults for n in range(5, len(params) + 1))
    ):
        missing.append(f"{WRITE}({', '.join(WRITE_PARAMETERS)}, <defaults>): found ({params})")
    return missing


def _seq(spark: SparkSession, items: list[Any]) -> Any:
    """A Scala immutable ``Seq`` (a ``List``) of JVM objects."""
    jvm = jvm_of(spark)
    java = jvm.java.util.ArrayList()
    for item in items:
        java.add(item)
    return jvm.scala.jdk.javaapi.CollectionConverters.asScala(java).toList()


def open_transaction(spark: SparkSession, table_dir: str, version: int) -> Any:
    """A transaction that reads the table at ``version``: Delta checks every commit after it
    against what the transaction read."""
    snapshot = snapshot_at(spark, table_dir, version)
    option = jvm_of(spark).scala.Option
    return snapshot.deltaLog().startTransaction(option.empty(), option.apply(snapshot))


def new_table_transaction(
    spark: SparkSession,
    table_dir: str,
    schema_json: str,
    column: str,
    properties: dict[str, str] | None = None,
) -> Any:
    """A transaction that creates the table, as ``CREATE TABLE`` does: its commit is version 0,
    with the metaData (``schema_json``, partitioned by ``column``, table ``properties``) and
    the protocol Delta
    derives for a new table from the session's defaults. Another creator's version 0 first
    makes its commit fail with Delta's conflict exception."""
    delta_log = jvm_of(spark).org.apache.spark.sql.delta.DeltaLog.forTable(
        spark._jsparkSession, table_dir
    )
    txn = delta_log.startTransaction()
    metadata = {
        "id": str(uuid.uuid4()),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema_json,
        "partitionColumns": [column],
        "configuration": dict(properties or {}),
        "createdTime": int(time.time() * 1000),
    }
    txn.updateMetadataForNewTable(_action(spark, {"metaData": metadata}))
    return txn


def table_shape(reader: Any) -> tuple[str, list[str], dict[str, str]]:
    """(schema JSON, partition columns, table properties) as a transaction or snapshot reads
    them."""
    metadata = reader.metadata()
    jvm_columns = metadata.partitionColumns()
    columns = [str(jvm_columns.apply(i)) for i in range(jvm_columns.size())]
    conf = metadata.configuration()
    keys = conf.keys().toList()
    properties = {str(keys.apply(i)): str(conf.apply(keys.apply(i))) for i in range(keys.size())}
    return str(metadata.schemaString()), columns, properties


def _predicate(spark: SparkSession, column: str, dates: list[dt.date]) -> Any:
    literals = ", ".join(f"DATE'{date_text(day)}'" for day in dates)
    parser = spark._jsparkSession.sessionState().sqlParser()
    return parser.parseExpression(f"`{column}` IN ({literals})")


def partition_files(
    spark: SparkSession,
    txn: Any,
    column: str,
    dates: list[dt.date],
    documents: list[dict[str, Any]] | None,
) -> list[Any]:
    """The files (JVM ``AddFile``) of ``dates`` in the transaction's read version, read so that
    a concurrent commit adding or removing a file there makes this transaction's commit fail:
    what ``filterFiles`` records (its predicate, and the files as read). ``documents``, the add
    documents of those files when the caller has them without a Spark job; None: ``filterFiles``
    itself, which reconstructs the version's state in Spark jobs."""
    predicate = _seq(spark, [_predicate(spark, column, dates)])
    if documents is None:
        files = txn.filterFiles(predicate, True)
        return list(jvm_of(spark).scala.jdk.javaapi.CollectionConverters.asJava(files))
    found = [_action(spark, {"add": d}) for d in documents]
    defaults = [getattr(txn, f"trackReadPredicates$default${n}")() for n in (2, 3)]
    txn.trackReadPredicates(predicate, *defaults)
    txn.trackFilesRead(_seq(spark, found))
    return found


def removes(files: list[Any], now_ms: int) -> list[Any]:
    return [f.removeWithTimestamp(now_ms, True) for f in files]


def log_path(spark: SparkSession, relative: str) -> str:
    """A path relative to the table root as the log spells it: URL-encoded by Hadoop's Path."""
    return str(jvm_of(spark).org.apache.hadoop.fs.Path(relative).toUri().toString())


def add_action(spark: SparkSession, document: dict[str, Any]) -> Any:
    """The JVM action of an ``add`` document in the log's JSON form; ``dataChange`` set true."""
    return _action(spark, {"add": {**document, "dataChange": True}})


def txn_action(spark: SparkSession, app_id: str, version: int, now_ms: int) -> Any:
    """Delta's transaction id (``SetTransaction``) of the write ``app_id``, as the writer's
    ``txnAppId``/``txnVersion`` options record it: with ``lastUpdated``, without which a table
    that sets ``delta.setTransactionRetentionDuration`` drops it at once."""
    return _action(spark, {"txn": {"appId": app_id, "version": version, "lastUpdated": now_ms}})


def _action(spark: SparkSession, document: dict[str, Any]) -> Any:
    return jvm_of(spark).org.apache.spark.sql.delta.actions.Action.fromJson(json.dumps(document))


def snapshot_adds(
    spark: SparkSession, table_dir: str, version: int, column: str, dates: list[dt.date]
) -> list[dict[str, Any]]:
    """The add actions (log JSON documents, stats and all) of ``version``'s files in ``dates``."""
    texts = ", ".join(f"'{date_text(day)}'" for day in dates)
    found = (
        snapshot_at(spark, table_dir, version)
        .allFiles()
        .filter(f"partitionValues['{column}'] IN ({texts})")
        .collectAsList()
    )
    return [json.loads(str(add.json()))["add"] for add in found]


def path_of(file: Any) -> str:
    return str(file.path())


def overwrite(spark: SparkSession, column: str, dates: list[dt.date], metadata: str) -> Any:
    """The operation a commit of partitions ``dates`` records: Delta's ``WRITE`` in overwrite
    mode with their predicate, as a ``replaceWhere`` records it, carrying ``metadata`` as the
    commit's ``userMetadata``. Its first four parameters have stayed put while later ones were
    added: those take their declared defaults, however many there are."""
    jvm = jvm_of(spark)
    write = getattr(jvm.org.apache.spark.sql.delta, WRITE_NAME)
    companion = getattr(getattr(jvm.org.apache.spark.sql.delta, WRITE_NAME + "$"), "MODULE$")
    arity = len(java_class(spark, WRITE).getConstructors()[0].getParameterTypes())
    defaults = [getattr(companion, f"$lessinit$greater$default${n}")() for n in range(5, arity + 1)]
    literals = ", ".join(f"DATE'{date_text(day)}'" for day in dates)
    option = jvm.scala.Option
    return write(
        jvm.org.apache.spark.sql.SaveMode.Overwrite,
        option.apply(_seq(spark, [column])),
        option.apply(f"`{column}` IN ({literals})"),
        option.apply(metadata),
        *defaults,
    )


def commit(spark: SparkSession, txn: Any, actions: list[Any], operation: Any) -> int:
    """Commit ``actions`` in ``txn`` as ``operation``; the new version. Delta's conflict
    exceptions (``is_lost_race``) when a commit after the read version touched
    what it read."""
    return int(txn.commit(_seq(spark, actions), operation))
