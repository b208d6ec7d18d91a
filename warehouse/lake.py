"""The warehouse as a DuckLake: many writers, on many machines, into one set of tables.

DuckLake (DuckDB's lakehouse format) keeps a catalog of snapshots in a database, PostgreSQL for a
cluster or SQLite for one machine, and the data as Parquet files under a data path (a shared folder;
object storage where httpfs and credentials are set up). Every commit is one transaction of the
catalog: a writer killed mid-commit leaves no file referenced and no half-written partition.
`LakeWarehouse` has the interface of the file's `Warehouse` (warehouse/connection.py), so every
asset, the ledger and every README query run unchanged on it; the same schemas, tables, views and
comments are created in it (`create_schema`), except what DuckLake does not have:

- primary keys: DuckLake enforces none. The ledger's one-row-per-key promise is kept by the write
  lock below plus `OnConflict.merge`: a writer merges its rows by key while it holds the lock, so
  the key check and the insert see the same committed rows, and two processes that asked the same
  request at once leave one row (the second merge updates, or keeps, the first's);
- comments on view columns (the views and every table column keep theirs).

The write lock serialises write transactions, not processes: a Benchsmith writer holds it only
while it commits (a few to tens of ms), never between its model calls, so four runs on four
machines write into one lake side by side, where the file admits one writing process at a time.
It is a PostgreSQL advisory lock in the catalog's database (released by the server when the writer's
session ends, so a killed writer never leaves it held), or for a SQLite catalog an `flock` on a file
beside the catalog. Reads take no lock: each transaction reads the latest committed snapshot.

The DuckDB extensions it needs (`ducklake`, `postgres_scanner`, `sqlite_scanner`) come as PyPI
packages (`duckdb-ext-ducklake`, ...; pinned with DuckDB in pyproject.toml) and are loaded from the
package's file, never downloaded. A plain `duckdb` client reads the same tables:
``LOAD '<file>'; ATTACH 'ducklake:postgres:<dsn>' AS benchsmith (DATA_PATH '<data path>')``.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import importlib.util
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from configuration import Config, ConfigError
from warehouse.connection import (
    CATALOG,
    OnConflict,
    Warehouse,
    WarehouseLockTimeout,
    as_declared,
    backoff_sleep,
    check_ident,
    insert_rows,
)
from warehouse.per_process import PerProcess

EXTENSION_PACKAGE = {"ducklake": "duckdb-ext-ducklake", "postgres_scanner": "duckdb-ext-postgres",
                     "sqlite_scanner": "duckdb-ext-sqlite", "httpfs": "duckdb-ext-httpfs"}


class LakeError(RuntimeError):
    """The lake cannot be opened (an extension missing, the catalog unreachable); says which."""


def extension_file(name: str) -> Path:
    """The `.duckdb_extension` file of `name` for this DuckDB version, from its PyPI package."""
    spec = importlib.util.find_spec("duckdb_ext")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        found = sorted(glob.glob(os.path.join(root, "extensions", f"v{duckdb.__version__}", "*",
                                              f"{name}.duckdb_extension")))
        if found:
            return Path(found[0])
    raise LakeError(f"the DuckDB extension {name!r} for DuckDB {duckdb.__version__} is not installed: "
                    f"pip install {EXTENSION_PACKAGE.get(name, 'duckdb-ext-' + name)}=={duckdb.__version__}.*")


def load_extensions(con: duckdb.DuckDBPyConnection, names: Sequence[str]) -> None:
    for name in names:
        path = str(extension_file(name)).replace("'", "''")
        con.execute(f"LOAD '{path}'")


class LakeWarehouse(Warehouse):
    """A DuckLake with the file warehouse's interface. `catalog` is DuckLake's catalog string
    (`postgres:<libpq dsn>` or `sqlite:<file>`), never shown: `label` names it in messages."""

    is_lake = True

    def __init__(self, catalog: str, data_path: str | os.PathLike[str], label: str, folder: str | os.PathLike[str],
                 lock_timeout_s: float = 300.0):
        self.kind, _, self._target = catalog.partition(":")
        if self.kind not in ("postgres", "sqlite") or not self._target:
            raise ValueError(f"a lake catalog is postgres:<dsn> or sqlite:<file>, not {label}")
        self._catalog = catalog
        self.data_path = str(data_path)
        self.path = Path(data_path) if "://" not in self.data_path else Path(folder) / "lake"
        self.label = label
        self._folder = Path(folder)
        self.lock_timeout_s = lock_timeout_s
        self._local = threading.local()
        self._schema_ready = False
        self._lock = (_AdvisoryLock(self._target, self._lock_id()) if self.kind == "postgres"
                      else _FileLock(Path(self._target + ".lock")))

    def __repr__(self) -> str:
        return f"LakeWarehouse({self.where})"

    @property
    def where(self) -> str:
        return f"the lake ({self.label}, data {self.data_path})"

    @staticmethod
    def _lock_id() -> int:
        """The advisory lock's number. Advisory locks belong to one database, and a catalog database
        holds one lake, so a fixed number serves (the same on every machine, however each names
        the data path)."""
        return int(hashlib.sha256(b"benchsmith.lake.write").hexdigest()[:15], 16)

    @property
    def folder(self) -> Path:
        return self._folder

    def exists(self) -> bool:
        """Whether the lake holds Benchsmith's schema (anything was ever written)."""
        try:
            with self.connect(read_only=True) as con:
                return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = current_database() "
                                        "AND schema_name = 'llm' AND table_name = 'schema_version'").fetchall()[0][0])
        except duckdb.Error:
            return False

    # -- connections ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor on the lake for one unit of work. A write holds the lake's write lock for the
        block (other writers wait, readers do not); a read takes no lock."""
        held = getattr(self._local, "con", None)
        if held is not None:
            yield held
            return
        if not read_only:
            self._lock.acquire(time.monotonic() + self.lock_timeout_s, self.label)
        try:
            con = self._cursor()
            self._local.con = con
            try:
                if not read_only and not self._schema_ready:
                    from warehouse.schema import create_schema

                    create_schema(con)
                    _inline_ledger(con)
                    self._schema_ready = True
                yield con
            finally:
                self._local.con = None
                con.close()  # an open transaction is rolled back
        finally:
            if not read_only:
                self._lock.release()

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        if (self._catalog, self.data_path) in _lakes:
            base = attached(self._catalog, self.data_path, self.label)
        else:  # the first attach of a new catalog creates DuckLake's own tables: one process at a time
            self._lock.acquire(time.monotonic() + self.lock_timeout_s, self.label)
            try:
                base = attached(self._catalog, self.data_path, self.label)
            finally:
                self._lock.release()
        con = base.cursor()
        con.execute(f"USE {CATALOG}")
        return con

    def writer(self, max_hold_s: float = 1.0) -> LakeWriter:
        return LakeWriter(self)


    def files(self) -> int:
        """Parquet data files the lake's current tables reference."""
        with self.connect(read_only=True) as con:
            return con.execute(f"SELECT count(*) FROM __ducklake_metadata_{CATALOG}.ducklake_data_file "
                               "WHERE end_snapshot IS NULL").fetchall()[0][0]

    def compact(self, keep_days: float = 7.0) -> tuple[int, int]:
        """Maintenance: ledger commits are inlined in the catalog (`INLINE_ROWS`) and larger writes
        are Parquet files, and reads slow down as either piles up. Under the write lock (no writer is
        mid-transaction): write the inlined rows out as Parquet, merge adjacent small files,
        expire snapshots older than `keep_days` (time travel to them ends) and delete the files
        no snapshot references any more, and the files killed writers left unreferenced. Returns
        the data files before and after."""
        before = self.files()
        with self.connect() as con:
            con.execute(f"CALL ducklake_flush_inlined_data('{CATALOG}')")
            con.execute(f"CALL ducklake_merge_adjacent_files('{CATALOG}')")
            con.execute(f"CALL ducklake_expire_snapshots('{CATALOG}', older_than => now() - INTERVAL ({float(keep_days)} * 86400) SECOND)")
            con.execute(f"CALL ducklake_cleanup_old_files('{CATALOG}', cleanup_all => true)")
            con.execute(f"CALL ducklake_delete_orphaned_files('{CATALOG}', cleanup_all => true)")
        return before, self.files()


