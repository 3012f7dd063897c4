"""Recovery of a cutover or rollback killed between its two tables' commits: completed when it
can be, undone when production changed the other table meanwhile, itself failed at a sample of
its I/O operations and recovered again; left alone while its process still runs; run by
maintain, which reports the completed cutover and the correction's state to Dagster, as does
the weekly maintenance op."""

from __future__ import annotations

import socket
import subprocess
import sys
from contextlib import suppress
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable

from backfill_assets.catalog import CORRECTIONS, FCT_DAILY_REVENUE, MAINTENANCE_JOB, STG_ORDERS
from backfill_assets.cli.main import main
from backfill_assets.corrections import lifecycle, registry
from backfill_assets.corrections.registry import CorrectionError, State
from backfill_assets.definitions import build_definitions
from backfill_assets.lake import CommitInfo, Lake
from backfill_assets.settings import Settings
from backfill_assets.testing.iofault import arm
from backfill_assets_testkit.correction_sweep import (
    BY_NAME,
    kill_in_child,
    operations,
    run_child,
    sample,
)
from backfill_assets_testkit.log_cleanup import clean_up_log
from backfill_assets_testkit.small_lake import (
    CID,
    D1,
    FIXED,
    SCHEMA,
    TABLES,
    after_cutover,
    copy,
    production_rows,
    rows,
)

STAGING, FACT = TABLES
REBUILT = {(D1, "rebuilt", 1)}  # what the live lane writes into the fact's D1 meanwhile


def second_commit(source: Path, to: Path, command: str) -> int:
    """The number of the I/O operation of ``command`` that is its second table's commit."""
    names = operations(copy(source, to), BY_NAME[command].run)
    commits = [i + 1 for i, name in enumerate(names) if name == "commit"]
    assert len(commits) == 2, commits
    return commits[1]


def killed_between_commits(source: Path, to: Path, command: str, at: int) -> Lake:
    """A copy of ``source`` where ``command`` was killed at its second table's commit."""
    lake = copy(source, to)
    kill_in_child(lake, command, at)
    assert registry.get(lake.root, CID).pending["action"] == command
    return lake


def actions(lake: Lake, table: str) -> list[str | None]:
    """The correction actions of the table's commits, newest first (None: another writer's)."""
    return [e["metadata"].get("extra", {}).get("action") for e in lake.history(table)]


def rebuild_fact_day(lake: Lake, spark) -> None:
    """The live lane rebuilds the fact's D1, as production does."""
    writer = Lake(lake.root, spark, engine="delta-rs")
    frame = spark.createDataFrame(sorted(REBUILT), SCHEMA)
    writer.replace_partitions(FACT, frame, "event_date", [D1], CommitInfo("live", "abc123"))


def state_shown(instance: dg.DagsterInstance) -> tuple[str, set[str]]:
    """The correction's state on its latest observation of the ``corrections`` asset, and the
    "correction pending" markers of its days' staging partitions."""
    [seen] = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=CORRECTIONS, asset_partitions=[CID]), limit=1
    ).records
    marks = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=STG_ORDERS, asset_partitions=[str(d) for d in FIXED]),
        limit=len(FIXED),
    ).records
    assert {m.partition_key for m in marks} == {str(d) for d in FIXED}
    return observed(seen, "state"), {observed(m, "correction_pending") for m in marks}


def observed(record: dg.EventLogRecord, label: str) -> str:
    assert record.asset_observation is not None
    return str(record.asset_observation.metadata[label].value)


def fact_with_rebuild(base: set) -> set:
    return {r for r in base if r[0] != D1} | REBUILT


@pytest.fixture(scope="module")
def cutover_kill_op(template, tmp_path_factory) -> int:
    return second_commit(template, tmp_path_factory.mktemp("ops") / "lake", "cutover")


@pytest.fixture(scope="module")
def rollback_kill_op(cut_over, tmp_path_factory) -> int:
    return second_commit(cut_over, tmp_path_factory.mktemp("ops") / "lake", "rollback")


def test_a_cutover_killed_between_its_commits_is_completed_by_recovery(
    template, tmp_path, cutover_kill_op
):
    lake = killed_between_commits(template, tmp_path / "lake", "cutover", cutover_kill_op)
    assert rows(lake.root, STAGING) == after_cutover(STAGING)  # the tables disagree now
    assert rows(lake.root, FACT) == production_rows(FACT)
    found = lifecycle.recover(lake, CID)
    assert found is not None and (found.action, found.result) == ("cutover", "completed")
    c = registry.get(lake.root, CID)
    assert c.state == State.CUT_OVER and c.pending == {}
    for table in TABLES:
        assert rows(lake.root, table) == after_cutover(table)
    assert lifecycle.recover(lake, CID) is None
    lifecycle.rollback(lake, CID)  # the record now agrees: rollback works
    for table in TABLES:
        assert rows(lake.root, table) == production_rows(table)


