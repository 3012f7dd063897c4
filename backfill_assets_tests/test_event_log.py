"""The SQLite event log with its connections kept: what Dagster's own class stores, in the same
files, through a handful of engines and SQLite connections instead of new ones for every
statement; and a forked process that opens its own."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Self

import dagster as dg
import pytest
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import Pool

from backfill_assets.cli.instance import prepare_instance_yaml
from backfill_assets.event_log import TEMPLATE_NAME, EngineReusingSqliteEventLogStorage

# Runs the pipeline through Dagster on real Spark and Delta: `make test`, not `make test-fast`.
pytestmark = pytest.mark.slow

PROJECT_YAML = Path(__file__).resolve().parents[1] / "dagster.yaml"
DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01")
KEYS = [f"2024-01-{d:02d}" for d in range(1, 11)]  # ten partitions, spelled by hand

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # partitioned check specs are a preview feature
    CHECK = dg.AssetCheckSpec("probe_check", asset="probe", blocking=True, partitions_def=DAYS)


@dg.multi_asset(
    specs=[dg.AssetSpec("probe", skippable=True)],
    check_specs=[CHECK],
    partitions_def=DAYS,
    backfill_policy=dg.BackfillPolicy.single_run(),
)
def probe(context):
    # As the pipeline's steps report: a check evaluation, then a materialization, per partition.
    for key in context.partition_keys:
        yield dg.AssetCheckEvaluation(
            asset_key=dg.AssetKey("probe"),
            check_name="probe_check",
            passed=key != "2024-01-05",
            partition=key,
            blocking=True,
        )
        yield dg.AssetMaterialization(asset_key="probe", partition=key)
    for name in context.assets_def.check_specs_by_output_name:
        yield dg.Output(None, output_name=name)


def ranged_run(instance: dg.DagsterInstance) -> str:
    result = dg.materialize(
        [probe],
        instance=instance,
        raise_on_error=False,
        tags={
            "dagster/asset_partition_range_start": KEYS[0],
            "dagster/asset_partition_range_end": KEYS[-1],
        },
    )
    return result.run_id


class EnginesCreated:
    """How many SQLAlchemy engines opened a connection to an event log file (``history/runs``)
    while counting, each engine counted once. (Dagster's run storage, which has its own
    engines, is not this class's business.)"""

    def __init__(self) -> None:
        self.count = 0

    def _connected(self, conn) -> None:
        engine = conn.engine
        if "/history/runs/" in str(engine.url.database) and not getattr(engine, "_counted", False):
            engine._counted = True
            self.count += 1

    def __enter__(self) -> Self:
        event.listen(Engine, "engine_connect", self._connected)
        return self

    def __exit__(self, *_exc) -> None:
        event.remove(Engine, "engine_connect", self._connected)


class ConnectionsOpened:
    """How many SQLite connections were opened to an event log file (``history/runs``) while
    counting, whichever engine opened them."""

    def __init__(self) -> None:
        self.count = 0

    def _connected(self, dbapi_connection, _record) -> None:
        files = [row[2] for row in dbapi_connection.execute("PRAGMA database_list")]
        self.count += any("/history/runs/" in f for f in files)

    def __enter__(self) -> Self:
        event.listen(Pool, "connect", self._connected)
        return self

    def __exit__(self, *_exc) -> None:
        event.remove(Pool, "connect", self._connected)


class SchemaQuestions:
    """How many statements asked the event log's index (``history/runs/index.db``) about its
    schema (a table's columns, or whether it exists) while counting. (A new run's own file is
    asked about each table once, as it is created.)"""

    def __init__(self) -> None:
        self.count = 0

    def _executed(self, conn, _cursor, statement: str, *_args) -> None:
        asks = (
            "table_info" in statement or "table_xinfo" in statement or "sqlite_master" in statement
        )
        self.count += asks and str(conn.engine.url.database).endswith("/history/runs/index.db")

    def __enter__(self) -> Self:
        event.listen(Engine, "before_cursor_execute", self._executed)
        return self

    def __exit__(self, *_exc) -> None:
        event.remove(Engine, "before_cursor_execute", self._executed)


class TablesCreated:
    """How many statements created a table or an index in a run's own file
    (``history/runs/<run id>.db``, not the index) while counting."""

    def __init__(self) -> None:
        self.count = 0

    def _executed(self, conn, _cursor, statement: str, *_args) -> None:
        database = str(conn.engine.url.database)
        self.count += (
            statement.lstrip().upper().startswith("CREATE")
            and "/history/runs/" in database
            and not database.endswith("/index.db")
        )

    def __enter__(self) -> Self:
        event.listen(Engine, "before_cursor_execute", self._executed)
        return self

    def __exit__(self, *_exc) -> None:
        event.remove(Engine, "before_cursor_execute", self._executed)


def file_schema(path: Path) -> tuple:
    """A SQLite file's tables and indexes as created, its alembic revision and journal mode."""
    db = sqlite3.connect(path)
    try:
        return (
            db.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY 1, 2"
            ).fetchall(),
            db.execute("SELECT version_num FROM alembic_version").fetchall(),
            db.execute("PRAGMA journal_mode").fetchone(),
        )
    finally:
        db.close()


