"""A correction record cut short, not JSON, or missing keys: every command on it is a clear error
naming the file and `backfill-assets forget`, the listing still lists the others, and forget
moves it aside after checking the lake, refusing while the lake shows a half-done cutover."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backfill_assets.cli.main import main
from backfill_assets.corrections import registry
from backfill_assets.lake import CommitInfo
from backfill_assets_testkit.small_lake import (
    CID,
    FIXED,
    TABLES,
    build,
    copy,
    production_rows,
    rows,
    unreferenced_files,
)

OTHER = "fix-2"


@pytest.fixture(scope="module")
def template(tmp_path_factory, spark) -> Path:
    root = tmp_path_factory.mktemp("template") / "lake"
    build(root, spark)
    document = json.loads((root / registry.FOLDER / f"{CID}.json").read_text())
    document.update(id=OTHER, reason="another fix", state=registry.State.STAGED)
    (root / registry.FOLDER / f"{OTHER}.json").write_text(json.dumps(document))
    return root


def corrupt(text: str, how: str) -> str:
    if how == "truncated":
        return text[: len(text) // 2]
    if how == "not-json":
        return "this is not a correction record\n"
    document = json.loads(text)
    del document["created_at"], document["tables"]
    return json.dumps(document)


@pytest.fixture(params=["truncated", "not-json", "missing-keys"])
def broken(request, template, tmp_path, monkeypatch):
    """A lake whose record of ``CID`` is broken as the parameter says; the CLI pointed at it."""
    lake = copy(template, tmp_path / "lake")
    path = lake.root / registry.FOLDER / f"{CID}.json"
    path.write_text(corrupt(path.read_text(), request.param))
    monkeypatch.setenv("BACKFILL_LAKE_DIR", str(lake.root))
    monkeypatch.setenv("BACKFILL_LANDING_DIR", str(tmp_path / "landing"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv("BACKFILL_LAKE_ENGINE", "delta-rs")
    return lake, path


def assert_names_file_and_repair(err: str, path: Path) -> None:
    assert str(path) in err, err
    assert f"backfill-assets forget {CID}" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", ["cutover", "rollback", "discard", "diff"])
def test_a_command_on_a_broken_record_says_which_file_and_how_to_repair_it(broken, capsys, command):
    lake, path = broken
    before = path.read_bytes()
    assert main([command, CID]) == 1
    assert_names_file_and_repair(capsys.readouterr().err, path)
    assert path.read_bytes() == before  # never deleted nor rewritten behind the operator's back
    for table in TABLES:
        assert rows(lake.root, table) == production_rows(table)


def test_the_listing_shows_the_broken_record_beside_the_others(broken, capsys):
    _, path = broken
    assert main(["corrections"]) == 1
    out, err = capsys.readouterr()
    listed = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    assert set(listed) == {CID, OTHER}
    assert "staged" in listed[OTHER] and "another fix" in listed[OTHER]
    assert "broken" in listed[CID]
    assert_names_file_and_repair(err, path)


def test_forget_moves_the_broken_record_aside_and_closes_its_staged_versions(broken, capsys):
    lake, path = broken
    text = path.read_bytes()
    assert main(["forget", CID]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert not path.exists()
    assert path.with_name(f"{CID}.json.broken").read_bytes() == text
    assert "nothing of it is in production" in out
    for table in TABLES:
        assert lake.staging.version(table, CID) is None
        assert unreferenced_files(lake.root, table) == set()
        assert rows(lake.root, table) == production_rows(table)
    assert main(["corrections"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]] == [OTHER]


def test_forget_refuses_a_readable_record(broken, capsys):
    assert main(["forget", OTHER]) == 1
    assert f"backfill-assets discard {OTHER}" in capsys.readouterr().err
    assert (broken[0].root / registry.FOLDER / f"{OTHER}.json").exists()


def test_forget_refuses_while_the_lake_shows_a_half_done_cutover(broken, capsys):
    lake, path = broken
    staging = TABLES[0]
    commit = CommitInfo(
        run_id=f"correction:{CID}",
        code_version="abc123",
        extra={"correction": CID, "action": "cutover"},
    )
    cut = lake.staging.publish(lake.staging.version(staging, CID), FIXED, commit, since=0)
    assert main(["forget", CID]) == 1
    err = capsys.readouterr().err
    assert f"{staging} v{cut.version}" in err and TABLES[1] in err
    assert path.exists() and lake.staging.version(TABLES[1], CID) is not None


def test_maintain_reports_the_broken_record_and_maintains_the_rest(broken, capsys):
    lake, path = broken
    assert main(["maintain"]) == 1
    out = capsys.readouterr().out
    assert_names_file_and_repair(out, path)
    assert all(f"{t}: expired 0 staged versions" in out for t in TABLES)
    for t in TABLES:  # maintained all the same: checkpointed
        assert list((lake.root / t / "_delta_log").glob("*.checkpoint.parquet")), t
    assert path.exists() and lake.staging.version(TABLES[0], CID) is not None
