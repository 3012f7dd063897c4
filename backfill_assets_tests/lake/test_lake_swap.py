"""Publish and restore as metadata-only commits: on every engine the commit only moves files; on
delta-spark (Delta's transaction API) a commit to the same partitions just before the swap is a
conflict, one to other partitions or a compaction is not, an untested Delta or a table with
constraints falls back to a checked copy, and the JVM signatures the swap uses are pinned."""

from __future__ import annotations

import json
import logging
import os

import pytest
from deltalake import DeltaTable

import backfill_assets.lake.delta_spark_jvm as jvm
import backfill_assets.lake.delta_spark_swap as swap
from backfill_assets.lake import Lake, LakeConflict, LakeError, snapshot
from backfill_assets.lake.log import relative_path
from backfill_assets.spark.delta_jars import DELTA_VERSION
from backfill_assets_tests.lake.lake_support import THINGS, commit, content, log_files
from backfill_assets_tests.lake.test_lake_staged import D1, D2, D3, frame, write_old

TABLE = THINGS
NATIVE = pytest.mark.parametrize("lake", ["delta-spark"], indirect=True)
NEW = [(D1, 10, "new"), (D2, 20, "new")]


def parquet_files(lake) -> set[str]:
    """Every data file under the table's folder, in the log or not (the log's own excluded)."""
    root = lake.path(TABLE)
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith("_")]
        found |= {os.path.relpath(os.path.join(folder, f), root) for f in files}
    return {f for f in found if f.endswith(".parquet")}


def actions(lake, version: int) -> list[tuple[str, dict]]:
    """(kind, body) of each action of commit ``version``, read from its commit file."""
    path = lake.path(TABLE) / "_delta_log" / f"{version:020d}.json"
    return [next(iter(json.loads(line).items())) for line in path.read_text().splitlines()]


def paths(lake, version: int, kind: str) -> set[str]:
    return {body["path"] for k, body in actions(lake, version) if k == kind}


def files_of_day(lake, day, version: int | None = None) -> set[str]:
    """The data files of ``day`` at ``version``, as delta-rs reads the log."""
    table = DeltaTable(str(lake.path(TABLE)), version=version)
    root = str(lake.path(TABLE))
    return {
        os.path.relpath(uri.removeprefix("file://"), root)
        for uri in table.file_uris(partition_filters=[("d", "=", day.isoformat())])
    }


def test_publish_is_one_commit_of_file_actions_and_writes_no_data(lake):
    write_old(lake)
    replaced = files_of_day(lake, D1) | files_of_day(lake, D2)
    kept = files_of_day(lake, D3)
    staged = lake.staging.stage(TABLE, frame(lake, NEW), "d", [D1, D2], commit("new"))
    on_disk = parquet_files(lake)
    result = lake.staging.publish(staged)
    assert result.version == 1 and lake.version(TABLE) == 1
    assert parquet_files(lake) == on_disk  # not one data file written
    kinds = [kind for kind, _ in actions(lake, 1)]
    # the file actions, and the write's Delta transaction id (test_lake_txn.py)
    assert kinds.count("commitInfo") == 1 and kinds.count("txn") == 1
    assert set(kinds) == {"commitInfo", "add", "remove", "txn"}
    files = [body for kind, body in actions(lake, 1) if kind in ("add", "remove")]
    assert all(body["dataChange"] for body in files)
    # Recorded as the partition overwrite it is (a "Manual Update" would cost delta-spark a
    # reconstruction of the whole table state after the commit).
    info = dict(actions(lake, 1))["commitInfo"]
    assert info["operation"] == "WRITE" and info["operationParameters"]["mode"] == "Overwrite"
    assert paths(lake, 1, "add") == {f.path for f in staged.files}
    assert paths(lake, 1, "remove") == replaced
    assert log_files(lake) == {f.path for f in staged.files} | kept
    assert content(lake) == sorted([*NEW, (D3, 3, "old")])


@NATIVE
def test_publishing_a_new_table_swaps_the_staged_files_in_without_a_copy(lake):
    """The first publish of a year into a new table must not write the year again: the commit
    that creates the table adds the staged files, as any later publish's swaps them in."""
    staged = lake.staging.stage(TABLE, frame(lake, NEW), "d", [D1, D2], commit("first"))
    on_disk = parquet_files(lake)
    assert on_disk == {f.path for f in staged.files} and not lake.exists(TABLE)
    result = lake.staging.publish(staged)
    assert parquet_files(lake) == on_disk  # not one data file written
    assert result.version == 0 and lake.version(TABLE) == 0
    created = dict(actions(lake, 0))
    assert paths(lake, 0, "add") == on_disk
    # The plain protocol every engine creates tables with (test_lake_engines.PROTOCOL).
    assert (created["protocol"]["minReaderVersion"], created["protocol"]["minWriterVersion"]) == (
        1,
        2,
    )
    assert created["metaData"]["partitionColumns"] == ["d"]
    assert all(f["nullable"] for f in json.loads(created["metaData"]["schemaString"])["fields"])
    assert result.rows_by_partition == {D1: 1, D2: 1}
    assert content(lake) == sorted(NEW)


