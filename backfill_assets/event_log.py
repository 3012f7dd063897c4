"""Dagster's SQLite event log, with one SQLAlchemy engine per database file kept between statements.

Dagster's ``SqliteEventLogStorage`` creates a new engine for every connection it opens (two or
three per event, and one more before a check evaluation to ask whether the index has a table)
and disposes of it afterwards. Each time it pays for the engine's set-up and for compiling the
statement, since SQLAlchemy caches compiled statements per engine. On a year's backfill that is
about a third of the time Dagster spends storing its ~9,000 events (README, "Dagster's SQLite
event log with its engines kept"). This subclass keeps the engines and changes nothing else:

- The engine still uses ``NullPool``. Each statement still opens and closes its own SQLite
  connection, so locking and what other processes see are exactly Dagster's.
- The files and their layout are Dagster's own, and so are the schema migrations. An instance
  can switch to or from this class at any time; the webserver and the daemon may use either.

``backfill_assets.cli.instance`` names this class in ``$DAGSTER_HOME/dagster.yaml`` when the
instance is on SQLite.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from dagster._core.storage.event_log.sqlite.sqlite_event_log import (
    INDEX_SHARD_NAME,
    SQLITE_BUSY_TIMEOUT_SECONDS,
    SqliteEventLogStorage,
)
from dagster._core.storage.sql import create_engine
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool

# A run touches its own file and the index; the webserver may read many runs' files in turn.
MAX_ENGINES = 32


class EngineReusingSqliteEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` that reuses each database file's engine (configured like it:
    ``base_dir``, the folder of the per-run files and the index)."""

    def __init__(self, base_dir: str, inst_data=None) -> None:
        self._engines: OrderedDict[str, Engine] = OrderedDict()
        super().__init__(base_dir, inst_data=inst_data)

    @classmethod
    def from_config_value(cls, inst_data, config_value) -> EngineReusingSqliteEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    def _engine(self, shard: str) -> Engine:
        engine = self._engines.pop(shard, None)
        if engine is None:
            engine = create_engine(self.conn_string_for_shard(shard), poolclass=NullPool,
                                   connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
        self._engines[shard] = engine  # the most recently used last
        while len(self._engines) > MAX_ENGINES:
            self._engines.popitem(last=False)[1].dispose()
        return engine

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        # Dagster's _connect, less the engine created and disposed of on every call.
        with self._db_lock:
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn, conn.begin():
                yield conn

    def has_table(self, table_name: str) -> bool:
        # Asked of the index before each check evaluation is stored.
        with self._db_lock:
            engine = self._engine(INDEX_SHARD_NAME)
        with engine.connect() as conn:
            return bool(engine.dialect.has_table(conn, table_name))

    def wipe(self) -> None:
        with self._db_lock:
            self._drop_engines()
        super().wipe()

    def dispose(self) -> None:
        with self._db_lock:
            self._drop_engines()
        super().dispose()

    def _drop_engines(self) -> None:
        while self._engines:
            self._engines.popitem()[1].dispose()
