"""Connections to the DuckDB file, serialised across threads and processes.

DuckDB lets one process write a database file at a time; a second process that
opens it fails at once with "Could not set lock on file". Dagster runs every
launched run (and, with the multiprocess executor, every step) in a process of
its own, so two materialisations at once would trip over each other.

The mechanism here: nobody holds the file open longer than one unit of work.
`Warehouse.connect()` first takes an advisory `flock` on a sidecar file
(`<db>.lock`): exclusive for writers, shared for read-only readers. Processes of
this project therefore queue for the file instead of failing. A process outside
the project (an analyst's `duckdb` shell, say) does not take the sidecar lock;
when DuckDB reports its lock we retry with backoff until `lock_timeout_s`, then
raise `WarehouseLockTimeout` naming the file.

Within one thread, nested `connect()` calls reuse the open connection, so a
helper can open a connection while its caller holds one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import random
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from warehouse.per_process import PerProcess
from warehouse.rows import arrow_schema, frame
from warehouse.schema import ITEM_KEYS, MADE_ON, TABLES, create_schema

_IDENT = re.compile(r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$")


class WarehouseLockTimeout(TimeoutError):
    """The DuckDB file stayed locked by another process for longer than the timeout."""


class WarehouseVersionError(RuntimeError):
    """The DuckDB file was written by a DuckDB newer than the one pinned (its storage format)."""


@dataclass(frozen=True)
class OnConflict:
    """What an insert does with a row whose key is stored already: keep the stored row (`update`
    None), or set the named columns, each to an SQL expression over `stored.<column>` (the row in the
    table) and `incoming.<column>` (the new one), where `when` (same names) holds.

    One definition, two renderings: `ON CONFLICT` for the DuckDB file, whose primary keys enforce
    the key, and a delete and insert of the rows to write (`rows_to_write`) for a DuckLake
    (warehouse/lake.py), which enforces no key; the lake's writers hold its write lock while they
    write, so the check and the insert see the same rows."""

    keys: tuple[str, ...]
    update: Mapping[str, str] | None = None
    when: str | None = None

    def on_conflict(self) -> str:
        """The file's clause: the stored row's columns unqualified, the incoming row's EXCLUDED."""
        def sql(expr: str) -> str:
            return re.sub(r"\bincoming\.", "EXCLUDED.", re.sub(r"\bstored\.", "", expr))
        target = ", ".join(self.keys)
        if self.update is None:
            return f"ON CONFLICT ({target}) DO NOTHING"
        sets = ", ".join(f"{c} = {sql(e)}" for c, e in self.update.items())
        return f"ON CONFLICT ({target}) DO UPDATE SET {sets}" + (f" WHERE {sql(self.when)}" if self.when else "")

    def rows_to_write(self, table: str, source: str, columns: Sequence[str], table_columns: Sequence[str]) -> str:
        """The lake's query of the rows an upsert writes: each incoming row whose key is new, and each
        stored row the update replaces, with its updated columns set and the others kept; the column
        `_replaces` tells the second kind (its stored row is deleted before the rows are inserted).

        The lake upserts by delete and insert rather than MERGE: DuckLake writes a MERGE as a Parquet
        file beside the catalog whatever its size, while a small delete and insert are inlined in the
        catalog's own transaction (`warehouse.lake.INLINE_ROWS`). A commit whose answer is lost on the
        network then leaves nothing behind: with a file, DuckLake deletes the file it wrote when the
        commit seems to fail, and a commit the server did make would name a file that is gone."""
        on = " AND ".join(f"stored.{k} = incoming.{k}" for k in self.keys)
        matched = f"(stored.{self.keys[0]} IS NOT NULL)"

        def value(c: str) -> str:
            new = f'incoming."{c}"' if c in columns else "NULL"
            keep = (self.update or {}).get(c, f'stored."{c}"')
            return f'CASE WHEN {matched} THEN {keep} ELSE {new} END AS "{c}"'

        if self.update is None:
            wanted = f"NOT {matched}"
        else:
            wanted = f"NOT {matched} OR ({self.when})" if self.when else "TRUE"
        return (f"SELECT {', '.join(value(c) for c in table_columns)}, {matched} AS _replaces "
                f"FROM {source} AS incoming LEFT JOIN {table} AS stored ON ({on}) WHERE {wanted}")


