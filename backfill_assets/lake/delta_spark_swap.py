"""Publish and restore on delta-spark without copying: one commit that takes the current files of
the partitions out and puts others in (staged files, or the files an older version had), through
Delta's transaction API (``delta_spark_jvm``).

Conflicts are Delta's own. A publish's transaction reads the partitions at the version the staged
data was audited against (its base), so any commit after the base that added or removed a file
there fails the publish; a commit to other partitions does not. What Delta found is then told
apart, from the log's commit files, like delta-rs's publish does: a commit after the base that
changed data in the partitions is a ``LakeConflict`` (stage again); one that changed none (a
compaction: ``dataChange: false``) only moved the files, and the publish is retried from the
latest version. A restore given a base (the version a rollback checked) is checked against it
the same way; one without retries a lost race from a fresh snapshot, like every write. A
commit that raised is first looked for in the log by its write id: one that landed, whose
post-commit step failed, is a success.

Delta checks neither that an added file exists nor its schema or the table's constraints. So the
files are checked in the table's storage first (there, with the recorded size), the staged schema
against the table's, and a table whose writes Delta must check (CHECK or NOT NULL constraints,
generated or identity columns, column mapping) is left to the copy (``can_swap``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession

import backfill_assets.lake.commit_lock as commit_lock
import backfill_assets.lake.delta_spark_jvm as jvm
import backfill_assets.lake.snapshot as snapshot
from backfill_assets import seam
from backfill_assets.lake.commit import (
    CommitInfo,
    WriteResult,
    encode_metadata,
    txn_version,
    write_id_of,
)
from backfill_assets.lake.errors import LakeConflict, LakeError, LakeTableMissing
from backfill_assets.lake.file_stats import file_stats, indexed_columns
from backfill_assets.lake.keys import date_text
from backfill_assets.lake.log import (
    commit_file_counts,
    commit_of_write,
    newest_commit,
    relative_path,
    touched_after,
)
from backfill_assets.lake.manifests import StagedFile, StagedVersion
from backfill_assets.lake.retry import Attempt, Commit, committing
from backfill_assets.lake.spark_files import nullable
from backfill_assets.storage.stores import storage_for

LOGGER = logging.getLogger(__name__)
# Schema field metadata with which Delta's writer computes or checks a column's values.
_CHECKED_FIELD_KEYS = ("delta.generationExpression", "delta.identity.", "delta.invariants")


@dataclass(frozen=True)
class Swap:
    """One commit's plan for ``dates`` of a table: ``adds`` (the log's add documents) become the
    partitions' files. With ``check_base`` (a publish; a restore given the version its caller
    checked) it is refused when a commit after ``base`` changed their data."""

    name: str
    table_dir: str
    column: str
    dates: list[dt.date]
    adds: list[dict[str, Any]]
    schema_json: str | None  # the new files' schema, checked against the table's (None: skip)
    base: int | None
    check_base: bool
    creates: bool = False  # a publish: a table not there yet is created by its commit
    properties: dict[str, str] | None = None  # the properties of a table it creates


def can_swap(spark: SparkSession, name: str, table_dir: str, what: str) -> bool:
    """Whether ``what`` (publish, restore) may swap files in the table; a warning naming what
    rules it out where the table's writes need Delta's writer, which checks them."""
    latest = newest_commit(table_dir)
    if latest is None:
        return True  # no table yet: the swap's commit creates it
    found = snapshot.shape(table_dir, latest)
    if found is None:  # a version deltalake cannot load: Delta's own snapshot
        schema_json, _, properties = jvm.table_shape(jvm.snapshot_at(spark, table_dir, latest))
        found = schema_json, properties
    reasons = _reasons(*found)
    if reasons:
        LOGGER.warning(
            "%s: %s copies the data, since Delta checks the writes of a table with %s",
            name,
            what,
            ", ".join(reasons),
        )
    return not reasons


def publish(
    spark: SparkSession,
    engine: str,
    name: str,
    table_dir: str,
    staged: StagedVersion,
    dates: list[dt.date],
    commit: CommitInfo,
    properties: dict[str, str] | None = None,
) -> WriteResult:
    """The staged files of ``dates`` in, the current ones out: checked against the staged
    version's base (LakeConflict). A table not there yet is created with ``properties``."""
    adds = _staged_adds(spark, table_dir, staged.column, staged.files_of(dates))
    plan = Swap(
        name,
        table_dir,
        staged.column,
        dates,
        adds,
        staged.schema_json,
        staged.base_version,
        check_base=True,
        creates=True,
        properties=properties,
    )
    return _committed(spark, engine, plan, commit, "publish_staged", None)


def restore(
    spark: SparkSession,
    engine: str,
    name: str,
    table_dir: str,
    column: str,
    dates: list[dt.date],
    version: int,
    commit: CommitInfo,
    since: int | None = None,
) -> WriteResult:
    """The files ``dates`` had at ``version`` back in, the current ones out; with ``since``,
    checked against it as a publish against its base (LakeConflict)."""
    adds = _old_adds(spark, name, table_dir, column, dates, version)
    plan = Swap(name, table_dir, column, dates, adds, None, since, check_base=since is not None)
    return _committed(spark, engine, plan, commit, "restore_partitions", version)