def stored(instance: dg.DagsterInstance, run_id: str) -> tuple[list[str], dict[str, bool]]:
    """The run's materialized partitions and each one's check verdict, as Dagster reads them."""
    materialized: list[str] = []
    verdicts: dict[str, bool] = {}
    for record in instance.all_logs(run_id):
        happened = record.dagster_event
        if happened is None:
            continue
        if happened.event_type == dg.DagsterEventType.ASSET_MATERIALIZATION:
            assert happened.partition is not None, "the probe materializes partitions only"
            materialized.append(happened.partition)
        elif happened.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            evaluation = happened.event_specific_data
            assert isinstance(evaluation, dg.AssetCheckEvaluation)
            assert evaluation.partition is not None, "the probe checks partitions only"
            verdicts[evaluation.partition] = evaluation.passed
    return sorted(materialized), verdicts


@pytest.fixture
def homes(tmp_path):
    """A DAGSTER_HOME as the CLI prepares it on SQLite."""
    ours = tmp_path / "home"
    prepare_instance_yaml(ours, PROJECT_YAML, env={})
    return ours


def test_the_cli_instance_stores_events_through_it_in_dagsters_own_files(homes):
    with dg.DagsterInstance.from_config(str(homes)) as instance:
        assert isinstance(instance.event_log_storage, EngineReusingSqliteEventLogStorage)
        run_id = ranged_run(instance)
    assert (homes / "history" / "runs" / f"{run_id}.db").exists()
    assert (homes / "history" / "runs" / "index.db").exists()

    # The same folder read by Dagster's own class (the project's yaml has no storage section).
    shutil.copy(PROJECT_YAML, homes / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(homes)) as instance:
        assert type(instance.event_log_storage).__name__ == "SqliteEventLogStorage"
        materialized, verdicts = stored(instance, run_id)
        assert materialized == KEYS
        assert verdicts == {k: k != "2024-01-05" for k in KEYS}
        # The cross-run index too, which the UI's partition status reads.
        assert instance.get_materialized_partitions(dg.AssetKey("probe")) == set(KEYS)


def counted_on_both_classes(homes: Path, counter: type) -> tuple:
    """``counter`` over a ten-partition run on this class (after a first run has set up the
    index), then over one on Dagster's own class, in the same folder; each run's partitions
    read back."""
    with dg.DagsterInstance.from_config(str(homes)) as instance:
        ranged_run(instance)  # the index and the first run's file are set up
        with counter() as ours:
            run_id = ranged_run(instance)
        assert stored(instance, run_id)[0] == KEYS
    shutil.copy(PROJECT_YAML, homes / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(homes)) as instance:
        with counter() as dagsters:
            run_id = ranged_run(instance)
        assert stored(instance, run_id)[0] == KEYS
    return ours, dagsters


def test_a_run_connects_a_handful_of_engines_where_dagsters_class_makes_one_per_statement(homes):
    ours, dagsters = counted_on_both_classes(homes, EnginesCreated)
    # 20 per-partition events, each written to the run's file and the index.
    assert dagsters.count >= 2 * 2 * len(KEYS)
    assert ours.count <= 3  # the run's file, the index (and Dagster's own set-up of the file)


def test_a_run_opens_a_handful_of_sqlite_connections_where_dagsters_class_opens_one_per_statement(
    homes,
):
    ours, dagsters = counted_on_both_classes(homes, ConnectionsOpened)
    assert dagsters.count >= 2 * 2 * len(KEYS)
    assert ours.count <= 3  # the new run's file, and at most one more for a thread's overlap


