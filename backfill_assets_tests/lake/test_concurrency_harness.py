"""The concurrency harness for a few seconds on a local lake, delta-rs and delta-spark processes
at once: every problem count 0, with operations done and raced (so it cannot pass by doing
nothing); and its checker catches defects planted in a copy of the lake it left."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from backfill_assets.spark.delta_jars import jars_present
from backfill_assets_testkit import concurrency_harness as h
from backfill_assets_tests.lake.lake_support import NO_JARS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """One run of the harness: its lake, the workers' operations and the checker's report."""
    if not jars_present():
        pytest.fail(NO_JARS)
    if shutil.which("strace") is None:
        pytest.fail(h.NO_STRACE)
    work = tmp_path_factory.mktemp("concurrency")
    setup = h.Setup(
        str(work / "lake"),
        work / "workers",
        h.assign(["delta-rs", "delta-spark"]),
        seconds=8,
        delay=0.2,
        strace_delay_ms=100,
        expire_after=3,
        stall=0.3,
    )
    report = h.run(setup)
    ops = h.load_ops(sorted(setup.workdir.glob("*.jsonl")))
    return work / "lake", ops, report


def test_every_guarantee_holds_with_all_roles_racing(harness):
    _, ops, report = harness
    assert report.counts == dict.fromkeys(h.COUNTS, 0), report.problems
    assert not report.unexpected, report.unexpected
    assert report.ops > 0 and report.races > 0, h.line(report, ["delta-rs", "delta-spark"], "local")
    # each role, so each engine, did acknowledged work
    done = {o["worker"].rsplit("-", 1)[0] for o in ops if o["ok"]}
    assert done == {"live", "backfill", "maintenance", "correction"}, done
    assert {o["engine"] for o in ops if o["ok"]} == {"delta-rs", "delta-spark"}


def planted(harness, tmp_path) -> tuple[Path, list[dict], dict]:
    """A copy of the harness's lake, its operations, and the staging table's commit files."""
    lake, ops, _ = harness
    copy = tmp_path / "lake"
    shutil.copytree(lake, copy)
    commits = h.read_log(h.Store(str(copy)), h.TABLES[0])
    return copy, ops, commits


def last_publish(ops: list[dict], table: str) -> dict:
    """The acknowledged write of ``table`` at the highest version."""
    return max(
        (o for o in ops if o["ok"] and o["op"] in h.WRITES and o["table"] == table),
        key=lambda o: o["version"],
    )


def test_the_checker_finds_a_referenced_file_deleted(harness, tmp_path):
    copy, ops, commits = planted(harness, tmp_path)
    victim = sorted(h.snapshot(commits))[0]
    (copy / h.TABLES[0] / victim).unlink()
    report = h.check(h.Store(str(copy)), ops)
    assert report.counts["dangling"] == 1, report.problems
    assert report.counts["mismatch"] >= 1, report.problems


def test_the_checker_finds_a_commit_overwritten_by_an_older_one(harness, tmp_path):
    """The acknowledged publish's commit file replaced by the one before it: as a rename over
    ``N.json`` would leave it."""
    copy, ops, _ = planted(harness, tmp_path)
    table = h.TABLES[0]
    newest = last_publish(ops, table)
    log = copy / table / "_delta_log"
    older = log / f"{newest['version'] - 1:020d}.json"
    (log / f"{newest['version']:020d}.json").write_text(older.read_text())
    for checkpoint in log.glob("*.checkpoint.parquet"):
        checkpoint.unlink()  # readers replay the commit files, as the checker does
    (log / "_last_checkpoint").unlink(missing_ok=True)
    report = h.check(h.Store(str(copy)), ops)
    assert report.counts["lost_commits"] >= 1, report.problems


def test_the_checker_finds_a_day_reverted_and_files_never_audited(harness, tmp_path):
    """A new commit that puts a day back to its seeded files (a revert), and one that adds a
    copy of a data file no audit saw."""
    copy, ops, commits = planted(harness, tmp_path)
    table = h.TABLES[0]
    seeded = next(o for o in ops if o["op"] == "seed" and o["table"] == table)
    live = h.snapshot(commits)
    # a day whose seeded files were replaced since
    day, current, back = next(
        (d, now, set(files))
        for d, files in sorted(seeded["files"].items())
        if (now := {p for p, pd in live.items() if pd == d}) != set(files)
    )
    version = max(commits) + 1
    log = copy / table / "_delta_log"

    def action(kind: str, path: str) -> str:
        body = {"path": path, "partitionValues": {h.COLUMN: day}, "dataChange": True}
        if kind == "add":
            body.update(size=(copy / table / path).stat().st_size, modificationTime=0)
        else:
            body["deletionTimestamp"] = 0
        return json.dumps({kind: body})

    lines = [action("remove", p) for p in sorted(current)] + [
        action("add", p) for p in sorted(back)
    ]
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
    stray = Path(sorted(back)[0])
    copied = stray.with_name(f"stray-{stray.name}")
    shutil.copy(copy / table / stray, copy / table / copied)
    (log / f"{version + 1:020d}.json").write_text(action("add", str(copied)) + "\n")
    report = h.check(h.Store(str(copy)), ops)
    assert report.counts["reverted"] == 1, report.problems
    assert report.counts["unaudited"] == 1, report.problems
    assert report.counts["mismatch"] >= 1, report.problems
