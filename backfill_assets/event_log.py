"""Dagster's SQLite event log, with one SQLAlchemy engine per database file and its SQLite
connection kept between statements.

Dagster's ``SqliteEventLogStorage`` creates a new engine for every connection it opens (two or
three per event, and one more before a check evaluation to ask whether the index has a table),
with ``NullPool``, and disposes of it afterwards. Each statement therefore pays for the engine's
set-up, for compiling the statement (SQLAlchemy caches compiled statements per engine), and for
opening and closing a SQLite connection; closing the last connection to a file checkpoints its
write-ahead log: paid for every statement, that outweighs the statement itself. This subclass:

- keeps one engine per file (the most recently used ``MAX_ENGINES``), each with a pool that keeps
  one SQLite connection; a second thread that writes at the same moment gets a connection of its
  own, closed when it is done. Dagster's lock and its busy timeout are unchanged; the engines
  are looked up under a lock of their own, since Dagster holds its lock for a whole connection
  and asks ``has_table`` inside one (reading the pools' slots).
- commits with ``PRAGMA synchronous=NORMAL``: Dagster opens these files in WAL mode, where a
  commit is then written to the log without an fsync, and the log is synced at each checkpoint.
  A process that is killed loses nothing it committed; a power cut or an operating system crash
  may lose the last events committed before it (SQLite's documented trade-off), and never
  corrupts the file. The lake's tables do not depend on it: a partition's publish is its Delta
  commit, and a lost event only makes Dagster show a built partition as not built yet.
- drops its connections in a forked child, which opens its own, as SQLite requires.
- remembers which of the index's tables and asset-key columns it found, which Dagster asks
  about before storing every check evaluation and materialization (a schema query each).
- starts a new run's file as a copy of a template that Dagster's own ``_initdb`` made once in
  this folder (``.run-shard-dagster-<version>.template``, hidden from Dagster's ``*.db``
  listing of runs), put in place with a hard link, so that no process ever sees it half
  copied. Dagster's ``_initdb`` loads alembic's 180-odd revision scripts to learn its head
  and creates the file's tables and indexes one statement at a time: about 70 ms for every
  run on the idle 2-core machine, up to half a second while it is busy, against a
  millisecond (``bench/event_log_bench.py``). And a file already there is taken as
  ready when it carries an alembic revision, which is all Dagster's ``_initdb`` checks of an
  existing file (without loading the scripts to learn the head it does not compare with).
  A file without one (another process's ``_initdb`` under way), or a folder where hard links
  fail, goes through Dagster's ``_initdb`` as before.

The files and their layout are Dagster's own, and so are the schema migrations. An instance can
switch to or from this class at any time; the webserver and the daemon may use either.

``backfill_assets.cli.instance`` names this class in ``$DAGSTER_HOME/dagster.yaml`` when the
instance is on SQLite.
"""

from __future__ import annotations

import os
import shutil
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import dagster as dg
from alembic.runtime.migration import MigrationContext
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool, QueuePool

from backfill_assets.dagster_private import (
    INDEX_SHARD_NAME,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    ConfigurableClassData,
    SqliteEventLogStorage,
    create_engine,
)

# A run touches its own file and the index; the webserver may read many runs' files in turn.
MAX_ENGINES = 32
# A new run's file, as Dagster's ``_initdb`` of this Dagster version makes one; hidden, and not
# ``*.db``, which Dagster lists as runs.
TEMPLATE_NAME = f".run-shard-dagster-{dg.__version__}.template"

# The storages of this process, whose connections a forked child must not use.
_STORAGES: weakref.WeakSet[EngineReusingSqliteEventLogStorage] = weakref.WeakSet()


def _sync_at_checkpoints(dbapi_connection: Any, _record: object) -> None:
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")


def _forget_connections_in_child() -> None:
    for storage in list(_STORAGES):
        storage._forget_engines()


os.register_at_fork(after_in_child=_forget_connections_in_child)


class EngineReusingSqliteEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` that reuses each database file's engine and connection
    (configured like it: ``base_dir``, the folder of the per-run files and the index)."""

    def __init__(self, base_dir: str, inst_data: ConfigurableClassData | None = None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        # Guards ``_engines`` alone, held for no statement: Dagster's ``_db_lock`` is held for
        # a whole connection, and Dagster asks ``has_table`` while holding one.
        self._engines_lock = threading.Lock()
        # The index's tables and asset-key columns found there: once there, they stay (only a
        # wipe drops them, and forgets these).
        self._tables_found: set[str] = set()
        self._asset_key_columns_found: set[str] = set()
        self._template: str | None = None  # its path, once it is known to be there
        super().__init__(base_dir, inst_data=inst_data)
        _STORAGES.add(self)

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Mapping[str, Any]
    ) -> EngineReusingSqliteEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Engine:
        with self._engines_lock:
            return self._kept_engine(shard)

    def _kept_engine(self, shard: str) -> Engine:
        engine = self._engines.pop(shard, None)
        if engine is None:
            # One connection kept; any number more while threads overlap, closed on return.
            engine = create_engine(
                self.conn_string_for_shard(shard),
                poolclass=QueuePool,
                pool_size=1,
                max_overflow=-1,
                connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
            )
            event.listen(engine, "connect", _sync_at_checkpoints)
        self._engines[shard] = engine  # the most recently used last
        while len(self._engines) > MAX_ENGINES:
            self._engines.popitem(last=False)[1].dispose()
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        # Dagster's _connect, less the engine created and disposed of on every call, and a new
        # run's file copied instead of built.
        with self._db_lock:
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                if shard == INDEX_SHARD_NAME or not self._run_file_ready(shard, engine):
                    self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def _run_file_ready(self, shard: str, engine: Engine) -> bool:
        """Whether the run's file is there and stamped by alembic: put there now as a copy of
        the template, or already there with a revision (Dagster's ``_initdb`` then does
        nothing either)."""
        path = self.path_for_shard(shard)
        if not os.path.exists(path) and self._copied_from_template(path):
            return True
        try:
            with engine.connect() as conn:
                return MigrationContext.configure(conn).get_current_revision() is not None
        except DBAPIError:  # a file another process is creating, locked or not a database yet
            return False

    def _copied_from_template(self, path: str) -> bool:
        """The template copied beside ``path``, then linked to it: False when a file got there
        first (another process's run file), the folder takes no hard links or the copy failed."""
        template, partial = self._template_file(), self._partial(path)
        try:
            shutil.copyfile(template, partial)
            os.link(partial, path)
            return True
        except OSError:  # Dagster's _initdb then makes the file, or says why it cannot
            return False
        finally:
            if os.path.exists(partial):
                os.unlink(partial)

    def _template_file(self) -> str:
        """The template's path, made by Dagster's own ``_initdb`` if this folder has none yet
        (made aside and renamed into place: every process sees it whole or not at all)."""
        if self._template is None:
            template = os.path.join(self._base_dir, TEMPLATE_NAME)
            if not os.path.exists(template):
                partial = self._partial(template)
                engine = create_engine(
                    f"sqlite:///{partial}",
                    poolclass=NullPool,
                    connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS},
                )
                try:
                    self._initdb(engine)
                    engine.dispose()  # the last connection closed: its write-ahead log merged
                    os.replace(partial, template)
                except BaseException:
                    engine.dispose()
                    for leftover in (partial, f"{partial}-wal", f"{partial}-shm"):
                        if os.path.exists(leftover):
                            os.unlink(leftover)
                    raise
            self._template = template
        return self._template

    def _partial(self, path: str) -> str:
        """A hidden name beside ``path`` of this process and thread alone."""
        folder, name = os.path.split(path)
        return os.path.join(folder, f".{name.lstrip('.')}.{os.getpid()}.{threading.get_ident()}")

    def has_table(self, table_name: str) -> bool:
        # Asked of the index before each check evaluation is stored, and while Dagster holds a
        # connection (so under its ``_db_lock``: not taken here, as Dagster's own class does not)
        if table_name in self._tables_found:
            return True
        engine = self._engine(INDEX_SHARD_NAME)
        with engine.connect() as conn:
            found = bool(engine.dialect.has_table(conn, table_name))
        if found:
            self._tables_found.add(table_name)
        return found

    def _has_asset_key_col_on_connection(self, conn: Connection, column_name: str) -> bool:
        # Asked before each materialization is indexed: the asset keys table's columns, read.
        if column_name in self._asset_key_columns_found:
            return True
        found = super()._has_asset_key_col_on_connection(conn, column_name)
        if found:
            self._asset_key_columns_found.add(column_name)
        return found

    def wipe(self) -> None:
        with self._db_lock, self._engines_lock:
            self._drop_engines()
            self._tables_found.clear()
            self._asset_key_columns_found.clear()
        super().wipe()

    def dispose(self) -> None:
        with self._db_lock, self._engines_lock:
            self._drop_engines()
        super().dispose()

    def _drop_engines(self) -> None:
        while self._engines:
            self._engines.popitem()[1].dispose()

    def _forget_engines(self) -> None:
        # In a forked child: leave the parent's connections to the parent, unclosed. A lock a
        # parent's thread held at the fork stays held in the child: a new one.
        self._engines_lock = threading.Lock()
        while self._engines:
            self._engines.popitem()[1].dispose(close=False)