def test_a_run_asks_the_index_about_its_schema_once_where_dagsters_class_asks_per_event(homes):
    ours, dagsters = counted_on_both_classes(homes, SchemaQuestions)
    # Before each check evaluation (whether the index has its table) and materialization (the
    # asset keys table's columns): 20 per-partition events.
    assert dagsters.count >= 2 * len(KEYS)
    assert ours.count == 0  # answered by the first run's questions


def test_a_new_runs_file_is_copied_where_dagsters_class_creates_its_tables_one_by_one(homes):
    ours, dagsters = counted_on_both_classes(homes, TablesCreated)
    assert dagsters.count >= 10  # the event log's tables and their indexes, one statement each
    assert ours.count == 0  # a copy of the template the first run made


def test_a_run_file_made_from_the_template_is_the_file_dagsters_class_makes(homes):
    runs = homes / "history" / "runs"
    with dg.DagsterInstance.from_config(str(homes)) as instance:
        ours = [ranged_run(instance), ranged_run(instance)]  # the first one makes the template
        assert (runs / TEMPLATE_NAME).exists()
    shutil.copy(PROJECT_YAML, homes / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(homes)) as instance:
        dagsters = ranged_run(instance)
        # Dagster's class lists the runs by their files: the template is none of them.
        assert sorted(sqlite_index(instance).get_all_run_ids()) == sorted([*ours, dagsters])
        for run_id in ours:
            assert stored(instance, run_id)[0] == KEYS
    expected = file_schema(runs / f"{dagsters}.db")
    assert expected[2] == ("wal",)
    for run_id in ours:
        assert file_schema(runs / f"{run_id}.db") == expected
    # Nothing left beside them: no half-made template or copy.
    assert sorted(p.name for p in runs.glob(".*")) == [TEMPLATE_NAME]


def test_a_run_file_already_there_is_left_to_dagster_unless_alembic_stamped_it(homes):
    runs = homes / "history" / "runs"
    with dg.DagsterInstance.from_config(str(homes)) as instance:
        reference = ranged_run(instance)  # and the template
        storage = sqlite_index(instance)
        # Another process's file: one whose Dagster set-up has not begun (SQLite makes an empty
        # file), and one stamped at another revision, which Dagster's set-up leaves alone too.
        (runs / "begun.db").write_bytes(b"")
        shutil.copy(runs / TEMPLATE_NAME, runs / "stamped.db")
        db = sqlite3.connect(runs / "stamped.db")
        db.execute("UPDATE alembic_version SET version_num = 'another'")
        db.commit()
        db.close()
        for shard in ("begun", "stamped"):
            with storage.run_connection(shard) as conn:
                assert conn.exec_driver_sql("SELECT count(*) FROM event_logs").scalar() == 0
    expected = file_schema(runs / f"{reference}.db")
    assert file_schema(runs / "begun.db") == expected
    assert file_schema(runs / "stamped.db") == (expected[0], [("another",)], expected[2])


RACE = """
import sys, time
from pathlib import Path
from backfill_assets.event_log import EngineReusingSqliteEventLogStorage
base, folder = sys.argv[1], Path(sys.argv[2])
storage = EngineReusingSqliteEventLogStorage(base)
(folder / sys.argv[3]).touch()
while not (folder / "go").exists():
    time.sleep(0.001)
for i in range(40):
    with storage.run_connection(f"raced-{i}") as conn:
        conn.exec_driver_sql("SELECT count(*) FROM event_logs").scalar()
"""


def test_two_processes_starting_the_same_new_run_files_at_once_both_use_them(tmp_path):
    """Two processes (a run worker and the daemon, say) open the same new runs' files at the
    same moment, and neither has the template yet: each file is made once, whole."""
    base = tmp_path / "runs"
    EngineReusingSqliteEventLogStorage(str(base))  # its index, as the instance makes it
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, str(base), str(tmp_path), f"ready-{n}"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    try:
        deadline = time.monotonic() + 120
        while not all((tmp_path / f"ready-{n}").exists() for n in range(2)):
            assert time.monotonic() < deadline and all(r.poll() is None for r in racers)
            time.sleep(0.05)
        (tmp_path / "go").touch()
        for racer in racers:
            _, err = racer.communicate(timeout=120)
            assert racer.returncode == 0, err
    finally:  # a racer left waiting (the test failed before "go") must not outlive it
        for racer in racers:
            if racer.poll() is None:
                racer.kill()
                racer.wait()
    made = sorted(p.name for p in base.iterdir())
    raced = [f"raced-{i}.db" for i in range(40)]
    assert [n for n in made if n.endswith(".db")] == sorted(["index.db", *raced])
    assert [n for n in made if n.startswith(".")] == [TEMPLATE_NAME]
    expected = file_schema(base / TEMPLATE_NAME)
    for name in raced:
        assert file_schema(base / name) == expected