def _committed(
    spark: SparkSession,
    engine: str,
    plan: Swap,
    commit: CommitInfo,
    operation: str,
    restored_from: int | None,
) -> WriteResult:
    rows = _rows_of(plan.table_dir, plan.column, plan.dates, plan.adds)
    write_id = write_id_of(commit)
    metadata = encode_metadata(commit, engine, operation, rows, restored_from, write_id=write_id)
    version, attempts = _commit_swap(spark, plan, metadata, write_id)
    seam.pause("after_commit")
    added = commit_file_counts(plan.table_dir, version)[0]
    return WriteResult(plan.name, version, rows, added, attempts)


def _reasons(schema_json: str, properties: dict[str, str]) -> list[str]:
    reasons = [f"table property {k}" for k in properties if k.startswith("delta.constraints.")]
    if properties.get("delta.columnMapping.mode", "none") != "none":
        reasons.append("column mapping")

    def walk(field: dict[str, Any], path: str) -> None:
        if not field.get("nullable", True):
            reasons.append(f"NOT NULL column {path}")
        reasons.extend(
            f"{key} on column {path}"
            for key in field.get("metadata", {})
            if key.startswith(_CHECKED_FIELD_KEYS)
        )
        kind = field.get("type")
        if isinstance(kind, dict) and kind.get("type") == "struct":
            for child in kind["fields"]:
                walk(child, f"{path}.{child['name']}")

    for field in json.loads(schema_json)["fields"]:
        walk(field, field["name"])
    return reasons


def _staged_adds(
    spark: SparkSession, table_dir: str, column: str, files: list[StagedFile]
) -> list[dict[str, Any]]:
    """Add documents for staged files (``StagedFile``), each checked on disk: there, with the
    size the manifest recorded."""
    adds = []
    for f in files:
        _check_on_disk(table_dir, f.path, f.size)
        file = snapshot.DataFile(f.path, f.partition, f.size, f.modification_time, f.rows)
        adds.append(_add(spark, column, file, f.stats or {"numRecords": f.rows}))
    return adds


def _old_adds(
    spark: SparkSession, name: str, table_dir: str, column: str, dates: list[dt.date], version: int
) -> list[dict[str, Any]]:
    """The add documents of ``dates``' files at ``version``, each checked on disk (LakeError when
    one was vacuumed): from deltalake's snapshot, with the statistics the log has for them (or,
    lacking them, from the Parquet footers), as delta-rs's restore does, else from Delta's JVM."""
    found = snapshot.plain(table_dir, version, stats=True)
    if found is None:
        adds = jvm.snapshot_adds(spark, table_dir, version, column, dates)
        on_disk = [(relative_path(table_dir, a["path"]), a["size"]) for a in adds]
    else:
        files = found.in_days(dates)
        on_disk = [(f.path, f.size) for f in files]
    for relative, size in on_disk:
        if not storage_for(table_dir).exists(os.path.join(table_dir, relative)):
            raise LakeError(
                f"cannot restore {name} to version {version}: files were vacuumed, e.g. {relative}"
            )
        _check_on_disk(table_dir, relative, size)
    if found is None:
        return adds
    indexed = indexed_columns(found.configuration)
    return [
        _add(spark, column, f, f.stats or file_stats(snapshot.footer(table_dir, f.path), indexed))
        for f in files
    ]


def _current_adds(spark: SparkSession, swap: Swap, version: int) -> list[dict[str, Any]] | None:
    """The add documents of the swap's dates at ``version`` from deltalake's snapshot (None:
    one it cannot list, left to Delta's ``filterFiles``)."""
    found = snapshot.plain(swap.table_dir, version)
    if found is None:
        return None
    return [
        _add(spark, swap.column, f, None if f.records is None else {"numRecords": f.records})
        for f in found.in_days(swap.dates)
    ]


def _add(
    spark: SparkSession, column: str, file: snapshot.DataFile, stats: str | dict | None
) -> dict[str, Any]:
    """The log's add document of a data file."""
    document: dict[str, Any] = {
        "path": file.log_path or jvm.log_path(spark, file.path),
        "partitionValues": file.partition_values(column),
        "size": file.size,
        "modificationTime": file.modification_time,
    }
    if stats is not None:
        document["stats"] = stats if isinstance(stats, str) else json.dumps(stats)
    return document


def _rows_of(table_dir: str, column: str, dates: list[dt.date], adds: list[dict]) -> dict:
    """Rows per date of ``adds``: their ``numRecords``, else the file's Parquet footer."""
    rows = dict.fromkeys(dates, 0)
    for add in adds:
        records = json.loads(add.get("stats") or "{}").get("numRecords")
        if records is None:
            records = snapshot.footer(table_dir, relative_path(table_dir, add["path"])).num_rows
        rows[dt.date.fromisoformat(add["partitionValues"][column])] += records
    return rows


