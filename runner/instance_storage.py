"""Dagster's SQLite storage for the command's runs: the same files, written with less work.

Dagster's default storage (`storage: sqlite` in dagster.yaml, or no storage named) keeps the runs'
records in `<base_dir>/history/runs.db` and each run's events in a file of its own,
`<base_dir>/history/runs/<run id>.db`, beside an index file, all in WAL mode. Dagster 1.13.27's
`SqliteRunStorage` and `SqliteEventLogStorage` do more per run than the records and events need:

- for every statement (some 30 on the run's record, 15 events for a step that does nothing) they
  create a SQLAlchemy engine, open the file, and close it: the write-ahead log is made,
  checkpointed into the file and deleted each time;
- for each new run file the event log loads alembic's migration scripts from disk, twice (to read
  the head revision, then to stamp the file with it), some 90 Python files each time, and creates
  the tables before turning WAL on, so each CREATE is a transaction with a rollback journal.

`RunStorage` keeps one engine for runs.db, with its connections (one per thread at a time).
`RunEventLogStorage` keeps an engine, and its one connection, for each of the last `ENGINES` files
it used (the run's own file and the index), loads the migration scripts once per process, and
turns WAL on before creating a new file's tables, on the connection it keeps. The new file is the
one Dagster makes: the same tables and indexes, WAL, the head revision (`tests/test_instance_storage.py`
compares the two files, and reads each storage's runs and events with the other). Every statement
still commits. After each commit to a run's file the log is checkpointed into the file (passively:
never waiting for a reader): the UI streams a running run's events by watching `<run id>.db` itself
for changes (Dagster's `SqliteEventLogStorageWatchdog`), which a log left open would never touch (the
same test file watches as the UI does). The connections close when the storage is disposed of,
when the process exits (`runner.command.exit_fast` runs the atexit handlers) or when a file
leaves the last `ENGINES`, so a finished run leaves each `.db` file alone, as Dagster's does. A killed
process leaves `-wal` files beside them; SQLite reads them back at the next open.

`LocalSqliteStorage` is Dagster's `DagsterSqliteStorage` (which still sets up and migrates the files)
with these two; `runner.compute_logs.open_instance` opens it in place of Dagster's for the command's
runs. The UI, reading dagster.yaml itself, keeps Dagster's classes (so do the runs it launches): the
files are the same.

Measured side by side (`benchmarks/dagster_runs.py`, a run of an asset with one check that does
nothing; 2 cores of an AMD EPYC, 2026-12-04), step by step, each change measured the same way on a
quiet machine: Dagster's storage took 0.23-0.25 s of wall time and 0.19-0.20 s of CPU per run; an
engine per event file and the scripts loaded once took 0.07-0.08 s off; the event file's connection
kept, 0.03-0.04 s more; a new file's tables made after WAL is on, 0.01-0.02 s more (0.10-0.11 s and
0.08-0.09 s of CPU per run; the checkpoint after each commit cost nothing measurable); runs.db's
connections kept, 0.02 s more: 0.08 s of wall time and 0.07 s of CPU per run, a third of Dagster's.
"""

from __future__ import annotations

import atexit
import functools
import logging
import re
import sqlite3
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as db
import sqlalchemy.exc as db_exc
from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata
from dagster._core.storage.event_log.sqlite import sqlite_event_log
from dagster._core.storage.event_log.sqlite.sqlite_event_log import INDEX_SHARD_NAME, SqliteEventLogStorage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
from dagster._core.storage.sql import create_engine, get_alembic_config, safe_commit
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage, _event_logs_directory
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import QueuePool

ENGINES = 16  # files whose engine and connection are kept: the index, the runs going on at once, a few read after
RUN_CONNECTIONS = 4  # connections to runs.db kept for the threads that read and write run records at once
_INIT_RETRIES = 10  # as Dagster's: another process (the UI) creating the same file at the same moment


_OPEN: weakref.WeakSet[RunEventLogStorage | RunStorage] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for storage in list(_OPEN):
        storage.close_files()