def sqlite_index(instance: dg.DagsterInstance) -> SqliteEventLogStorage:
    """The instance's event log, which on this home is SQLite's (ours or Dagster's own)."""
    storage = instance.event_log_storage
    assert isinstance(storage, SqliteEventLogStorage)
    return storage


def sqlite_synchronous(instance: dg.DagsterInstance) -> int:
    with sqlite_index(instance).index_connection() as conn:
        level = conn.exec_driver_sql("PRAGMA synchronous").scalar()
    assert isinstance(level, int)
    return level


def test_commits_sync_the_write_ahead_log_at_checkpoints_not_at_every_commit(homes):
    with dg.DagsterInstance.from_config(str(homes)) as instance:
        ranged_run(instance)
        assert sqlite_synchronous(instance) == 1  # NORMAL
        with sqlite_index(instance).index_connection() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    shutil.copy(PROJECT_YAML, homes / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(homes)) as instance:
        assert sqlite_synchronous(instance) == 2  # FULL, Python's sqlite3 default


def test_a_forked_process_opens_its_own_connections_and_its_events_are_stored(homes):
    with dg.DagsterInstance.from_config(str(homes)) as instance:
        run_id = ranged_run(
            instance
        )  # the parent's connections to the index and the run's file are open
        run = instance.get_run_by_id(run_id)
        pid = os.fork()
        if pid == 0:  # the child: write through the inherited instance, then say what it opened
            code = 3
            try:
                with ConnectionsOpened() as opened:
                    instance.report_engine_event("written by the forked child", run)
                code = 0 if opened.count >= 1 else 4
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        messages = [e.dagster_event.message for e in instance.all_logs(run_id) if e.dagster_event]
        assert "written by the forked child" in messages
    # Both processes' writes reached the file intact.
    db = sqlite3.connect(homes / "history" / "runs" / f"{run_id}.db")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()


def test_the_pools_slots_are_read_while_a_connection_is_open(homes):
    """Dagster asks whether the index has a table while it holds a connection of its own (the
    pools' limits, read as the daemon and a run's steps claim slots): that must not wait for the
    connection it holds. Read in a thread, so a deadlock fails the test instead of hanging it."""
    with dg.DagsterInstance.from_config(str(homes)) as instance:
        instance.event_log_storage.set_concurrency_slots("spark", 2)
    instance = dg.DagsterInstance.from_config(str(homes))  # it has not asked yet
    storage = instance.event_log_storage
    assert isinstance(storage, EngineReusingSqliteEventLogStorage)
    found: list = []
    reader = threading.Thread(
        target=lambda: found.append(storage.get_concurrency_info("spark")), daemon=True
    )
    reader.start()
    reader.join(timeout=60)
    stuck = reader.is_alive()
    if not stuck:  # disposing of a storage whose lock a thread keeps would wait forever too
        instance.dispose()
    assert not stuck, "reading the pool's slots waited on the connection it holds"
    [info] = found
    assert (info.slot_count, info.active_slot_count) == (2, 0)


WRITE_OBSERVATION = """
import sys
import dagster as dg
with dg.DagsterInstance.from_config(sys.argv[1]) as instance:
    instance.report_runless_asset_event(
        dg.AssetObservation(asset_key="marked", partition="2024-01-04", metadata={"n": 1})
    )
"""


def test_an_event_another_process_stores_is_read_at_once_through_a_kept_connection(homes):
    """The webserver's shape: a long-lived process reads the index through the connection it
    keeps, another process (a run) stores an event, the first reads it at once. (A statement
    left unfinished on a kept connection would hold its snapshot of the file, and every later
    read through it would miss what others commit.)"""
    with dg.DagsterInstance.from_config(str(homes)) as reader:
        storage = reader.event_log_storage
        assert isinstance(storage, EngineReusingSqliteEventLogStorage)

        def observed() -> list:
            found = reader.fetch_observations(dg.AssetKey("marked"), limit=10).records
            return [r.event_log_entry.asset_observation.metadata["n"].value for r in found]

        assert observed() == []
        assert not storage.has_pending_step("spark", "a-run", "a-step")
        written = subprocess.run(
            [sys.executable, "-c", WRITE_OBSERVATION, str(homes)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert written.returncode == 0, written.stderr
        assert observed() == [1]
