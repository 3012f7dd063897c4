"""Durability on local disk: what the lake writes (Parquet files, manifests, delta-rs's commit
files) is synced with its folders before it counts, and a commit file torn by a crash is a clear
LakeError naming the file and the fix, not a parse error. Counted by watching ``os.fsync`` in
this process: which files and folders were synced, not whether the disk kept them."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from backfill_assets.lake import LakeError
from backfill_assets.lake.durable import remove_dead_temporaries, write_atomically
from backfill_assets.lake.parquet_writer import _PartitionSink
from backfill_assets_tests.lake.lake_support import THINGS, age, commit, killed_writer
from backfill_assets_tests.lake.test_lake_staged import D1, D2, frame


@pytest.fixture
def synced(monkeypatch) -> list[str]:
    """The paths of the files and folders ``os.fsync`` is called on in this process, in order."""
    paths: list[str] = []
    real = os.fsync

    def fsync(fd) -> None:
        number = fd if isinstance(fd, int) else fd.fileno()
        paths.append(os.readlink(f"/proc/self/fd/{number}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return paths


def test_a_manifest_is_synced_with_its_folder_and_a_new_folders_parent(tmp_path, synced):
    path = tmp_path / "table" / "_staged" / "s1.json"
    write_atomically(path, '{"a": 1}', "manifest", create=True)
    assert path.read_text() == '{"a": 1}'
    assert str(path.parent) in synced  # the rename or link into it
    assert str(path.parent.parent) in synced  # the new _staged folder's entry
    data_sync = next(i for i, p in enumerate(synced) if p.startswith(str(path)))
    assert data_sync < synced.index(str(path.parent)), "the folder was synced before the file"
    synced.clear()
    write_atomically(path, '{"a": 2}', "manifest")
    assert str(path.parent) in synced and str(path.parent.parent) not in synced


def test_the_parquet_writer_syncs_each_file_and_the_folders_it_made(tmp_path, synced):
    sink = _PartitionSink(str(tmp_path), "d")
    batch = pa.record_batch({"d": pa.array([D1], pa.date32()), "v": pa.array([1], pa.int64())})
    sink.write(D1.isoformat(), batch)
    sink.write(D2.isoformat(), batch)
    written = [os.path.join(tmp_path, row[0]) for row in sink.close()]
    assert len(written) == 2
    for path in written:
        assert path in synced
        assert synced.index(os.path.dirname(path)) > synced.index(path)
    assert str(tmp_path) in synced  # the two new partition folders' entries


def test_each_delta_rs_commit_is_synced_with_the_log_folder(spark, tmp_path, synced):
    from backfill_assets.lake import Lake

    lake = Lake(tmp_path / "lake", spark, engine="delta-rs")
    rows = frame(lake, [(D1, 1, "a"), (D2, 2, "b")])
    lake.replace_partitions(THINGS, rows, "d", [D1, D2], commit("v0"))
    log = lake.path(THINGS) / "_delta_log"
    assert str(log / f"{0:020d}.json") in synced
    assert synced.index(str(log)) > synced.index(str(log / f"{0:020d}.json"))
    assert str(lake.path(THINGS)) in synced  # the new _delta_log folder's entry
    synced.clear()
    staged = lake.staging.stage(THINGS, frame(lake, [(D1, 10, "new")]), "d", [D1], commit("s"))
    lake.staging.publish(staged)
    assert str(log / f"{1:020d}.json") in synced and str(log) in synced


@pytest.mark.parametrize("torn", ["empty", "truncated"])
def test_a_torn_newest_commit_is_a_clear_error_naming_the_file_and_the_fix(lake, torn):
    rows = [(D1, 1, "a"), (D2, 2, "b")]
    lake.replace_partitions(THINGS, frame(lake, rows), "d", [D1, D2], commit("v0"))
    lake.replace_partitions(THINGS, frame(lake, [(D1, 3, "c")]), "d", [D1], commit("v1"))
    newest = lake.path(THINGS) / "_delta_log" / f"{1:020d}.json"
    text = newest.read_text()
    newest.write_text("" if torn == "empty" else text[: len(text) // 2])
    for attempt in (
        lambda: lake.version(THINGS),
        lambda: lake.read_table(THINGS),
        lambda: lake.replace_partitions(THINGS, frame(lake, rows), "d", [D1, D2], commit("v")),
    ):
        with pytest.raises(LakeError, match="torn") as error:
            attempt()
        assert str(newest) in str(error.value) and f"{newest}.torn" in str(error.value)
    os.rename(newest, f"{newest}.torn")  # the fix the error names
    assert lake.version(THINGS) == 0
    df, _ = lake.read_table(THINGS)
    assert sorted(tuple(r) for r in df.collect()) == sorted(rows)


def test_a_killed_writers_temporary_file_goes_once_older_than_the_age_given(tmp_path):
    folder = tmp_path / "table" / "_staged"
    old, young = killed_writer(folder / "s1.json"), killed_writer(folder / "s2.json")
    write_atomically(folder / "s3.json", "{}", "manifest")
    (folder / "notes.tmp").write_text("not a writer's")  # not named as ours: left alone
    for name in (old, "s3.json", "notes.tmp"):
        age(folder / name, 2 / 24)
    assert remove_dead_temporaries(str(folder), older_than_seconds=3600) == [str(folder / old)]
    assert sorted(os.listdir(folder)) == sorted([young, "s3.json", "notes.tmp"])
    assert remove_dead_temporaries(str(tmp_path / "none"), older_than_seconds=0) == []