def _commit_swap(spark: SparkSession, swap: Swap, metadata: str, write_id: str) -> tuple[int, int]:
    """Commit ``swap`` once; (version, attempts). See the module docstring for the retries."""
    texts = {date_text(day) for day in swap.dates}

    def attempt(a: Attempt) -> int:
        a.floor = newest_commit(swap.table_dir)  # this commit is newer
        if a.floor is None and not swap.creates:
            raise LakeTableMissing(f"table {swap.name} does not exist")
        if swap.check_base:
            _refuse_changed(swap, texts, None)
        pinned = swap.base if a.number == 1 and swap.base is not None else a.floor
        if pinned is None:
            txn = jvm.new_table_transaction(
                spark, swap.table_dir, _new_table_schema(swap), swap.column, swap.properties
            )
            actions = [jvm.add_action(spark, add) for add in swap.adds]
        else:
            txn = jvm.open_transaction(spark, swap.table_dir, pinned)
            actions = _actions(spark, txn, swap, pinned)
        actions.append(jvm.txn_action(spark, write_id, txn_version(a.floor), _now_ms()))
        operation = jvm.overwrite(spark, swap.column, swap.dates, metadata)
        if a.number == 1:
            seam.pause("before_commit")
        seam.io("commit")
        with commit_lock.held(swap.table_dir, "publish or restore"):
            version = jvm.commit(spark, txn, actions, operation)
        seam.io("commit.landed")
        return version

    def landed(a: Attempt) -> int | None:
        # A post-commit step (hook, checkpoint) failed after it.
        return commit_of_write(swap.table_dir, write_id, a.floor)

    def retry(exc: Exception, a: Attempt) -> bool:
        if not jvm.is_lost_race(spark, exc):
            return False
        if swap.check_base:
            _refuse_changed(swap, texts, exc)
        return True

    return committing(Commit(f"commit to {swap.table_dir}", attempt, landed, retry))


def _new_table_schema(swap: Swap) -> str:
    """The schema a publish creates its table with: the staged one, every column nullable as
    Delta's writer makes a table's."""
    from pyspark.sql.types import StructType

    if swap.schema_json is None:
        raise LakeError(f"table {swap.name} does not exist and nothing says its schema")
    return nullable(StructType.fromJson(json.loads(swap.schema_json))).json()


def _refuse_changed(swap: Swap, texts: set[str], cause: Exception | None) -> None:
    changed = touched_after(swap.table_dir, swap.column, swap.base, texts)
    if changed:
        if swap.creates:
            audited = (
                "the table did not exist when the data was staged"
                if swap.base is None
                else f"after version {swap.base} that the staged data was audited against"
            )
            raise LakeConflict(
                f"{swap.name}: partitions {sorted(changed)} changed; {audited}; stage again"
            ) from cause
        raise LakeConflict(
            f"{swap.name}: partitions {sorted(changed)} changed after version {swap.base}; "
            "restoring them would revert that write"
        ) from cause


def _actions(spark: SparkSession, txn: Any, swap: Swap, version: int) -> list[Any]:
    """The removes and adds of ``swap`` in ``txn`` (which reads ``version``), after checking the
    table it reads."""
    schema_json, columns, properties = jvm.table_shape(txn)
    if columns != [swap.column]:
        raise LakeError(f"table {swap.name} is partitioned by {columns}, not [{swap.column!r}]")
    reasons = _reasons(schema_json, properties)
    if reasons:
        raise LakeError(f"table {swap.name} now has {', '.join(reasons)}: write it again")
    if swap.schema_json is not None:
        _check_schema(swap.name, schema_json, swap.schema_json)
    current = jvm.partition_files(
        spark, txn, swap.column, swap.dates, _current_adds(spark, swap, version)
    )
    adding = {add["path"] for add in swap.adds}
    kept = {jvm.path_of(f) for f in current} & adding
    removes = jvm.removes([f for f in current if jvm.path_of(f) not in kept], _now_ms())
    return removes + [jvm.add_action(spark, a) for a in swap.adds if a["path"] not in kept]


def _check_schema(name: str, table_json: str, new_json: str) -> None:
    from pyspark.sql.types import StructType

    def types(text: str) -> dict[str, Any]:
        return {f.name: f.dataType for f in StructType.fromJson(json.loads(text)).fields}

    have, new = types(table_json), types(new_json)
    if have != new:
        raise LakeError(
            f"schema of the new data for {name} differs from the table: "
            f"table {sorted((k, v.simpleString()) for k, v in have.items())}, "
            f"new {sorted((k, v.simpleString()) for k, v in new.items())}"
        )


def _check_on_disk(table_dir: str, relative: str, size: int) -> None:
    path = os.path.join(table_dir, relative)
    try:
        found = storage_for(table_dir).size(path)
    except FileNotFoundError:
        raise LakeError(f"{table_dir}: {relative} is missing; it cannot be committed") from None
    if found != size:
        raise LakeError(f"{path} has {found} bytes, the log would say {size}")


def _now_ms() -> int:
    return int(time.time() * 1000)