def test_restore_is_one_commit_that_puts_the_old_files_back(lake):
    write_old(lake)
    old_d1, old_d2 = files_of_day(lake, D1), files_of_day(lake, D2)
    staged = lake.staging.stage(TABLE, frame(lake, NEW), "d", [D1, D2], commit("new"))
    lake.staging.publish(staged)
    on_disk = parquet_files(lake)
    result = lake.restore_partitions(TABLE, "d", [D1], 0, commit("rollback"))
    assert result.version == 2 and result.rows_by_partition == {D1: 1}
    assert parquet_files(lake) == on_disk
    assert paths(lake, 2, "add") == old_d1
    assert paths(lake, 2, "remove") == {f.path for f in staged.files_of([D1])}
    assert content(lake) == [(D1, 1, "old"), (D2, 20, "new"), (D3, 3, "old")]
    assert lake.history(TABLE)[0]["metadata"]["restored_from_version"] == 0
    # Once vacuum deleted the files version 1 had for D1, that version cannot come back.
    lake.staging.discard(staged)
    vacuumed = set(lake.vacuum(TABLE, retention_hours=0))
    assert vacuumed == {f.path for f in staged.files_of([D1])} | old_d2
    vacuumed_at = lake.version(TABLE)
    with pytest.raises(LakeError, match="vacuumed"):
        lake.restore_partitions(TABLE, "d", [D1], 1, commit("too-late"))
    assert lake.version(TABLE) == vacuumed_at


def commit_after(monkeypatch, concurrent) -> None:
    """Run ``concurrent()`` once, right before the swap's commit call: inside the window that a
    check of the log before committing cannot see."""
    real = jvm.commit
    pending = [concurrent]

    def commit_late(*args, **kwargs):
        while pending:
            pending.pop()()
        return real(*args, **kwargs)

    monkeypatch.setattr(jvm, "commit", commit_late)


def append(lake, rows) -> None:
    df = frame(lake, rows).coalesce(1)
    df.write.format("delta").mode("append").save(str(lake.path(TABLE)))


@NATIVE
@pytest.mark.parametrize("writer", ["replace", "append", "delete"])
def test_a_commit_to_the_same_partition_just_before_the_swap_is_a_conflict(
    lake, monkeypatch, writer
):
    write_old(lake)
    staged = lake.staging.stage(TABLE, frame(lake, NEW), "d", [D1, D2], commit("new"))
    live = {
        "replace": [(D1, 99, "live"), (D2, 2, "old"), (D3, 3, "old")],
        "append": [(D1, 1, "old"), (D1, 99, "live"), (D2, 2, "old"), (D3, 3, "old")],
        "delete": [(D2, 2, "old"), (D3, 3, "old")],
    }[writer]
    concurrent = {
        "replace": lambda: lake.replace_partitions(
            TABLE, frame(lake, [(D1, 99, "live")]), "d", [D1], commit("live")
        ),
        "append": lambda: append(lake, [(D1, 99, "live")]),
        "delete": lambda: lake.spark.sql(
            f"DELETE FROM delta.`{lake.path(TABLE)}` WHERE d = DATE'2024-01-01'"
        ),
    }[writer]
    commit_after(monkeypatch, concurrent)
    with pytest.raises(LakeConflict, match=r"\['2024-01-01'\]") as refused:
        lake.staging.publish(staged)
    cause = refused.value.__cause__  # Delta's own check found it: a Py4JJavaError naming its
    # class, or the class delta-spark's Python package converts it to once loaded
    assert "Concurrent" in f"{type(cause).__name__}: {cause}"
    assert lake.version(TABLE) == 1 and content(lake) == live
    assert lake.commit_metadata(TABLE, 1).get("run_id") != "new"  # nor took the publish's
    assert lake.staging.versions(TABLE)[0].published == {}


@NATIVE
@pytest.mark.parametrize("day", [D1, D3])
def test_a_table_created_just_before_the_creating_publish_commits(lake, monkeypatch, day):
    """Another writer's version 0 lands first: Delta refuses the publish's creating commit; a
    creation that wrote one of the publish's days is a conflict, one that wrote another day is
    retried as a swap into the table it made."""
    staged = lake.staging.stage(TABLE, frame(lake, NEW), "d", [D1, D2], commit("new"))
    live = [(day, 99, "live")]
    commit_after(
        monkeypatch,
        lambda: lake.replace_partitions(TABLE, frame(lake, live), "d", [day], commit("live")),
    )
    if day == D1:
        with pytest.raises(LakeConflict, match=r"\['2024-01-01'\]") as refused:
            lake.staging.publish(staged)
        # Delta's own check found it: another commit made version 0 first.
        assert "ProtocolChangedException" in str(refused.value.__cause__)
        assert "did not exist" in str(refused.value)
        assert lake.version(TABLE) == 0 and content(lake) == live
    else:
        result = lake.staging.publish(staged)
        assert (result.version, result.attempts) == (1, 2)
        assert content(lake) == sorted([*NEW, *live])