class LakeWriter:
    """The ledger's writer on a lake: each upsert is one transaction under the write lock, merged
    by key (`OnConflict.merge`); between them the lock is free, so writers in other processes and on
    other machines commit in turn while this one's calls are in flight."""

    def __init__(self, lake: LakeWarehouse):
        self.wh = lake
        if not lake._schema_ready:  # the first read (the ledger's cache lookup) finds the tables
            with lake.connect():
                pass

    def upsert(self, table: str, rows: Sequence[Mapping[str, Any]] | pa.Table, conflict: OnConflict | None = None,
               insert_first: bool = False) -> int:
        check_ident(table)
        data = rows if isinstance(rows, pa.Table) else as_declared(table, rows)
        if not data.num_rows:
            return 0
        with self.wh.connect() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                insert_rows(con, table, data, conflict, merge=True)
                con.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(duckdb.Error):  # a failed commit has no transaction left to roll back
                    con.execute("ROLLBACK")
                raise
        return data.num_rows

    def someone_waits(self) -> bool:
        """The lake's writers hold its lock only while they commit: nothing to yield between."""
        return False

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        """Rows of a query; a statement that writes (UPDATE, DELETE) takes the write lock."""
        reads = sql.lstrip().upper().startswith(("SELECT", "WITH", "FROM"))
        with self.wh.connect(read_only=reads) as con:
            return con.execute(sql, params or []).fetchall()

    def close(self) -> None:
        pass