class Warehouse:
    """One DuckDB file. Cheap to construct; opens connections only inside `connect()`.
    (`warehouse.lake.LakeWarehouse` is the same interface on a DuckLake.)"""

    is_lake = False

    def __init__(self, path: str | os.PathLike[str], lock_timeout_s: float = 300.0):
        self.path = Path(path).resolve()
        self.lock_timeout_s = lock_timeout_s
        self._local = threading.local()
        self._schema_ready = False  # brought up to date by this object (again when the file is new)

    def __repr__(self) -> str:
        return f"Warehouse({str(self.path)!r})"

    def exists(self) -> bool:
        """Whether anything was ever written (the file exists)."""
        return self.path.exists()

    @property
    def folder(self) -> Path:
        """The folder beside the warehouse where its reports go."""
        return self.path.parent

    @property
    def where(self) -> str:
        """The warehouse as messages name it."""
        return str(self.path)

    # -- connections ---------------------------------------------------------

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for one unit of work; the file is released when the block ends."""
        held = getattr(self._local, "con", None)
        if held is not None:
            # Nested use in the same thread: reuse (a read inside a write is fine).
            yield held
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.lock_timeout_s
        lock_fd = self._acquire_sidecar(shared=read_only, deadline=deadline)
        try:
            fresh = not self.path.exists()
            con = self._open(read_only=read_only, deadline=deadline)
            self._local.con = con
            try:
                if not read_only:
                    self._ensure_schema(con, fresh)
                yield con
            finally:
                self._local.con = None
                _release(self.path, con)
        finally:
            fcntl.flock(lock_fd, fcntl.LOCK_UN)
            os.close(lock_fd)
            _writer_lock(self.path).let_go_seen()

    def _ensure_schema(self, con: duckdb.DuckDBPyConnection, fresh: bool) -> None:
        """The schema, once per Warehouse, and again whenever the open created the file (`fresh`:
        it did not exist before): a file deleted while the process runs comes back empty."""
        if fresh or not self._schema_ready:
            create_schema(con)
            self._schema_ready = True

    def _acquire_sidecar(self, shared: bool, deadline: float) -> int:
        """The sidecar lock `<file>.lock`. A process that has to wait for it says so by holding a
        shared lock on `<file>.lock.waiting` meanwhile: a writer that holds the file checks that
        after each commit (`someone_waits`) and yields only then."""
        fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        delay = _POLL_FIRST_S
        waiting: int | None = None
        ours = _writer_lock(self.path)  # this process's let-gos of the file
        try:
            while True:
                seen = ours.let_gos
                try:
                    fcntl.flock(fd, mode)
                    return fd
                except BlockingIOError:
                    if waiting is None:
                        waiting = os.open(str(self.path) + ".lock.waiting", os.O_RDWR | os.O_CREAT, 0o644)
                        fcntl.flock(waiting, fcntl.LOCK_SH)
                    if time.monotonic() > deadline:
                        os.close(fd)
                        raise WarehouseLockTimeout(
                            f"{self.path}: another Benchsmith process held the warehouse for more than "
                            f"{self.lock_timeout_s:.0f} s (raise warehouse.lock_timeout_s)"
                        ) from None
                    ours.wait_for_let_go(seen, delay * random.uniform(0.5, 1.0))  # as backoff_sleep, or less
                    delay = min(delay * 2, _POLL_CAP_S)
        finally:
            if waiting is not None:
                os.close(waiting)  # closing the descriptor releases its lock

    def someone_waits(self) -> bool:
        """Whether another Benchsmith process waits for the sidecar lock (see `_acquire_sidecar`):
        one non-blocking lock attempt on `<file>.lock.waiting`."""
        fd = os.open(str(self.path) + ".lock.waiting", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def _open(self, read_only: bool, deadline: float) -> duckdb.DuckDBPyConnection:
        if read_only and not self.path.exists():
            # A read of a warehouse that was never written: create it empty first.
            duckdb.connect(str(self.path)).close()
        delay = 0.05
        while True:
            try:
                return _attach(self.path, read_only)
            except duckdb.IOException as exc:
                if "version number" in str(exc) and "newer version" in str(exc):
                    raise WarehouseVersionError(
                        f"{self.path}: written by a newer DuckDB than this project's {duckdb.__version__} "
                        f"({str(exc).splitlines()[0]}). Move it aside and build it again (make demo makes a new one), "
                        "or with the DuckDB that wrote it run EXPORT DATABASE and here IMPORT DATABASE") from None
                # DuckDB's "Could not set lock on file ...: Conflicting lock is held" (not any "block")
                if not re.search(r"could not set lock|conflicting lock", str(exc), re.I):
                    raise
                if time.monotonic() > deadline:
                    raise WarehouseLockTimeout(
                        f"{self.path}: locked by a process outside Benchsmith (a duckdb shell?) for more "
                        f"than {self.lock_timeout_s:.0f} s: {exc}"
                    ) from None
                delay = backoff_sleep(delay, 2.0)

    def writer(self, max_hold_s: float = 1.0) -> Writer:
        """A connection for a stream of small writes (the ledger's results): see `Writer`."""
        return Writer(self, max_hold_s)

    # -- reads ---------------------------------------------------------------

    def rows(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        """Run a query; each row as a dict of column name to value."""
        with self.connect() as con:
            cur = con.execute(sql, params or [])
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall()]

    def scalar(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        with self.connect() as con:
            row = con.execute(sql, params or []).fetchone()
            return None if row is None else row[0]

    # -- writes --------------------------------------------------------------

    def replace_partition(
        self,
        table: str,
        rows: Sequence[Mapping[str, Any]] | pa.Table,
        partition: Mapping[str, Any] | None = None,
    ) -> int:
        """Replace the rows of `table` matching `partition` (all rows if None) with `rows`.

        Delete and insert happen in one transaction: on any error the previous rows
        stay. Every incoming row must belong to the partition. Returns rows written.
        """
        return self.replace_partitions({table: rows}, partition)[table]

    def begin_staging(self, table: str) -> None:
        """An empty staging copy of `table` (`<table>__staging`) to append to while rows are made, so
        that they need not all be held in memory; `replace_partitions(..., staged=[table])` then
        swaps them in with the rest, in one transaction."""
        check_ident(table)
        with self.connect() as con:
            con.execute(f"CREATE OR REPLACE TABLE {table}__staging AS SELECT * FROM {table} LIMIT 0")

    def append_staging(self, table: str, rows: Sequence[Mapping[str, Any]]) -> int:
        """Append rows to the staging copy made by `begin_staging`."""
        return self.upsert(f"{table}__staging", rows)

    def replace_partitions(
        self,
        tables: Mapping[str, Sequence[Mapping[str, Any]] | pa.Table],
        partition: Mapping[str, Any] | None = None,
        staged: Sequence[str] = (),
    ) -> dict[str, int]:
        """`replace_partition` for several tables in one transaction (all or nothing); each table in
        `staged` takes the rows of its staging copy (see `begin_staging`), which is then dropped."""
        partition = dict(partition or {})
        prepared: dict[str, pa.Table] = {}
        for table, rows in tables.items():
            check_ident(table)
            if table in ITEM_KEYS:
                rows = stamp_items(rows.to_pylist() if isinstance(rows, pa.Table) else rows)
            data = rows if isinstance(rows, pa.Table) else _typed(table, rows)
            for col, value in partition.items():
                if data.num_rows and col not in data.column_names:
                    raise ValueError(f"{table}: rows lack partition column {col!r}")
                if data.num_rows:
                    outside = [v for v in set(data.column(col).to_pylist()) if v != value]
                    if outside:
                        raise ValueError(
                            f"{table}: row with {col}={outside[0]!r} does not belong to partition {col}={value!r}"
                        )
            prepared[table] = data
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                where, params = _where(partition)
                for table, data in prepared.items():
                    con.execute(f"DELETE FROM {table}{where}", params)
                    if data.num_rows:
                        insert_rows(con, table, data)
                    if table in MADE_ON:
                        _stamp_replies(con, table, partition)
                counts = {t: d.num_rows for t, d in prepared.items()}
                for table in staged:
                    check_ident(table)
                    con.execute(f"DELETE FROM {table}{where}", params)
                    counts[table] = con.execute(f"SELECT count(*) FROM {table}__staging").fetchall()[0][0]
                    con.execute(f"INSERT INTO {table} SELECT * FROM {table}__staging")
                    con.execute(f"DROP TABLE {table}__staging")
                con.execute("COMMIT")
            except BaseException:
                _rollback(con)
                raise
        return counts

    def item_set_version(self, table: str, partition: Mapping[str, Any] | None = None) -> str:
        """One digest of the items `table` holds in `partition` (of their `item_digest`s): the data
        version an items asset reports, so Dagster marks the replies made on other items stale."""
        if table not in ITEM_KEYS:
            raise ValueError(f"{table} is not an items table")
        where, params = _where(dict(partition or {}))
        digests = self.scalar(f"SELECT string_agg(item_digest, ',' ORDER BY item_digest) FROM {table}{where}", params)
        return hashlib.sha256((digests or "").encode()).hexdigest()[:16]

    def upsert(self, table: str, rows: Sequence[Mapping[str, Any]] | pa.Table, conflict: OnConflict | None = None) -> int:
        """Insert rows (what a stored key does: `conflict`). One transaction."""
        check_ident(table)
        data = rows if isinstance(rows, pa.Table) else _typed(table, rows)
        if not data.num_rows:
            return 0
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                insert_rows(con, table, data, conflict, merge=self.is_lake)
                con.execute("COMMIT")
            except BaseException:
                _rollback(con)
                raise
        return data.num_rows


CATALOG = "benchsmith"
_KEEP_IDLE = 4  # idle DuckDB instances kept per process (one per warehouse file)


@dataclass
class _Instance:
    base: duckdb.DuckDBPyConnection
    users: int = 0
    read_only: bool = False
    threads: int | None = None  # as set by `duckdb_threads` (None: DuckDB's default, one per core)


class _Instances(PerProcess):
    """This process's DuckDB instances, one per warehouse file, and the threads they work with."""

    threads: int | None = None  # as `duckdb_threads` sets it (None: DuckDB's default, one per core)


_instances = _Instances()
_schema_lock = threading.Lock()


@contextmanager
def duckdb_threads(n: int | None) -> Iterator[None]:
    """While the block runs, this process's DuckDB works with at most `n` threads (None: its
    default, one per core), from each file's next attach on. For a process that leaves cores to
    others: while `generators.ahead`'s worker generates MuSoBench levels on one of two cores, a
    write on two threads slowed its generation by a fifth (benchmarks/muso_build.py)."""
    before, _instances.threads = _instances.threads, n
    try:
        yield
    finally:
        _instances.threads = before


def _attach(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """A connection to the file, attached under a fixed catalog name: DuckDB would name it after
    the file, and a file called like one of our schemas (`s1.duckdb`) would make `s1.items`
    ambiguous. Starting a DuckDB instance costs about 20 ms of CPU, attaching a file to a running
    one about 4 ms, so each process keeps one in-memory instance per warehouse file and attaches
    the file to it only while someone uses it (`_release` detaches it, which frees DuckDB's own
    file lock for other processes). Threads of one process that read at once share the attach."""
    with _instances.lock:
        inst = _instances.here().get(path)  # a forked child must not touch its parent's instances
        if inst is None:
            inst = _instances[path] = _Instance(duckdb.connect())
            idle = [p for p, i in _instances.items() if i.users == 0 and p != path]
            for p in idle[: max(0, len(_instances) - 1 - _KEEP_IDLE)]:
                _instances.pop(p).base.close()
        if inst.users == 0:
            threads = _instances.threads
            if inst.threads != threads:
                inst.base.execute("RESET threads" if threads is None else f"SET threads = {int(threads)}")
                inst.threads = threads
            quoted = str(path).replace("'", "''")
            inst.base.execute(f"ATTACH '{quoted}' AS {CATALOG}" + (" (READ_ONLY)" if read_only else ""))
            inst.read_only = read_only
        elif inst.read_only != read_only:
            raise RuntimeError(f"{path}: already attached {'read-only' if inst.read_only else 'for writing'} "
                               "by another thread of this process")
        inst.users += 1
    con = inst.base.cursor()
    try:
        con.execute(f"USE {CATALOG}")
    except BaseException:
        _release(path, con)
        raise
    return con


def _release(path: Path, con: duckdb.DuckDBPyConnection) -> None:
    """Close a connection from `_attach`; the last user detaches the file."""
    try:
        con.close()
    finally:
        with _instances.lock:
            inst = _instances.get(path)
            if inst is not None and inst.users > 0:
                inst.users -= 1
                if inst.users == 0:
                    try:
                        inst.base.execute(f"DETACH {CATALOG}")
                    except duckdb.Error:
                        _instances.pop(path).base.close()  # closing the instance detaches too


class _WriterLock:
    """The exclusive sidecar lock of one file, shared by this process's writers: threads of one
    process (the steps `materialize_all` runs at once) write through one attached DuckDB instance,
    each on its own cursor and transactions (DuckDB's own concurrency control keeps them apart), so
    they need not take turns for the file as processes do. Once one of them yields because someone
    waits (another process, or a `connect()` of this one), no other writer of this process joins
    until the last holder has let go, so whoever waits gets the file.

    It also counts the file's let-gos by any thread of this process (`Warehouse.connect`'s exit, the
    last writer's `let_go`): a thread waiting for the sidecar lock polls it, and between polls waits
    for the next let-go here, so a lock another thread of this process held is taken at once, not
    up to a poll interval later (at the start of a run the items step waited 0.15-0.25 s for the
    models probe's step); another process's let-go is found at the next poll."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.let_gos = 0
        self.fd: int | None = None
        self.holders = 0
        self.taking = False  # one thread is acquiring the file lock for the process
        self.draining = False  # a holder yielded to a waiter: nobody joins until all have let go
        self.released = 0.0  # when the last holder let go, yielding

    def take(self, wh: Warehouse, deadline: float, yield_s: float) -> None:
        with self.cond:
            while self.taking or self.draining or (
                    not self.holders and time.monotonic() < self.released + yield_s):
                if time.monotonic() > deadline:
                    raise WarehouseLockTimeout(f"{wh.path}: this process's writers held the warehouse for more "
                                               f"than {wh.lock_timeout_s:.0f} s (raise warehouse.lock_timeout_s)")
                self.cond.wait(0.01)
            if self.holders:
                self.holders += 1
                return
            self.taking = True
        try:
            fd = wh._acquire_sidecar(shared=False, deadline=deadline)
        except BaseException:
            with self.cond:
                self.taking = False
                self.cond.notify_all()
            raise
        with self.cond:
            self.fd, self.holders, self.taking = fd, 1, False
            self.cond.notify_all()

    def let_go(self, yielding: bool) -> None:
        with self.cond:
            self.holders -= 1
            if yielding:
                self.draining = self.holders > 0
            if self.holders == 0:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
                os.close(self.fd)
                self.fd, self.draining = None, False
                self.released = time.monotonic() if yielding else 0.0
                self.let_gos += 1
            self.cond.notify_all()

    def let_go_seen(self) -> None:
        """A thread of this process let go of the file (outside the writers)."""
        with self.cond:
            self.let_gos += 1
            self.cond.notify_all()

    def wait_for_let_go(self, seen: int, timeout: float) -> None:
        """Until a let-go after the `seen`-th, or `timeout` seconds."""
        with self.cond:
            self.cond.wait_for(lambda: self.let_gos != seen, timeout)


_writer_locks = PerProcess()


def _writer_lock(path: Path) -> _WriterLock:
    with _writer_locks.lock:  # a forked child holds none of its parent's locks
        return _writer_locks.here().setdefault(path, _WriterLock())


# how often a process polls a sidecar lock another holds: from 5 ms, doubling, up to 200 ms
_POLL_FIRST_S, _POLL_CAP_S = 0.005, 0.2


class Writer:
    """Keeps one connection (and the file lock) across many small upserts: attaching the file
    costs a few ms of CPU (see `_attach`), a commit on an open connection under 1 ms. It yields the
    file only when another Benchsmith process waits for it (`Warehouse.someone_waits`, checked
    after each commit once it has held the file `max_hold_s`), so other processes that queue for it
    get their turn (they poll the lock every 5-200 ms; `yield_s` leaves them room) and a lone run
    never re-attaches. The writers of one process share the file (`_WriterLock`): each commits on
    its own cursor of the one attached instance. Every upsert is its own committed transaction: a
    killed process loses nothing it has written. Use from one thread at a time; `close()` when done."""

    def __init__(self, warehouse: Warehouse, max_hold_s: float = 1.0, yield_s: float = 0.05):
        self.wh, self.max_hold_s, self.yield_s = warehouse, max_hold_s, yield_s
        self._con: duckdb.DuckDBPyConnection | None = None
        self._lock: _WriterLock | None = None  # this process's share of the file's exclusive lock
        self._opened = 0.0
        self._released = 0.0
        self._single_thread = False  # `SET threads` is the instance's: reset before the file is released

    def upsert(self, table: str, rows: Sequence[Mapping[str, Any]], conflict: OnConflict | None = None,
               insert_first: bool = False) -> int:
        """Insert `rows` (what a stored key does: `conflict`) in one transaction. With
        `insert_first`, a plain INSERT is tried first (several times cheaper in DuckDB) and the
        conflict clause is used only if a key already exists."""
        check_ident(table)
        data = as_declared(table, rows)
        if not data.num_rows:
            return 0
        con = self._connection()
        if not self._single_thread:
            con.execute("SET threads = 1")  # small commits: more threads only cost CPU
            self._single_thread = True
        # A key stored already fails the plain INSERT (`insert_first`); a key that another writer of
        # this process stored, or a row it updated, in a transaction that committed first fails the
        # UPDATE or the COMMIT. Each goes again with the conflict clause, after the other has committed.
        attempts = ([None] if insert_first else []) + [conflict] * 5
        for k, clause in enumerate(attempts):
            if k > 1:
                time.sleep(0.005 * k * random.random())  # two writers that met do not meet again
            con.execute("BEGIN TRANSACTION")
            try:
                insert_rows(con, table, data, clause)
                con.execute("COMMIT")
                break
            except BaseException as exc:
                with contextlib.suppress(duckdb.Error):  # a failed COMMIT has rolled back already
                    con.execute("ROLLBACK")
                if not _key_conflict(exc) or k == len(attempts) - 1:
                    self.close()
                    raise
        if time.monotonic() - self._opened > self.max_hold_s and self.wh.someone_waits():
            self.close()
        return data.num_rows

    def someone_waits(self) -> bool:
        """Whether another Benchsmith process waits for the file this writer holds."""
        return self._con is not None and self.wh.someone_waits()

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        """Rows of a query on the writer's connection."""
        return self._connection().execute(sql, params or []).fetchall()

    def _connection(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            wait = self.yield_s - (time.monotonic() - self._released)
            if self._released and wait > 0:
                time.sleep(wait)  # let a queued process take the file
            self.wh.path.parent.mkdir(parents=True, exist_ok=True)
            deadline = time.monotonic() + self.wh.lock_timeout_s
            shared = _writer_lock(self.wh.path)
            shared.take(self.wh, deadline, self.yield_s)
            self._lock = shared
            try:
                fresh = not self.wh.path.exists()
                self._con = self.wh._open(read_only=False, deadline=deadline)
                with _schema_lock:  # two writers of this process creating the schema at once would conflict
                    self.wh._ensure_schema(self._con, fresh)
            except BaseException:
                self._unlock()
                raise
            self._opened = time.monotonic()
        return self._con

    def close(self) -> None:
        if self._con is not None:
            try:
                if self._single_thread:
                    self._single_thread = False
                    try:
                        self._con.execute("RESET threads")
                    except duckdb.Error:
                        pass  # the release below closes a broken instance anyway
                _release(self.wh.path, self._con)
            finally:
                self._con = None
                self._unlock()
                self._released = time.monotonic()

    def _unlock(self) -> None:
        if self._lock is not None:
            lock, self._lock = self._lock, None
            lock.let_go(yielding=self.wh.someone_waits())


def _key_conflict(exc: BaseException) -> bool:
    """A primary key met twice: at the INSERT (a stored row), or, from another transaction of this
    process that committed first, at the COMMIT ("constraint violation") or at the UPDATE of the
    conflict clause ("Conflict on update", DuckDB's write-write conflict): TransactionExceptions."""
    text = str(exc).lower()
    return isinstance(exc, duckdb.ConstraintException) or (
        isinstance(exc, duckdb.TransactionException) and ("constraint violation" in text or "conflict on" in text))


def backoff_sleep(delay: float, cap: float) -> float:
    """Wait about `delay` seconds (jittered, so processes polling one lock spread out) and return
    the next wait: doubled, at most `cap`. The lock pollers' one backoff."""
    time.sleep(delay * random.uniform(0.5, 1.0))
    return min(delay * 2, cap)


def check_ident(table: str) -> None:
    if not _IDENT.match(table):
        raise ValueError(f"not a schema-qualified table name: {table!r}")


def _where(partition: Mapping[str, Any]) -> tuple[str, list[Any]]:
    if not partition:
        return "", []
    for col in partition:
        if not re.match(r"^[a-z_][a-z0-9_]*$", col):
            raise ValueError(f"bad partition column {col!r}")
    return " WHERE " + " AND ".join(f"{c} = ?" for c in partition), list(partition.values())


def item_digest(row: Mapping[str, Any]) -> str:
    """A digest of an item's content: every column but the digest itself, so the same seed and
    configuration give the same digest and any change to the question, options or gold another."""
    body = json.dumps({k: v for k, v in row.items() if k != "item_digest"}, sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def stamp_items(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "item_digest": item_digest(r)} for r in rows]


def _stamp_replies(con: duckdb.DuckDBPyConnection, table: str, partition: Mapping[str, Any]) -> None:
    """The replies just written (the rows of `partition`) take the digest of their item as stored
    now, in the same transaction; a reply whose item is not stored keeps NULL: stale from the start."""
    items = MADE_ON[table]
    _where(partition)  # checks the column names
    match = [f"i.{k} = {table}.{k}" for k in ITEM_KEYS[items]] + [f"{table}.{c} = ?" for c in partition]
    con.execute(f"UPDATE {table} SET item_digest = i.item_digest FROM {items} i WHERE {' AND '.join(match)}",
                list(partition.values()))


def _to_arrow(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    if not rows:
        return pa.table({})
    return pa.Table.from_pylist([dict(r) for r in rows])


def as_declared(table: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Rows of many small commits (the ledger's) as Arrow, typed by `table`'s declared columns
    (0.2 ms for 32 ledger rows; inferring the types takes 1.2). Used when every row has the same
    fields and each is a column of the table, else the rows are converted as they are. A value
    Arrow cannot take as its column's type goes to `_typed`, whose check names the row and field."""
    if not rows:
        return pa.table({})
    names = rows[0].keys()
    schema = arrow_schema(table, tuple(names)) if all(r.keys() == names for r in rows) else None
    if schema is None:
        return _to_arrow(rows)
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return _typed(table, rows)


def _typed(table: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """`rows` checked against `table`'s declared columns and typed by them (`warehouse.rows`); a
    table the schema does not declare (a scratch table) is taken as its rows are."""
    if not rows:
        return pa.table({})
    if table.removesuffix("__staging") not in TABLES:
        return _to_arrow(rows)
    return frame(table, rows).to_arrow()


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back the open transaction, if any: a commit that failed has none left, and the error that
    failed it is the one to raise, not "cannot rollback"."""
    with contextlib.suppress(duckdb.Error):
        con.execute("ROLLBACK")


def _delete_and_insert(con: duckdb.DuckDBPyConnection, table: str, conflict: OnConflict, columns: Sequence[str]) -> None:
    """The lake's upsert of `_incoming_rows` (`OnConflict.rows_to_write` says why not MERGE), inside
    the caller's transaction and under the lake's write lock."""
    table_columns = [d[0] for d in con.execute(f"SELECT * FROM {table} LIMIT 0").description]
    rows = con.execute(conflict.rows_to_write(table, "_incoming_rows", columns, table_columns)).fetch_arrow_table()
    if not rows.num_rows:
        return
    con.register("_merge_rows", rows)
    try:
        if any(rows.column("_replaces").to_pylist()):
            same = " AND ".join(f"m.{k} = {table}.{k}" for k in conflict.keys)
            con.execute(f"DELETE FROM {table} WHERE EXISTS (SELECT 1 FROM _merge_rows AS m WHERE m._replaces AND {same})")
        cols = ", ".join(f'"{c}"' for c in table_columns)
        con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _merge_rows")
    finally:
        try:
            con.unregister("_merge_rows")
        except duckdb.TransactionException:
            pass


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table, conflict: OnConflict | None = None,
            merge: bool = False) -> None:
    """Insert the rows of `data`; a key stored already is handled as `conflict` says, by ON CONFLICT
    on the file or (`merge`) by a delete and insert on a lake."""
    cols = ", ".join(f'"{c}"' for c in data.column_names)
    con.register("_incoming_rows", data)
    try:
        if conflict is not None and merge:
            _delete_and_insert(con, table, conflict, data.column_names)
            return
        tail = conflict.on_conflict() if conflict is not None else ""
        con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _incoming_rows {tail}")
    finally:
        try:
            con.unregister("_incoming_rows")
        except duckdb.TransactionException:
            pass  # the transaction already failed; the original error is what matters