@NATIVE
def test_a_commit_to_another_partition_just_before_the_swap_does_not_conflict(lake, monkeypatch):
    write_old(lake)
    staged = lake.staging.stage(TABLE, frame(lake, NEW), "d", [D1, D2], commit("new"))
    commit_after(
        monkeypatch,
        lambda: lake.replace_partitions(
            TABLE, frame(lake, [(D3, 33, "live")]), "d", [D3], commit("live")
        ),
    )
    result = lake.staging.publish(staged)
    assert (result.version, result.attempts) == (2, 1)
    assert content(lake) == sorted([*NEW, (D3, 33, "live")])


@NATIVE
def test_a_compaction_just_before_the_swap_is_retried_over_not_a_conflict(lake, monkeypatch):
    write_old(lake)
    append(lake, [(D1, 4, "old")])  # D1 has two files: something to compact
    staged = lake.staging.stage(TABLE, frame(lake, NEW), "d", [D1, D2], commit("new"))
    commit_after(monkeypatch, lambda: lake.compact(TABLE, "d", commit("compact")))
    result = lake.staging.publish(staged)
    assert (result.version, result.attempts) == (3, 2)
    assert lake.history(TABLE)[1]["metadata"]["operation"] == "compact"
    assert paths(lake, 3, "add") == {f.path for f in staged.files}
    assert content(lake) == sorted([*NEW, (D3, 3, "old")])


@NATIVE
def test_a_version_closed_just_before_the_swap_commits_is_a_clear_error(lake, monkeypatch):
    write_old(lake)
    staged = lake.staging.stage(TABLE, frame(lake, [(D1, 10, "new")]), "d", [D1], commit("new"))
    commit_after(monkeypatch, lambda: lake.staging.discard(staged))
    with pytest.raises(LakeError, match=r"version 1 .*closed .*restore"):
        lake.staging.publish(staged)


@NATIVE
def test_the_delta_internals_the_swap_calls_are_pinned(lake):
    """A jar upgrade fails here, naming each method that moved, before any publish runs on it."""
    assert jvm.missing_signatures(lake.spark) == []
    assert jvm.delta_version(lake.spark) == DELTA_VERSION
    assert DELTA_VERSION in jvm.TESTED_DELTA_VERSIONS


@NATIVE
def test_an_untested_delta_copies_with_a_warning(lake, monkeypatch, caplog):
    monkeypatch.setattr(jvm, "TESTED_DELTA_VERSIONS", ("0.0.0",))
    monkeypatch.setattr(jvm, "_warned", set())
    with caplog.at_level(logging.WARNING, logger=jvm.__name__):
        copying = Lake(lake.root, lake.spark, engine="delta-spark")
    assert f"delta-spark {DELTA_VERSION} is not one of the versions" in caplog.text
    write_old(copying)
    staged = copying.staging.stage(TABLE, frame(copying, NEW), "d", [D1, D2], commit("new"))
    copying.staging.publish(staged)
    assert not {f.path for f in staged.files} & log_files(copying)  # their rows were copied
    assert content(copying) == sorted([*NEW, (D3, 3, "old")])


@NATIVE
def test_a_table_with_a_check_constraint_publishes_a_checked_copy(lake, caplog):
    write_old(lake)
    table = f"delta.`{lake.path(TABLE)}`"
    lake.spark.sql(f"ALTER TABLE {table} ADD CONSTRAINT positive CHECK (id > 0)")
    bad = lake.staging.stage(TABLE, frame(lake, [(D1, -1, "bad")]), "d", [D1], commit("bad"))
    with pytest.raises(Exception, match="positive"):
        lake.staging.publish(bad)
    assert content(lake) == [(D1, 1, "old"), (D2, 2, "old"), (D3, 3, "old")]
    good = lake.staging.stage(TABLE, frame(lake, NEW), "d", [D1, D2], commit("good"))
    with caplog.at_level(logging.WARNING):
        lake.staging.publish(good)
    assert "delta.constraints.positive" in caplog.text
    assert not {f.path for f in good.files} & log_files(lake)
    assert content(lake) == sorted([*NEW, (D3, 3, "old")])


