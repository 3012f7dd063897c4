"""Lake maintenance on every engine: compaction keeps every row and joins small files,
checkpoints appear, vacuum honours the retention and never deletes an open staged version's
files, and the whole routine (``lake.maintenance.maintain_tables``) over several tables."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import Counter

import pytest

from backfill_assets.lake import LakeError
from backfill_assets.lake.maintenance import maintain_tables
from backfill_assets.lake.manifests import STAGED_DIR
from backfill_assets.settings import retention_days
from backfill_assets_tests.lake.lake_support import (
    THINGS,
    age,
    commit,
    content,
    killed_writer,
    log_files,
)

D1, D2, D3 = dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)
SCHEMA = "d date, id bigint, tag string"
TABLE = THINGS
OTHER = "raw/others"


def rows_of(n_per_day: dict, tag: str = "t"):
    return [(day, i, f"{tag}{i}") for day, n in n_per_day.items() for i in range(n)]


def write_in_pieces(lake, rows, days, pieces: int, table=TABLE, run_id="w"):
    """A replace of ``days`` with the first of ``pieces`` slices of ``rows``, then another
    writer's appends of the others: several small files per day, as appends leave them."""
    chunks = [rows[i::pieces] for i in range(pieces)]
    lake.replace_partitions(
        table, lake.spark.createDataFrame(chunks[0], SCHEMA), "d", days, commit(run_id)
    )
    for chunk in chunks[1:]:
        if not chunk:
            continue
        if lake.engine.name == "delta-rs":
            import pyarrow as pa
            from deltalake import write_deltalake

            schema = pa.schema([("d", pa.date32()), ("id", pa.int64()), ("tag", pa.string())])
            write_deltalake(
                str(lake.path(table)),
                pa.Table.from_pylist(
                    [dict(zip(("d", "id", "tag"), r, strict=True)) for r in chunk], schema
                ),
                mode="append",
            )
        else:
            (
                lake.spark.createDataFrame(chunk, SCHEMA)
                .coalesce(1)
                .write.format("delta")
                .mode("append")
                .save(str(lake.path(table)))
            )


def files_per_day(lake, table=TABLE) -> Counter:
    return Counter(path.split("/")[0] for path in log_files(lake, table))


def test_compaction_joins_small_files_and_keeps_every_row(lake):
    rows = rows_of({D1: 40, D2: 25, D3: 1})
    write_in_pieces(lake, rows, [D1, D2, D3], pieces=4)
    expected = Counter(day for day, _, _ in rows)  # rows per partition, counted in Python
    before = files_per_day(lake)
    assert before["d=2024-01-01"] > 1 and before["d=2024-01-02"] > 1
    last_written = {p.partition: p.last_written_version for p in lake.partitions(TABLE, "d")}
    version = lake.version(TABLE)
    result = lake.compact(TABLE, "d", commit("compact"))
    assert result.version == version + 1 and lake.version(TABLE) == version + 1
    after = files_per_day(lake)
    assert sum(after.values()) < sum(before.values())
    assert after == Counter({"d=2024-01-01": 1, "d=2024-01-02": 1, "d=2024-01-03": 1})
    assert result.files_removed == sum(before.values()) - before["d=2024-01-03"]
    assert lake.row_counts(TABLE, "d") == dict(expected)
    assert content(lake) == sorted(rows)
    # dataChange false: no partition counts as rewritten by it
    assert {
        p.partition: p.last_written_version for p in lake.partitions(TABLE, "d")
    } == last_written
    assert lake.history(TABLE)[0]["metadata"]["operation"] == "compact"
    assert lake.compact(TABLE, "d", commit("again")).version is None  # nothing left to join
    assert lake.version(TABLE) == version + 1


def test_compaction_between_stage_and_publish_is_no_conflict(lake):
    write_in_pieces(lake, rows_of({D1: 20, D2: 20}, "old"), [D1, D2], pieces=3)
    new = rows_of({D1: 5}, "new")
    staged = lake.staging.stage(
        TABLE, lake.spark.createDataFrame(new, SCHEMA), "d", [D1], commit("new")
    )
    assert lake.compact(TABLE, "d", commit("compact")).version == staged.base_version + 1
    # the compaction changed no row the audit saw: no conflict, and the publish wins
    assert lake.staging.publish(staged).version == staged.base_version + 2
    assert content(lake) == sorted(new + rows_of({D2: 20}, "old"))


def test_checkpoint_file_appears(lake):
    write_in_pieces(lake, rows_of({D1: 3}), [D1], pieces=1)
    write_in_pieces(lake, rows_of({D1: 4}), [D1], pieces=1)
    log_dir = lake.path(TABLE) / "_delta_log"
    assert not list(log_dir.glob("*.checkpoint*.parquet"))
    assert lake.checkpoint(TABLE) == 1
    assert (log_dir / f"{1:020d}.checkpoint.parquet").is_file()
    assert json.loads((log_dir / "_last_checkpoint").read_text())["version"] == 1
    assert content(lake) == sorted(rows_of({D1: 4}))


