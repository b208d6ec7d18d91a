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

import fcntl
import os
import random
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from warehouse.schema import create_schema

_IDENT = re.compile(r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$")


class WarehouseLockTimeout(TimeoutError):
    """The DuckDB file stayed locked by another process for longer than the timeout."""


class Warehouse:
    """One DuckDB file. Cheap to construct; opens connections only inside `connect()`."""

    def __init__(self, path: str | os.PathLike[str], lock_timeout_s: float = 300.0):
        self.path = Path(path).resolve()
        self.lock_timeout_s = lock_timeout_s
        self._local = threading.local()
        self._schema_ready = False

    def __repr__(self) -> str:
        return f"Warehouse({str(self.path)!r})"

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
            con = self._open(read_only=read_only, deadline=deadline)
            self._local.con = con
            try:
                if not read_only and not self._schema_ready:
                    create_schema(con)
                    self._schema_ready = True
                yield con
            finally:
                self._local.con = None
                con.close()
        finally:
            fcntl.flock(lock_fd, fcntl.LOCK_UN)
            os.close(lock_fd)

    def _acquire_sidecar(self, shared: bool, deadline: float) -> int:
        fd = os.open(str(self.path) + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, mode)
                return fd
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise WarehouseLockTimeout(
                        f"{self.path}: another Benchsmith process held the warehouse for more than "
                        f"{self.lock_timeout_s:.0f} s (raise warehouse.lock_timeout_s)"
                    ) from None
                time.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, 0.2)

    def _open(self, read_only: bool, deadline: float) -> duckdb.DuckDBPyConnection:
        if read_only and not self.path.exists():
            # A read of a warehouse that was never written: create it empty first.
            duckdb.connect(str(self.path)).close()
        delay = 0.05
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise
                if time.monotonic() > deadline:
                    raise WarehouseLockTimeout(
                        f"{self.path}: locked by a process outside Benchsmith (a duckdb shell?) for more "
                        f"than {self.lock_timeout_s:.0f} s: {exc}"
                    ) from None
                time.sleep(delay * random.uniform(0.5, 1.0))
                delay = min(delay * 2, 2.0)

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

    def replace_partitions(
        self,
        tables: Mapping[str, Sequence[Mapping[str, Any]] | pa.Table],
        partition: Mapping[str, Any] | None = None,
    ) -> dict[str, int]:
        """`replace_partition` for several tables in one transaction (all or nothing)."""
        partition = dict(partition or {})
        prepared: dict[str, pa.Table] = {}
        for table, rows in tables.items():
            _check_ident(table)
            data = rows if isinstance(rows, pa.Table) else _to_arrow(rows)
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
                        _insert(con, table, data)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return {t: d.num_rows for t, d in prepared.items()}

    def upsert(self, table: str, rows: Sequence[Mapping[str, Any]] | pa.Table, sql_tail: str = "") -> int:
        """Insert rows; `sql_tail` may add an ON CONFLICT clause. One transaction."""
        _check_ident(table)
        data = rows if isinstance(rows, pa.Table) else _to_arrow(rows)
        if not data.num_rows:
            return 0
        with self.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                _insert(con, table, data, sql_tail)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return data.num_rows


def _check_ident(table: str) -> None:
    if not _IDENT.match(table):
        raise ValueError(f"not a schema-qualified table name: {table!r}")


def _where(partition: Mapping[str, Any]) -> tuple[str, list[Any]]:
    if not partition:
        return "", []
    for col in partition:
        if not re.match(r"^[a-z_][a-z0-9_]*$", col):
            raise ValueError(f"bad partition column {col!r}")
    return " WHERE " + " AND ".join(f"{c} = ?" for c in partition), list(partition.values())


def _to_arrow(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    if not rows:
        return pa.table({})
    return pa.Table.from_pylist([dict(r) for r in rows])


def _insert(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table, sql_tail: str = "") -> None:
    cols = ", ".join(f'"{c}"' for c in data.column_names)
    con.register("_incoming_rows", data)
    try:
        con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM _incoming_rows {sql_tail}")
    finally:
        try:
            con.unregister("_incoming_rows")
        except duckdb.TransactionException:
            pass  # the transaction already failed; the original error is what matters
