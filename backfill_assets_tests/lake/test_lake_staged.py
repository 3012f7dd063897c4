"""Write-audit-publish in the lake, on every engine: staged rows stay invisible, publish replaces
the partitions in one commit that swaps in the staged files, a partition changed since staging is
never overwritten unseen, discard and expiry clean up. On an S3 lake too."""

from __future__ import annotations

import datetime as dt

import pytest

from backfill_assets.lake import LakeConflict, LakeError
from backfill_assets_tests.lake.lake_support import THINGS, commit, content, log_files, stored

D1, D2, D3 = dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)
SCHEMA = "d date, id bigint, tag string"
TABLE = THINGS
ON_S3 = True  # conftest.py: each case runs on a lake in S3 too
ON_S3_SPARK = True  # and on delta-spark there: the same cases on both engines


def frame(lake, rows):
    return lake.spark.createDataFrame(rows, SCHEMA)


def write_old(lake):
    """Version 0 of the table: one old row in each of D1, D2, D3 (a helper, not a fixture: in the
    parent process a delta-spark test's ``lake`` only stands in for the native child's)."""
    rows = [(D1, 1, "old"), (D2, 2, "old"), (D3, 3, "old")]
    lake.replace_partitions(TABLE, frame(lake, rows), "d", [D1, D2, D3], commit("old"))
    return sorted(rows)


def test_staged_rows_are_invisible_until_published(lake):
    old = write_old(lake)
    staged = lake.staging.stage(
        TABLE, frame(lake, [(D1, 10, "new"), (D2, 20, "new")]), "d", [D1, D2], commit("new")
    )
    assert lake.version(TABLE) == 0 and content(lake) == old
    assert sorted(tuple(r) for r in lake.staging.read(staged).collect()) == [
        (D1, 10, "new"),
        (D2, 20, "new"),
    ]
    assert sorted(tuple(r) for r in lake.staging.read(staged, [D2]).collect()) == [(D2, 20, "new")]
    assert staged.base_version == 0 and staged.rows_by_partition == {D1: 1, D2: 1}
    assert [s.id for s in lake.staging.versions(TABLE)] == [staged.id]


def test_publish_swaps_exactly_the_chosen_partitions_without_copying(lake):
    write_old(lake)
    staged = lake.staging.stage(
        TABLE, frame(lake, [(D1, 10, "new"), (D2, 20, "new")]), "d", [D1, D2], commit("new")
    )
    result = lake.staging.publish(staged, [D1])
    assert result.version == 1 and result.rows_by_partition == {D1: 1}
    assert content(lake) == [(D1, 10, "new"), (D2, 2, "old"), (D3, 3, "old")]
    d1_files = {f.path for f in staged.files if f.partition == D1}
    assert d1_files <= log_files(lake)  # the staged files themselves: a metadata swap
    assert lake.history(TABLE)[0]["metadata"]["run_id"] == "new"
    d2_files = {f.path for f in staged.files if f.partition == D2}
    assert lake.staging.discard(staged) == len(d2_files)
    assert not any(stored(lake, TABLE, p) for p in d2_files)
    assert lake.staging.versions(TABLE) == [] and content(lake)[0] == (D1, 10, "new")


def test_an_empty_staged_partition_publishes_empty(lake):
    write_old(lake)
    staged = lake.staging.stage(TABLE, frame(lake, [(D1, 10, "new")]), "d", [D1, D2], commit("new"))
    lake.staging.publish(staged)
    assert content(lake) == [(D1, 10, "new"), (D3, 3, "old")]


def test_a_partition_changed_after_staging_is_not_overwritten(lake):
    write_old(lake)
    staged = lake.staging.stage(
        TABLE, frame(lake, [(D1, 10, "new"), (D2, 20, "new")]), "d", [D1, D2], commit("new")
    )
    lake.replace_partitions(TABLE, frame(lake, [(D1, 99, "live")]), "d", [D1], commit("live"))
    with pytest.raises(LakeConflict, match="2024-01-01"):
        lake.staging.publish(staged, [D1, D2])
    assert content(lake) == [(D1, 99, "live"), (D2, 2, "old"), (D3, 3, "old")]
    lake.staging.publish(staged, [D2])  # untouched since staging: still safe to publish
    assert content(lake) == [(D1, 99, "live"), (D2, 20, "new"), (D3, 3, "old")]


def test_staging_a_new_table_then_publishing_creates_it(lake):
    staged = lake.staging.stage("fresh/t", frame(lake, [(D1, 1, "a")]), "d", [D1], commit("first"))
    assert not lake.exists("fresh/t") and staged.base_version is None
    # Each engine creates it with the files, in version 0 (test_lake_swap.py).
    assert lake.staging.publish(staged).version == lake.version("fresh/t") == 0
    assert content(lake, "fresh/t") == [(D1, 1, "a")]


def test_rows_outside_the_set_are_refused_before_anything_is_recorded(lake):
    old = write_old(lake)
    with pytest.raises(LakeError, match="outside"):
        lake.staging.stage(
            TABLE, frame(lake, [(D1, 1, "a"), (D3, 3, "c")]), "d", [D1], commit("bad")
        )
    assert lake.staging.versions(TABLE) == [] and content(lake) == old


def test_a_discarded_version_cannot_be_published(lake):
    old = write_old(lake)
    staged = lake.staging.stage(TABLE, frame(lake, [(D1, 10, "new")]), "d", [D1], commit("new"))
    lake.staging.discard(staged)
    with pytest.raises(LakeError, match="not open"):
        lake.staging.publish(staged)
    with pytest.raises(LakeError, match="not partitions"):
        lake.staging.publish(
            lake.staging.stage(TABLE, frame(lake, []), "d", [D1], commit("x")), [D2]
        )
    assert content(lake) == old