# A ledger commit of at most this many rows is written into the catalog itself, in the catalog's own
# transaction, not as a Parquet file beside it (DuckLake's data inlining, set for `llm.calls` only).
# The ledger's commits are a few rows each: a catalog connection cut after the server committed but
# before its answer arrived would otherwise leave the catalog naming a file the writer deleted when
# it took the commit for failed (DuckLake's rollback removes the files it wrote), and every read of
# the ledger would fail. Not for every table: DuckLake 0.3 writes an empty inlined insert (a syntax
# error in the catalog) when a transaction replaces inlined rows of a table and then updates them,
# as a partition's replacement does.
INLINE_ROWS = 1000
INLINED = (("llm", "calls"),)


def _inline_ledger(con: duckdb.DuckDBPyConnection) -> None:
    """Set the inlining limit on the ledger's tables (once per catalog: the option is stored in it)."""
    have = {entry for (entry,) in con.execute(
        f"SELECT scope_entry FROM {CATALOG}.options() WHERE option_name = 'data_inlining_row_limit' AND value = ?",
        [str(INLINE_ROWS)]).fetchall()}
    for schema, table in INLINED:
        if f"{schema}.{table}" not in have:
            con.execute(f"CALL {CATALOG}.set_option('data_inlining_row_limit', {INLINE_ROWS}, "
                        f"schema => '{schema}', table_name => '{table}')")

# -- one attached lake per process ---------------------------------------------------------------

_lakes = PerProcess()  # (catalog, data path) -> its attached DuckDB instance


_PASSWORD_KV = re.compile(r"(?:^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", re.I)
_PASSWORD_URI = re.compile(r"^(postgres(?:ql)?://[^:/@]*):([^@]*)@")


def _without_password(catalog: str) -> str:
    """The catalog string DuckDB is given, its password taken out and handed to libpq through
    PGPASSWORD instead: DuckDB keeps an attached database's string, and any query could read it
    back (`SELECT path FROM duckdb_databases()`). The advisory lock's own session keeps the full
    string, which no query reaches."""
    kind, _, dsn = catalog.partition(":")
    if kind != "postgres":
        return catalog
    password = None
    m = _PASSWORD_KV.search(dsn)
    if m:
        password = m.group(1).strip("'").replace("\\'", "'")
        dsn = (dsn[:m.start()] + dsn[m.end():]).strip()
    else:
        u = _PASSWORD_URI.match(dsn)
        if u:
            from urllib.parse import unquote

            password = unquote(u.group(2))
            dsn = f"{u.group(1)}@{dsn[u.end():]}"
    if password is not None:
        os.environ["PGPASSWORD"] = password
    return f"{kind}:{dsn}"


def attached(catalog: str, data_path: str, label: str) -> duckdb.DuckDBPyConnection:
    """This process's DuckDB instance with the lake attached as `benchsmith` (attached once: unlike
    the file, the lake has no file lock to hand back, and attaching costs a catalog round trip)."""
    with _lakes.lock:
        base = _lakes.here().get((catalog, data_path))  # a forked child opens its own
        if base is None:
            base = duckdb.connect()
            if "://" not in data_path:
                Path(data_path).mkdir(parents=True, exist_ok=True)
            try:
                kind = catalog.partition(":")[0]
                load_extensions(base, ["ducklake", "postgres_scanner" if kind == "postgres" else "sqlite_scanner"]
                                + (["httpfs"] if data_path.startswith(("s3://", "gs://", "http")) else []))
                attach = _without_password(catalog)
                quoted = attach.replace("'", "''")
                where = data_path.replace("'", "''")
                base.execute(f"ATTACH 'ducklake:{quoted}' AS {CATALOG} (DATA_PATH '{where}')")
            except duckdb.Error as exc:
                base.close()
                # the error may quote the catalog string, which may hold a password: name it instead
                raise LakeError(f"could not attach the lake ({label}, data {data_path}): "
                                f"{type(exc).__name__}: {str(exc).replace(catalog, label)[:500]}") from None
            except BaseException:
                base.close()
                raise
            _lakes[(catalog, data_path)] = base
        return base


# -- the write lock --------------------------------------------------------------------------------

