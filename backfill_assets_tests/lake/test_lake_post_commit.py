"""A write whose commit landed but whose post-commit step failed (a checkpoint that cannot be
written, a post-commit hook) succeeded: the lake finds its write id in the log and returns its
version, instead of taking the error for a lost race (another commit) or a failed write.

The post-commit step fails for real, on each engine in the way that engine has:
- delta-rs writes a checkpoint after a commit when the table's ``delta.checkpointInterval`` says
  so; a directory where the checkpoint file must go makes that write fail;
- delta-spark runs post-commit hooks; with ``delta.compatibility.symlinkFormatManifest.enabled``
  it writes ``_symlink_format_manifest/``, and a plain file at that path makes the hook fail
  (Delta: "Committing to the Delta table version N succeeded but error while executing
  post-commit hook").
"""

from __future__ import annotations

import datetime as dt
import os
import shutil

from backfill_assets.lake import CommitInfo

D1, D2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
SCHEMA = "d date, id bigint, tag string"
TABLE = "staging/things"
BLOCKED = 6  # versions past the current one whose post-commit step is made to fail


def frame(lake, rows):
    return lake.spark.createDataFrame(rows, SCHEMA)


def commit(run_id: str) -> CommitInfo:
    return CommitInfo(run_id=run_id, code_version="abc123")


def content(lake):
    df, _ = lake.read_table(TABLE)
    return sorted(tuple(r) for r in df.collect())


def break_post_commit(lake) -> list[str]:
    """Make every later commit's post-commit step fail; the paths that do it, to undo."""
    table_dir = str(lake.path(TABLE))
    if lake.engine.name == "delta-rs":
        from deltalake import DeltaTable

        DeltaTable(table_dir).alter.set_table_properties({"delta.checkpointInterval": "1"})
        now = DeltaTable(table_dir).version()
        blockers = [
            os.path.join(table_dir, "_delta_log", f"{v:020d}.checkpoint.parquet")
            for v in range(now + 1, now + 1 + BLOCKED)
        ]
        for path in blockers:
            os.makedirs(path)
        return blockers
    lake.spark.sql(
        f"ALTER TABLE delta.`{table_dir}` SET TBLPROPERTIES "
        "('delta.compatibility.symlinkFormatManifest.enabled' = 'true')"
    )
    manifest = os.path.join(table_dir, "_symlink_format_manifest")
    shutil.rmtree(manifest, ignore_errors=True)
    with open(manifest, "w", encoding="utf-8") as blocker:
        blocker.write("not a folder")
    return [manifest]


def unblock(paths: list[str]) -> None:
    for path in paths:
        if os.path.isdir(path):
            os.rmdir(path)
        elif os.path.exists(path):
            os.remove(path)


def commits_of(lake, run_id: str) -> list[int]:
    return [e["version"] for e in lake.history(TABLE) if e["metadata"].get("run_id") == run_id]


def test_every_commit_records_a_unique_write_id(lake):
    lake.replace_partitions(TABLE, frame(lake, [(D1, 1, "a")]), "d", [D1], commit("one"))
    lake.replace_partitions(TABLE, frame(lake, [(D1, 2, "b")]), "d", [D1], commit("one"))
    ids = [e["metadata"].get("write_id") for e in lake.history(TABLE)]
    assert all(ids) and len(set(ids)) == 2


def test_a_replace_whose_post_commit_step_fails_returns_its_version_once(lake):
    lake.replace_partitions(
        TABLE, frame(lake, [(D1, 1, "old"), (D2, 2, "old")]), "d", [D1, D2], commit("old")
    )
    blockers = break_post_commit(lake)
    before = lake.version(TABLE)
    result = lake.replace_partitions(
        TABLE, frame(lake, [(D1, 10, "new")]), "d", [D1], commit("new")
    )
    assert result.version == before + 1 and result.attempts == 1
    assert commits_of(lake, "new") == [before + 1]  # one commit: no retry after it landed
    assert lake.version(TABLE) == before + 1
    unblock(blockers)
    assert content(lake) == [(D1, 10, "new"), (D2, 2, "old")]


def test_a_publish_whose_post_commit_step_fails_is_published_not_a_conflict(lake):
    lake.replace_partitions(
        TABLE, frame(lake, [(D1, 1, "old"), (D2, 2, "old")]), "d", [D1, D2], commit("old")
    )
    blockers = break_post_commit(lake)
    staged = lake.staging.stage(
        TABLE, frame(lake, [(D1, 10, "new"), (D2, 20, "new")]), "d", [D1, D2], commit("new")
    )
    result = lake.staging.publish(staged)
    assert result.version == staged.base_version + 1
    assert commits_of(lake, "new") == [result.version]
    assert lake.staging.versions(TABLE)[0].published == {D1: result.version, D2: result.version}
    unblock(blockers)
    assert content(lake) == [(D1, 10, "new"), (D2, 20, "new")]