def test_a_cutover_killed_between_its_commits_is_undone_when_the_fact_changed_meanwhile(
    template, tmp_path, cutover_kill_op, spark
):
    lake = killed_between_commits(template, tmp_path / "lake", "cutover", cutover_kill_op)
    rebuild_fact_day(lake, spark)
    found = lifecycle.recover(lake, CID)
    assert found is not None and (found.action, found.result) == ("cutover", "undone")
    c = registry.get(lake.root, CID)
    assert c.state == State.DIFFED and c.pending == {}
    assert rows(lake.root, STAGING) == production_rows(STAGING)
    assert rows(lake.root, FACT) == fact_with_rebuild(production_rows(FACT))
    assert actions(lake, STAGING)[:2] == ["cutover undone", "cutover"]
    with pytest.raises(CorrectionError, match=rf"production changed since the diff: {FACT}"):
        lifecycle.cutover(lake, CID)  # the fact's rebuild, not staging's undo, needs a new diff


def test_a_rollback_killed_between_its_commits_is_undone_when_the_fact_changed_meanwhile(
    cut_over, tmp_path, rollback_kill_op, spark
):
    lake = killed_between_commits(cut_over, tmp_path / "lake", "rollback", rollback_kill_op)
    rebuild_fact_day(lake, spark)
    found = lifecycle.recover(lake, CID)
    assert found is not None and (found.action, found.result) == ("rollback", "undone")
    c = registry.get(lake.root, CID)
    assert c.state == State.CUT_OVER and c.pending == {}
    assert rows(lake.root, STAGING) == after_cutover(STAGING)
    assert rows(lake.root, FACT) == fact_with_rebuild(after_cutover(FACT))
    with pytest.raises(CorrectionError, match=rf"production changed after the cutover: {FACT}"):
        lifecycle.rollback(lake, CID)


def test_an_undo_killed_after_its_commit_landed_is_recovered_after_log_cleanup(
    template, tmp_path, cutover_kill_op, spark
):
    """The undo's restore of staging landed, then its process was killed; log cleanup deleted
    that commit's file before the next recovery, which still knows which days it restored."""
    lake = killed_between_commits(template, tmp_path / "lake", "cutover", cutover_kill_op)
    rebuild_fact_day(lake, spark)
    names = operations(
        copy(lake.root, tmp_path / "count"), lambda counted: lifecycle.recover(counted, CID)
    )
    undo_landed = names.index("commit.landed") + 1  # the first commit: staging's restore
    child = run_child(lake.root, "recover", f"kill:{undo_landed}", lake.engine.name)
    assert child.returncode == -9, child.stderr[-2000:]
    undo = registry.get(lake.root, CID).pending["undo"]
    restored = lake.version(STAGING)
    assert lake.commit_of_write(STAGING, undo[STAGING]["write_id"]) == restored
    # another writer's commit after it (a property), then Delta's log cleanup
    DeltaTable(str(lake.path(STAGING))).alter.set_table_properties(
        {"delta.checkpointInterval": "50"}
    )
    assert restored not in clean_up_log(lake.path(STAGING))
    restored += 1

    found = lifecycle.recover(lake, CID)

    assert found is not None and (found.action, found.result) == ("cutover", "undone")
    c = registry.get(lake.root, CID)
    assert c.state == State.DIFFED and c.pending == {}
    assert lake.version(STAGING) == restored  # no second restore
    assert rows(lake.root, STAGING) == production_rows(STAGING)
    assert rows(lake.root, FACT) == fact_with_rebuild(production_rows(FACT))


@pytest.mark.parametrize("rebuilt", [False, True], ids=["completed", "undone"])
def test_a_recovery_failed_at_an_io_operation_is_recovered_again(
    template, tmp_path, cutover_kill_op, spark, rebuilt
):
    killed = killed_between_commits(template, tmp_path / "killed", "cutover", cutover_kill_op)
    if rebuilt:
        rebuild_fact_day(killed, spark)
    names = operations(
        copy(killed.root, tmp_path / "count"), lambda lake: lifecycle.recover(lake, CID)
    )
    assert len(names) >= 4
    expected = (
        {STAGING: production_rows(STAGING), FACT: fact_with_rebuild(production_rows(FACT))}
        if rebuilt
        else {t: after_cutover(t) for t in TABLES}
    )
    for n in sample(names):
        lake = copy(killed.root, tmp_path / f"n{n}")
        with arm("error", n), suppress(OSError):
            lifecycle.recover(lake, CID)
        lifecycle.recover(lake, CID)
        c = registry.get(lake.root, CID)
        assert c.pending == {}, n
        assert c.state == (State.DIFFED if rebuilt else State.CUT_OVER), n
        for table in TABLES:
            assert rows(lake.root, table) == expected[table], (n, table)
        assert actions(lake, STAGING).count("cutover undone") == (1 if rebuilt else 0), n
        assert actions(lake, FACT).count("cutover") == (0 if rebuilt else 1), n  # never twice
        if rebuilt:  # staging's own cutover and undo do not count as production's changes
            with pytest.raises(CorrectionError, match="production changed since") as refused:
                lifecycle.cutover(lake, CID)
            assert FACT in str(refused.value) and STAGING not in str(refused.value), n


