"""A private PostgreSQL server for the tests and benchmarks that need one: `initdb` in a temporary
folder, `pg_ctl start` on a free loopback port (no Unix socket outside the folder), stopped and
removed afterwards, also when the test fails. The Debian `postgresql` package's binaries are not on
PATH; they are found under /usr/lib/postgresql/<version>/bin (or on PATH, or $PG_BINDIR). As root
(CI's containers), the server runs as the `postgres` user, which the package creates: PostgreSQL
refuses to run as root.

    with PostgresServer() as pg:
        dsn = pg.database("lake")      # 'dbname=lake host=127.0.0.1 port=... user=bench'
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def bindir() -> Path | None:
    """Where initdb and pg_ctl are, or None when PostgreSQL's server is not installed."""
    for candidate in [os.environ.get("PG_BINDIR", ""), *sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]:
        if candidate and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self, user: str = "bench"):
        self.bin = bindir()
        if self.bin is None:
            raise RuntimeError("PostgreSQL's server is not installed (initdb not found under /usr/lib/postgresql "
                               "or on PATH); on Debian: apt-get install postgresql")
        self.user = user
        self.root = Path(tempfile.mkdtemp(prefix="benchsmith-pg-"))
        self.port = _free_port()
        self._as: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        out = subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed ({out.returncode}): {out.stderr[-1500:]}{log[-1500:]}")

    def start(self) -> PostgresServer:
        data = self.root / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-sync")
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(self.root / "log"), "-w",
                  "-t", "60", "start")
        return self

    def stop(self) -> None:
        try:
            if (self.root / "data" / "postmaster.pid").exists():
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def dsn(self, database: str = "postgres") -> str:
        return f"dbname={database} host=127.0.0.1 port={self.port} user={self.user}"

    def url(self, database: str) -> str:
        """The database as a URL for Dagster's postgres_url (the psycopg2 driver named: see pyproject.toml)."""
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/{database}"

    def database(self, name: str) -> str:
        """Create database `name` (again, empty, if it exists); its libpq connection string."""
        import psycopg2

        deadline = time.monotonic() + 30
        while True:
            try:
                conn = psycopg2.connect(self.dsn())
                break
            except psycopg2.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            cur.execute(f'CREATE DATABASE "{name}"')
        conn.close()
        return self.dsn(name)
