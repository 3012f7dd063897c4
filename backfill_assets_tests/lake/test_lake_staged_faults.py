"""Write-audit-publish under I/O faults, on every engine: a manifest write that fails after a
publish's commit, or between keep_staged's two manifest saves, never lets discard, expiry or a
step's cleanup delete a file the table or another staged version still needs. On an S3 lake
too."""

from __future__ import annotations

import errno
import os

import pytest

import backfill_assets.lake.manifests as manifests
from backfill_assets.lake.errors import BrokenManifest, ManifestChanged
from backfill_assets_tests.lake.lake_support import THINGS, commit, content, overwrite, stored
from backfill_assets_tests.lake.test_lake_staged import D1, D2, D3, frame, write_old

TABLE = THINGS
ON_S3 = True  # conftest.py: each case runs on a lake in S3 too
CLEANUPS = ["discard", "expire"]


def fail_save_after(monkeypatch, saves_allowed: int) -> None:
    """The manifest save after ``saves_allowed`` more good ones raises ENOSPC, once."""
    real = manifests.save
    calls = []

    def save(table_dir, staged, create=False):
        calls.append(staged.id)
        if len(calls) == saves_allowed + 1:
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        return real(table_dir, staged, create)

    monkeypatch.setattr(manifests, "save", save)


def clean_up(lake, staged, how: str) -> None:
    """What runs after a failed step: its cleanup (``Publication.__exit__``: discard) or
    maintenance's expiry of every staged version older than the retention."""
    if how == "discard":
        lake.staging.discard(staged)
    else:
        lake.staging.expire(TABLE, retention_hours=0)


def on_disk(lake, files) -> list[bool]:
    return [stored(lake, TABLE, f.path) for f in files]


@pytest.mark.parametrize("how", CLEANUPS)
def test_a_publish_whose_manifest_update_fails_keeps_the_files_it_committed(lake, monkeypatch, how):
    write_old(lake)
    staged = lake.staging.stage(
        TABLE, frame(lake, [(D1, 10, "new"), (D2, 20, "new")]), "d", [D1, D2], commit("new")
    )
    fail_save_after(monkeypatch, 1)  # intent saved, the commit lands; its confirmation fails
    with pytest.raises(OSError, match="No space"):
        lake.staging.publish(staged, [D1])
    monkeypatch.undo()
    assert lake.version(TABLE) == 1
    clean_up(lake, staged, how)
    assert lake.staging.versions(TABLE) == []
    assert content(lake) == [(D1, 10, "new"), (D2, 2, "old"), (D3, 3, "old")]
    assert on_disk(lake, staged.files_of([D2])) == [False]  # the held day's file did go


@pytest.mark.parametrize("how", CLEANUPS)
@pytest.mark.parametrize("into_existing", [False, True], ids=["new-target", "existing-target"])
def test_keep_staged_interrupted_between_its_manifest_saves_loses_no_kept_file(
    lake, monkeypatch, how, into_existing
):
    old = write_old(lake)
    if into_existing:
        earlier = lake.staging.stage(TABLE, frame(lake, [(D1, 9, "x")]), "d", [D1], commit("x"))
        lake.staging.keep(earlier, [D1], into="fix")
        lake.staging.discard(earlier)
    staged = lake.staging.stage(
        TABLE, frame(lake, [(D1, 10, "a"), (D2, 20, "a")]), "d", [D1, D2], commit("a")
    )
    fail_save_after(monkeypatch, 2)  # intent and merged target saved; the source's update fails
    with pytest.raises(OSError, match="No space"):
        lake.staging.keep(staged, [D1], into="fix")
    monkeypatch.undo()
    target = lake.staging.version(TABLE, "fix")
    assert target is not None
    if how == "discard":
        lake.staging.discard(staged)
        assert all(on_disk(lake, target.files)), "the target's files were deleted"
        assert on_disk(lake, staged.files_of([D2])) == [False]
        lake.staging.publish(target)
        assert content(lake) == [(D1, 10, "a"), (D2, 2, "old"), (D3, 3, "old")]
    else:
        lake.staging.expire(TABLE, retention_hours=0)  # closes both: every staged file goes
        assert lake.staging.versions(TABLE) == [] and not any(on_disk(lake, staged.files))
        assert content(lake) == old