class _AdvisoryLock:
    """A PostgreSQL session advisory lock, one session per thread (a lock is its session's, and
    re-entrant within it: a writer nested in a unit of work of the same thread does not wait for
    itself)."""

    def __init__(self, dsn: str, lock_id: int):
        self.dsn, self.lock_id = dsn, lock_id
        self._local = threading.local()

    def _session(self, label: str = "the lake's catalog") -> Any:
        import psycopg2

        conn = getattr(self._local, "conn", None)
        if conn is None or conn.closed:
            try:
                conn = psycopg2.connect(self.dsn, connect_timeout=10)
            except psycopg2.Error as exc:
                raise LakeError(f"{label}: the catalog's database did not answer: {type(exc).__name__}: "
                                f"{str(exc).replace(self.dsn, '<dsn>')[:300]}") from None
            conn.autocommit = True
            self._local.conn = conn
        return conn

    def acquire(self, deadline: float, label: str) -> None:
        delay = 0.002
        while True:
            with self._session(label).cursor() as cur:
                cur.execute("SELECT pg_try_advisory_lock(%s)", (self.lock_id,))
                if cur.fetchone()[0]:
                    return
            if time.monotonic() > deadline:
                raise WarehouseLockTimeout(f"{label}: another writer held the lake's write lock for longer than "
                                           "the timeout (raise warehouse.lock_timeout_s)")
            delay = backoff_sleep(delay, 0.1)

    def release(self) -> None:
        with self._session().cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s)", (self.lock_id,))


class _FileLock:
    """An exclusive `flock` on a file beside a SQLite catalog (one machine); re-entrant per thread."""

    def __init__(self, path: Path):
        self.path = path
        self._local = threading.local()

    def acquire(self, deadline: float, label: str) -> None:
        depth = getattr(self._local, "depth", 0)
        if depth:
            self._local.depth = depth + 1
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        delay = 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise WarehouseLockTimeout(f"{label}: another writer held the lake's write lock for longer "
                                               "than the timeout (raise warehouse.lock_timeout_s)") from None
                delay = backoff_sleep(delay, 0.1)
        self._local.fd, self._local.depth = fd, 1

    def release(self) -> None:
        self._local.depth -= 1
        if self._local.depth == 0:
            fcntl.flock(self._local.fd, fcntl.LOCK_UN)
            os.close(self._local.fd)


def open_lake(catalog: str, catalog_env: str, catalog_path: Path | None, data_path: str, folder: Path,
              lock_timeout_s: float) -> LakeWarehouse:
    """The configured lake (`warehouse.lake`): a Postgres catalog's connection string is read from
    the environment variable now, and named by that variable in every message."""
    if catalog == "postgres":
        dsn = os.environ.get(catalog_env, "").strip()
        if not dsn:
            raise LakeError(f"warehouse.lake: the environment variable {catalog_env} is not set; it holds the "
                            "catalog's libpq connection string, e.g. 'dbname=lake host=db.internal user=bench'")
        return LakeWarehouse(f"postgres:{dsn}", data_path, f"postgres catalog ${catalog_env}", folder, lock_timeout_s)
    assert catalog_path is not None
    return LakeWarehouse(f"sqlite:{catalog_path}", data_path, f"sqlite catalog {catalog_path}", folder, lock_timeout_s)


def open_configured(cfg: Config) -> LakeWarehouse:
    """The lake `warehouse.lake` names (its reports still go beside `warehouse.path`)."""
    lake = cfg.warehouse.lake
    if lake is None:
        raise ConfigError("warehouse.lake is not set: the warehouse is the DuckDB file")
    data = lake.data_path if "://" in lake.data_path else str(cfg.beside(lake.data_path))
    return open_lake(lake.catalog, lake.catalog_env, cfg.beside(lake.catalog_path) if lake.catalog_path else None,
                     data, cfg.warehouse_path().parent, cfg.warehouse.lock_timeout_s)


def main(argv: list[str] | None = None) -> int:
    """`python -m warehouse.lake compact [--keep-days N]`: the configured lake's maintenance."""
    import argparse
    import sys

    from configuration import load_config

    parser = argparse.ArgumentParser(prog="python -m warehouse.lake", description="Maintenance of the configured lake.")
    parser.add_argument("command", choices=["compact"])
    parser.add_argument("--keep-days", type=float, default=7.0, help="snapshots younger than this stay (time travel)")
    args = parser.parse_args(argv)
    try:
        wh = open_configured(load_config())
        before, after = wh.compact(args.keep_days)
    except (ConfigError, LakeError) as exc:
        print(f"warehouse.lake: {exc}", file=sys.stderr)
        return 2
    print(f"{wh.where}: {before} data files before, {after} after")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