@functools.cache
def _migrations() -> Any:
    """The event log's alembic scripts, loaded once per process (Dagster loads them per new file)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(get_alembic_config(sqlite_event_log.__file__))


class RunEventLogStorage(SqliteEventLogStorage):
    """`SqliteEventLogStorage` with an engine kept per recent file and the migrations loaded once
    (module docstring)."""

    def __init__(self, base_dir: str, inst_data: Any = None):
        self._engines: OrderedDict[str, Engine] = OrderedDict()  # used at once by the index's set-up
        super().__init__(base_dir, inst_data)
        _OPEN.add(self)

    def _engine(self, shard: str) -> Engine:
        engine = self._engines.pop(shard, None)
        if engine is None:
            # one connection kept (the storage's lock lets one statement run at a time, from any
            # thread); one more, if anything ever nests a use, is closed after it
            engine = create_engine(self.conn_string_for_shard(shard), poolclass=QueuePool, pool_size=1, max_overflow=-1,
                                   connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False})
        self._engines[shard] = engine  # the most recent last
        while len(self._engines) > ENGINES:
            self._engines.popitem(last=False)[1].dispose()
        return engine

    def close_files(self) -> None:
        """Close every connection kept (each file is checkpointed as its last connection closes)."""
        with self._db_lock:
            while self._engines:
                self._engines.popitem()[1].dispose()

    def wipe(self) -> None:
        self.close_files()  # no connection left on a file about to be deleted
        super().wipe()

    def dispose(self) -> None:
        self.close_files()
        super().dispose()

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:  # as Dagster's: one statement at a time per storage
            engine = self._engine(shard)
            if shard not in self._initialized_dbs:
                self._initdb(engine)
                self._initialized_dbs.add(shard)
            with engine.connect() as conn:
                with conn.begin():
                    yield conn
                if shard != INDEX_SHARD_NAME:
                    # the committed events copied from the write-ahead log into the run's file: the
                    # UI streams a running run by watching that file (module docstring)
                    conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")

    def _initdb(self, engine: Engine, for_index_shard: bool = False) -> None:
        """A run file without a revision gets WAL, the tables and the head revision, as Dagster's
        `_initdb` gives it (WAL first here, on the connection kept), from the scripts loaded once.
        The index file (made once per instance folder, with its own revision rules) is Dagster's own."""
        if for_index_shard:
            super()._initdb(engine, for_index_shard=True)
            return
        from alembic.runtime.migration import MigrationContext

        retries = _INIT_RETRIES
        while True:
            try:
                with engine.connect() as conn:
                    if MigrationContext.configure(conn).get_current_revision() is None:
                        conn.execute(db.text("PRAGMA journal_mode=WAL;"))
                        SqlEventLogStorageMetadata.create_all(conn)
                        MigrationContext.configure(conn).stamp(_migrations(), "head")
                        safe_commit(conn)
                return
            except (db_exc.DatabaseError, sqlite3.DatabaseError, sqlite3.OperationalError) as exc:
                message = str(exc)
                concurrent = (re.search(r"table [A-Za-z_]* already exists", message) or "database is locked" in message
                              or "UNIQUE constraint failed: alembic_version.version_num" in message)
                if not concurrent or retries == 0:
                    raise
                logging.info("RunEventLogStorage: another process is creating the same run file, retrying: %s",
                             message)
                time.sleep(0.2)
                retries -= 1


class RunStorage(SqliteRunStorage):
    """`SqliteRunStorage` (the runs' records, `runs.db`) with one engine whose connections are kept:
    Dagster's creates an engine and opens and closes the file for each of the 30 or so reads and
    writes of a run's record. Threads take connections from the pool, one each at a time."""

    def __init__(self, conn_string: str, inst_data: Any = None):
        super().__init__(conn_string, inst_data)
        self._engine = create_engine(conn_string, poolclass=QueuePool, pool_size=RUN_CONNECTIONS, max_overflow=-1,
                                     connect_args={"check_same_thread": False})
        _OPEN.add(self)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._engine.connect() as conn, conn.begin():
            yield conn

    def close_files(self) -> None:
        self._engine.dispose()

    def dispose(self) -> None:
        self.close_files()
        super().dispose()


class LocalSqliteStorage(DagsterSqliteStorage):
    """Dagster's SQLite storage (runs, schedules, event logs in the same folders), with
    `RunStorage` and `RunEventLogStorage`."""

    def __init__(self, base_dir: str, inst_data: Any = None):
        super().__init__(base_dir, inst_data)  # Dagster's set-up and migrations of the files, as always
        self._run_storage = RunStorage(self._run_storage._conn_string)
        self._event_log_storage = RunEventLogStorage(_event_logs_directory(base_dir))

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> LocalSqliteStorage:  # type: ignore[override]
        return cls.from_local(inst_data=inst_data, **config_value)