def test_vacuum_never_deletes_an_open_staged_version(lake):
    old = write_old(lake)
    staged = lake.staging.stage(TABLE, frame(lake, [(D1, 10, "new")]), "d", [D1], commit("new"))
    with pytest.raises(LakeError, match="open staged versions"):
        lake.vacuum(TABLE, retention_hours=0)
    assert lake.staging.expire(TABLE, retention_hours=1) == []  # younger than the retention
    assert lake.staging.expire(TABLE, retention_hours=0) == [staged.id]
    assert lake.vacuum(TABLE, retention_hours=0) == []
    assert content(lake) == old


def test_maintain_expires_old_staged_versions_then_removes_files_no_version_needs(lake):
    write_old(lake)
    replaced = log_files(lake)
    published = lake.staging.stage(
        TABLE,
        frame(lake, [(D1, 10, "new"), (D2, 20, "new"), (D3, 30, "new")]),
        "d",
        [D1, D2, D3],
        commit("new"),
    )
    lake.staging.publish(published)
    lake.staging.discard(published)
    abandoned = lake.staging.stage(
        TABLE, frame(lake, [(D1, 99, "abandoned")]), "d", [D1], commit("x")
    )
    assert lake.maintain(TABLE, retention_hours=24) == ([], [])  # everything is recent
    expired, deleted = lake.maintain(TABLE, retention_hours=0)
    assert expired == [abandoned.id]
    assert set(deleted) == replaced  # the files the publish removed from the table
    assert not any(stored(lake, TABLE, f.path) for f in abandoned.files)
    assert content(lake) == [(D1, 10, "new"), (D2, 20, "new"), (D3, 30, "new")]


def test_keep_staged_gathers_several_stagings_into_one_version(lake):
    old = write_old(lake)
    first = lake.staging.stage(
        TABLE, frame(lake, [(D1, 10, "a"), (D2, 20, "a")]), "d", [D1, D2], commit("a")
    )
    lake.staging.keep(first, [D1, D2], into="fix")
    assert lake.staging.discard(first) == 0  # its files moved to "fix"
    replaced = {f.path for f in first.files if f.partition == D2}
    second = lake.staging.stage(
        TABLE, frame(lake, [(D2, 21, "b"), (D3, 31, "b")]), "d", [D2, D3], commit("b")
    )
    kept = lake.staging.keep(second, [D2], into="fix")
    assert lake.staging.discard(second) == 1  # only D3's file, which was not kept
    assert not any(stored(lake, TABLE, p) for p in replaced)
    assert lake.version(TABLE) == 0 and content(lake) == old
    assert sorted(tuple(r) for r in lake.staging.read(kept).collect()) == [
        (D1, 10, "a"),
        (D2, 21, "b"),
    ]
    assert [s.id for s in lake.staging.versions(TABLE)] == ["fix"]
    lake.staging.publish(lake.staging.version(TABLE, "fix"))
    assert content(lake) == [(D1, 10, "a"), (D2, 21, "b"), (D3, 3, "old")]


def test_publish_again_after_a_restore_checks_conflicts_from_the_restore(lake):
    write_old(lake)
    staged = lake.staging.stage(TABLE, frame(lake, [(D1, 10, "new")]), "d", [D1], commit("new"))
    lake.staging.keep(staged, [D1], into="fix")
    fix = lake.staging.version(TABLE, "fix")
    published = lake.staging.publish(fix, [D1])
    restored = lake.restore_partitions(TABLE, "d", [D1], published.version - 1, commit("rollback"))
    assert content(lake)[0] == (D1, 1, "old")
    with pytest.raises(LakeConflict):
        lake.staging.publish(
            lake.staging.version(TABLE, "fix"), [D1]
        )  # from the base: the restore touched D1
    lake.staging.publish(lake.staging.version(TABLE, "fix"), [D1], since=restored.version)
    assert content(lake)[0] == (D1, 10, "new")


@pytest.mark.parametrize("closed", ["before-the-commit-lands", "after-it-landed"])
def test_a_version_closed_while_its_publish_commits_is_a_clear_error_or_stays_published(
    lake, monkeypatch, closed
):
    """A concurrent discard (or expiry) racing the commit: the commit stands. A closer that
    checks the log after the commit landed keeps the files it names; a swap whose files a closer
    deleted just before says so (delta-spark finds them gone before committing; the same close
    right before its commit call is ``test_lake_swap``'s)."""
    write_old(lake)
    staged = lake.staging.stage(TABLE, frame(lake, [(D1, 10, "new")]), "d", [D1], commit("new"))
    committing = lake.engine.publish

    def close_and_commit(*args, **kwargs):
        if closed == "before-the-commit-lands":
            lake.staging.discard(staged)
        result = committing(*args, **kwargs)
        if closed == "after-it-landed":
            lake.staging.discard(staged)
        return result

    monkeypatch.setattr(lake.engine, "publish", close_and_commit)
    if closed == "before-the-commit-lands" and lake.engine.name == "delta-spark":
        with pytest.raises(LakeError, match="missing"):
            lake.staging.publish(staged)
        assert lake.version(TABLE) == 0 and lake.staging.versions(TABLE) == []
        return
    if closed == "before-the-commit-lands":
        with pytest.raises(LakeError, match=r"version 1 .*closed .*restore"):
            lake.staging.publish(staged)
    else:
        assert lake.staging.publish(staged).version == 1
        assert content(lake) == [(D1, 10, "new"), (D2, 2, "old"), (D3, 3, "old")]
    assert lake.version(TABLE) == 1 and lake.staging.versions(TABLE) == []