@NATIVE
def test_a_versions_files_from_deltalake_are_the_ones_delta_reconstructs(lake):
    """A restore lists the old version's files from deltalake's snapshot (``lake.snapshot``),
    not from Delta's JVM: each version's files, before and after a checkpoint, are the add
    actions Delta's own snapshot of that version holds (path, size, time, rows)."""
    write_old(lake)  # version 0
    lake.staging.publish(
        lake.staging.stage(TABLE, frame(lake, NEW), "d", [D1, D2], commit("new"))
    )  # 1
    lake.checkpoint(TABLE)  # of version 1: later versions are read from it
    lake.restore_partitions(TABLE, "d", [D1], 0, commit("rollback"))  # 2
    append(lake, [(D3, 30, "more")])  # 3
    root = str(lake.path(TABLE))
    for version in range(4):
        found = snapshot.plain(root, version)
        assert found is not None, version
        for days in ([D1], [D2, D3]):
            delta = jvm.snapshot_adds(lake.spark, root, version, "d", days)
            assert sorted(
                (f.path, f.day.isoformat(), f.size, f.modification_time, f.records)
                for f in found.in_days(days)
            ) == sorted(
                (
                    relative_path(root, a["path"]),
                    a["partitionValues"]["d"],
                    a["size"],
                    a["modificationTime"],
                    json.loads(a["stats"])["numRecords"],
                )
                for a in delta
            ), (version, days)


@NATIVE
def test_a_tables_shape_from_deltalake_is_the_one_delta_checks_writes_by(lake):
    """Whether a publish may swap files is decided on the schema and properties deltalake reads
    (``snapshot.shape``): every field's nullability and metadata (identity, generated column,
    comment) and the table's constraints as Delta's own snapshot holds them, so the same
    columns rule a swap out."""
    root = str(lake.path("shaped"))
    lake.spark.sql(
        f"CREATE TABLE delta.`{root}` (d DATE NOT NULL, id BIGINT GENERATED ALWAYS AS IDENTITY,"
        " amount DOUBLE, doubled DOUBLE GENERATED ALWAYS AS (amount * 2),"
        " note STRING COMMENT 'free text') USING DELTA PARTITIONED BY (d)"
    )
    lake.spark.sql(f"ALTER TABLE delta.`{root}` ADD CONSTRAINT positive CHECK (amount > 0)")
    version = lake.version("shaped")
    found = snapshot.shape(root, version)
    assert found is not None
    schema_json, _, properties = jvm.table_shape(jvm.snapshot_at(lake.spark, root, version))
    assert json.loads(found[0]) == json.loads(schema_json)
    assert found[1] == properties
    reasons = swap._reasons(*found)
    assert "table property delta.constraints.positive" in reasons
    assert "NOT NULL column d" in reasons
    assert "delta.generationExpression on column doubled" in reasons
    assert any(r.startswith("delta.identity.") and r.endswith("on column id") for r in reasons)
    assert not any(r.endswith(("column amount", "column note")) for r in reasons)


def test_a_restore_re_adds_a_foreign_file_whose_name_the_log_encodes(lake):
    """Another writer's data file named with a space and a ``%`` (the log spells it URL-encoded:
    ``a%20b%25.parquet``), on either engine: a read finds the file under its decoded name, and a
    restore that adds it back spells it as the log did, or no reader would find it."""
    write_old(lake)
    root = lake.path(TABLE)
    [(old, add)] = [
        (b["path"], b) for k, b in actions(lake, 0) if k == "add" and "2024-01-01" in b["path"]
    ]
    folder = old.rsplit("/", 1)[0]
    os.rename(root / old, root / folder / "a b%.parquet")
    encoded = f"{folder}/a%20b%25.parquet"
    foreign = [
        {"remove": {"path": old, "deletionTimestamp": add["modificationTime"], "dataChange": True}},
        {"add": {**add, "path": encoded}},
    ]
    (root / "_delta_log" / f"{1:020d}.json").write_text(
        "".join(json.dumps(action) + "\n" for action in foreign)
    )
    assert content(lake) == [(D1, 1, "old"), (D2, 2, "old"), (D3, 3, "old")]
    lake.staging.publish(
        lake.staging.stage(TABLE, frame(lake, NEW), "d", [D1, D2], commit("new"))
    )  # 2
    # the foreign file is out of D1: removed under the name the log gave it
    assert content(lake) == sorted([*NEW, (D3, 3, "old")])
    assert f"{folder}/a b%.parquet" not in log_files(lake)
    restored = lake.restore_partitions(TABLE, "d", [D1], 1, commit("rollback"))  # 3
    assert paths(lake, restored.version, "add") == {encoded}
    assert content(lake) == sorted(
        [(D1, 1, "old"), *(r for r in NEW if r[0] == D2), (D3, 3, "old")]
    )
    assert f"{folder}/a b%.parquet" in log_files(lake)  # delta-rs finds the file too