def test_an_intent_whose_process_still_runs_is_left_to_it(template, tmp_path):
    lake = copy(template, tmp_path / "lake")
    c = registry.get(lake.root, CID)
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as other:
        try:
            c.pending = {
                "action": "cutover",
                "at": registry.now(),
                "host": socket.gethostname(),
                "pid": other.pid,
                "days": [d.isoformat() for d in FIXED],
                "tables": {t: {"write_id": f"w{i}", "from": 0} for i, t in enumerate(TABLES)},
                "since": dict.fromkeys(TABLES, 0),
            }
            registry.save(lake.root, c)
            found = lifecycle.recover(lake, CID)
            assert found is not None and found.result == "in progress"
            with pytest.raises(CorrectionError, match="under way"):
                lifecycle.cutover(lake, CID)
            assert registry.get(lake.root, CID).pending == c.pending
        finally:
            other.kill()
    found = lifecycle.recover(lake, CID)  # its process is gone: nothing had landed
    assert found is not None and found.result == "abandoned"
    assert registry.get(lake.root, CID).state == State.DIFFED


def cli_env(monkeypatch, lake: Lake, tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("BACKFILL_LAKE_DIR", str(lake.root))
    monkeypatch.setenv("BACKFILL_LANDING_DIR", str(tmp_path / "landing"))
    monkeypatch.setenv("BACKFILL_LAKE_ENGINE", "delta-rs")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def test_the_rollback_command_run_again_completes_its_interrupted_self(
    cut_over, tmp_path, rollback_kill_op, monkeypatch, capsys
):
    lake = killed_between_commits(cut_over, tmp_path / "lake", "rollback", rollback_kill_op)
    cli_env(monkeypatch, lake, tmp_path)
    assert main(["corrections"]) == 0
    assert "[rollback interrupted at" in capsys.readouterr().out
    assert main(["rollback", CID]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"correction {CID}: interrupted rollback completed" in out
    assert f"correction {CID} rolled back: 2 day(s)" in out
    c = registry.get(lake.root, CID)
    assert c.state == State.ROLLED_BACK and c.pending == {}
    for table in TABLES:
        assert rows(lake.root, table) == production_rows(table)


def test_maintain_completes_an_interrupted_cutover_and_tells_dagster(
    template, tmp_path, cutover_kill_op, monkeypatch, capsys
):
    lake = killed_between_commits(template, tmp_path / "lake", "cutover", cutover_kill_op)
    cli_env(monkeypatch, lake, tmp_path)
    assert main(["maintain"]) == 0, capsys.readouterr()
    assert f"maintain: correction {CID}: interrupted cutover completed" in capsys.readouterr().out
    c = registry.get(lake.root, CID)
    assert c.state == State.CUT_OVER and c.pending == {}
    for table in TABLES:
        assert rows(lake.root, table) == after_cutover(table)
    with dg.DagsterInstance.get() as instance:
        for key, table in ((STG_ORDERS, STAGING), (FCT_DAILY_REVENUE, FACT)):
            records = instance.fetch_materializations(key, limit=10).records
            cut = {
                r.partition_key: r.asset_materialization.metadata["delta_version"].value
                for r in records
                if r.asset_materialization.metadata.get("correction") is not None
            }
            assert cut == dict.fromkeys(
                [d.isoformat() for d in FIXED], c.cutover["versions"][table]
            )
        assert state_shown(instance) == (State.CUT_OVER, {"none"})


def test_the_weekly_maintenance_op_completes_an_interrupted_cutover_and_records_it(
    template, tmp_path, cutover_kill_op, spark, monkeypatch
):
    lake = killed_between_commits(template, tmp_path / "lake", "cutover", cutover_kill_op)
    monkeypatch.delenv("BACKFILL_RETENTION_DAYS", raising=False)
    monkeypatch.delenv("BACKFILL_LAKE_ENGINE", raising=False)
    defs = build_definitions(Settings(tmp_path / "landing", lake.root, D1, 7))
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(instance=instance)
        assert result.success
        c = registry.get(lake.root, CID)
        assert c.state == State.CUT_OVER and c.pending == {}
        for table in TABLES:
            assert rows(lake.root, table) == after_cutover(table)
        records = instance.fetch_materializations(FCT_DAILY_REVENUE, limit=10).records
        assert {
            r.partition_key: r.asset_materialization.metadata["delta_version"].value
            for r in records
        } == dict.fromkeys([d.isoformat() for d in FIXED], c.cutover["versions"][FACT])
        assert state_shown(instance) == (State.CUT_OVER, {"none"})