def test_replaced_files_are_deleted_only_past_retention(lake):
    write_in_pieces(lake, rows_of({D1: 3}, "old"), [D1], pieces=1)
    replaced = log_files(lake)
    write_in_pieces(lake, rows_of({D1: 2}, "new"), [D1], pieces=1)
    done = maintain_tables(lake, [(TABLE, "d")], 7, commit("maintain"))
    assert done[0].vacuumed == [] and done[0].vacuum_refused is None
    assert all((lake.path(TABLE) / p).exists() for p in replaced)  # within the retention
    assert set(lake.vacuum(TABLE, retention_hours=0)) >= replaced  # past it
    assert not any((lake.path(TABLE) / p).exists() for p in replaced)
    assert content(lake) == sorted(rows_of({D1: 2}, "new"))


def test_maintenance_never_deletes_an_open_staged_versions_files(lake):
    """A stage that has run for 8 days wrote files 8 days old; its manifest is new. Vacuum
    judges such a file by its age: with a 7-day retention it would delete it."""
    write_in_pieces(lake, rows_of({D1: 3, D2: 3}, "old"), [D1, D2], pieces=2)
    staged = lake.staging.stage(
        TABLE,
        lake.spark.createDataFrame(rows_of({D1: 4}, "new"), SCHEMA),
        "d",
        [D1],
        commit("slow"),
    )
    for f in staged.files:
        age(lake.path(TABLE) / f.path, 8)
    with pytest.raises(LakeError, match="open staged versions"):
        lake.vacuum(TABLE, retention_hours=7 * 24)
    # in another table, files no version names: one older than the retention, one younger
    write_in_pieces(lake, rows_of({D1: 2}), [D1], pieces=1, table=OTHER)
    other_dir = lake.path(OTHER) / "d=2024-01-01"
    (other_dir / "part-killed-old.parquet").write_bytes(b"x")
    (other_dir / "part-killed-young.parquet").write_bytes(b"x")
    age(other_dir / "part-killed-old.parquet", 8)
    age(other_dir / "part-killed-young.parquet", 6)

    done = {
        t.table: t
        for t in maintain_tables(
            lake, [(TABLE, "d"), (OTHER, "d"), ("raw/none", "d")], 7, commit("maintain")
        )
    }
    assert done[TABLE].expired_staged == [] and "open staged versions" in done[TABLE].vacuum_refused
    assert all((lake.path(TABLE) / f.path).exists() for f in staged.files)
    assert [s.id for s in lake.staging.versions(TABLE)] == [staged.id]
    assert done[TABLE].compaction.version is not None and done[TABLE].checkpoint_version is not None
    assert done[OTHER].vacuumed == ["d=2024-01-01/part-killed-old.parquet"]
    assert (other_dir / "part-killed-young.parquet").exists()
    assert done["raw/none"].missing
    lake.staging.publish(staged)  # still publishable after maintenance
    assert content(lake) == sorted(rows_of({D1: 4}, "new") + rows_of({D2: 3}, "old"))


def test_a_retention_below_the_floor_is_refused_before_anything_runs(lake):
    write_in_pieces(lake, rows_of({D1: 3}), [D1], pieces=3)
    with pytest.raises(ValueError, match="in-flight writers"):
        maintain_tables(lake, [(TABLE, "d")], 6.9, commit("maintain"))
    with pytest.raises(ValueError, match="at least 7"):
        retention_days({"BACKFILL_RETENTION_DAYS": "2"})
    assert retention_days({}) == 14 and retention_days({"BACKFILL_RETENTION_DAYS": "7"}) == 7
    assert lake.version(TABLE) == 2 and sum(files_per_day(lake).values()) == 3


def test_vacuum_with_no_file_past_the_retention_deletes_nothing_and_commits_nothing(lake):
    write_in_pieces(lake, rows_of({D1: 3}, "old"), [D1], pieces=1)
    replaced = log_files(lake)
    write_in_pieces(lake, rows_of({D1: 2}, "new"), [D1], pieces=1)
    version = lake.version(TABLE)
    assert lake.vacuum(TABLE, retention_hours=1) == []
    # Every file is younger than an hour: nothing to delete, so no VACUUM START/END commits
    assert lake.version(TABLE) == version
    assert all(lake.storage.exists(f"{lake.table_location(TABLE)}/{p}") for p in replaced)
    assert content(lake) == sorted(rows_of({D1: 2}, "new"))


def test_maintenance_removes_a_killed_writers_temporary_manifest_past_the_retention(
    spark, tmp_path
):
    """A writer killed between writing a staged manifest and renaming it into place leaves its
    temporary file in ``_staged/``; nothing reads it. Past the retention, maintenance deletes
    it; a younger one stays (local disk: an S3 write is one PUT and leaves none)."""
    from backfill_assets.lake import Lake

    lake = Lake(tmp_path / "lake", spark, engine="delta-rs")
    write_in_pieces(lake, rows_of({D1: 2}), [D1], pieces=1)
    folder = lake.path(TABLE) / STAGED_DIR
    old, young = killed_writer(folder / "a.json"), killed_writer(folder / "b.json")
    age(folder / old, 8)
    age(folder / young, 6)
    maintain_tables(lake, [(TABLE, "d")], 7, commit("maintain"))
    left = os.listdir(folder)
    assert old not in left and young in left
    assert content(lake) == sorted(rows_of({D1: 2}))