def test_the_log_is_read_through_its_checkpoint_once_commit_files_are_cleaned_up(lake, monkeypatch):
    """A commit file removed by log clean-up: the checkpoint that replaced it still protects
    the files the unrecorded publish committed."""
    write_old(lake)
    staged = lake.staging.stage(TABLE, frame(lake, [(D1, 10, "new")]), "d", [D1], commit("new"))
    fail_save_after(monkeypatch, 1)
    with pytest.raises(OSError, match="No space"):
        lake.staging.publish(staged)
    monkeypatch.undo()
    lake.replace_partitions(TABLE, frame(lake, [(D3, 30, "later")]), "d", [D3], commit("later"))
    assert lake.checkpoint(TABLE) == 2
    log_dir = os.path.join(lake.table_location(TABLE), "_delta_log")
    for version in (0, 1):  # as log clean-up does: never the newest commit
        assert lake.storage.delete(os.path.join(log_dir, f"{version:020d}.json"))
    lake.staging.discard(staged)
    assert content(lake) == [(D1, 10, "new"), (D2, 2, "old"), (D3, 30, "later")]


CORRUPTIONS = {
    "truncated": lambda text: text[: len(text) // 2],
    "not-json": lambda text: "\x00\x01 not a manifest",
    "keys-missing": lambda text: '{"id": "x"}',
}


@pytest.mark.parametrize(
    "corrupt",
    [
        # The manifest is read by the lake's shared code: one corruption is enough on delta-spark.
        pytest.param(
            name,
            marks=[]
            if name == "truncated"
            else [pytest.mark.same_case_as("delta-spark", "truncated")],
        )
        for name in sorted(CORRUPTIONS)
    ],
)
def test_a_corrupt_manifest_is_a_clear_error_naming_its_repair_and_nothing_is_deleted(
    lake, corrupt, capsys
):
    from backfill_assets.cli.main import main

    old = write_old(lake)
    staged = lake.staging.stage(TABLE, frame(lake, [(D1, 10, "new")]), "d", [D1], commit("new"))
    path = manifests.manifest_path(lake.table_location(TABLE), staged.id)
    overwrite(lake, path, CORRUPTIONS[corrupt](lake.storage.read_text(path)))
    attempts = [
        lambda: lake.staging.versions(TABLE),
        lambda: lake.staging.discard(staged),
        lambda: lake.staging.publish(staged),
        lambda: lake.staging.expire(TABLE, 0),
        lambda: lake.vacuum(TABLE, 0),
    ]
    for attempt in attempts:
        with pytest.raises(BrokenManifest) as error:
            attempt()
        assert path in str(error.value) and f"backfill-assets repair-manifest {path}" in str(
            error.value
        )
    assert all(on_disk(lake, staged.files)) and content(lake) == old
    assert main(["repair-manifest", lake.table_location(TABLE)]) == 2  # not a manifest: refused
    assert main(["repair-manifest", path]) == 0
    assert "set aside" in capsys.readouterr().out
    assert lake.staging.versions(TABLE) == [] and lake.storage.exists(path + ".broken")
    assert main(["repair-manifest", path]) == 2  # nothing left to repair
    lake.vacuum(TABLE, 0)  # its unpublished file is an orphan now: vacuum's to delete
    assert not any(on_disk(lake, staged.files)) and content(lake) == old


def test_a_manifest_save_or_close_over_one_saved_meanwhile_is_refused(lake):
    write_old(lake)
    staged = lake.staging.stage(TABLE, frame(lake, [(D1, 10, "new")]), "d", [D1], commit("new"))
    table_dir = lake.table_location(TABLE)
    first, second = manifests.load(table_dir, staged.id), manifests.load(table_dir, staged.id)
    assert first is not None and second is not None
    saved = manifests.save(table_dir, first)
    assert saved.generation == first.generation + 1
    with pytest.raises(ManifestChanged, match="saved again"):
        manifests.save(table_dir, second)
    with pytest.raises(ManifestChanged, match="saved again"):
        manifests.remove(table_dir, second, lake.engine)
    assert manifests.load(table_dir, staged.id) == saved
    assert on_disk(lake, staged.files) == [True]
    if not lake.storage.is_local:  # the conditional PUT itself: a stale ETag is refused
        path = manifests.manifest_path(table_dir, staged.id)
        _, tag = lake.storage.read_tagged(path)
        manifests.save(table_dir, saved)
        with pytest.raises(FileExistsError):
            lake.storage.put(path, b"{}", create=False, if_match=tag)
    assert lake.staging.discard(staged) == 1
