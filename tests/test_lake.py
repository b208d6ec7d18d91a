"""The warehouse as a DuckLake with a PostgreSQL catalog (warehouse/lake.py): the file's schema and
queries, the ledger's promises with several writers at once and after a SIGKILL, Dagster's
instance on PostgreSQL, one endpoint's concurrency across runs, and the copy between file and lake.

Each test module's server is private: `initdb` in a temporary folder on a free loopback port,
stopped and removed when the module ends (tests/postgres.py)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest
import yaml

from configuration import load_config
from llm_calls import CallRequest, Ledger, ModelRegistry
from llm_calls.stub_server import StubServer
from tests.conftest import write_config
from tests.postgres import PostgresServer, bindir
from tests.tables_digest import VOLATILE, reply
from tests.test_readme import readme_queries
from warehouse import Warehouse, open_warehouse
from warehouse.lake import LakeWarehouse

ROOT = Path(__file__).resolve().parent.parent
ENV = "BENCHSMITH_LAKE_CATALOG"


@pytest.fixture(scope="module")
def pg():
    if bindir() is None:
        if os.environ.get("BENCHSMITH_REQUIRE_POSTGRES"):
            pytest.fail("PostgreSQL's server (initdb, pg_ctl) is not installed, and CI requires the lake tests")
        pytest.skip("PostgreSQL's server is not installed (apt-get install postgresql)")
    with PostgresServer() as server:
        yield server


_counter = iter(range(10**6))


@pytest.fixture
def lake_env(pg, monkeypatch):
    """A fresh, empty lake catalog database; its connection string in the environment."""
    dsn = pg.database(f"lake{next(_counter)}")
    monkeypatch.setenv(ENV, dsn)
    return dsn


def lake_config(tmp_path: Path, models: dict, **more) -> Path:
    data = {
        "warehouse": {"path": str(tmp_path / "wh.duckdb"), "lake": {"catalog": "postgres", "data_path": str(tmp_path / "lake")}},
        "ledger": {"timeout_s": 5.0, "max_attempts": 3, "backoff_base_s": 0.01, "backoff_max_s": 0.05,
                   "progress_interval_s": 60, "slots_dir": str(tmp_path / "slots")},
        "models": models, "evaluate": list(models), "judge": next(iter(models)), **more,
    }
    return write_config(tmp_path, data)


def stub_model(stub: StubServer, concurrency: int = 4) -> dict:
    return {"base_url": stub.base_url, "model": "stub-model", "concurrency": concurrency,
            "sampling": {"temperature": 0.0, "max_tokens": 64}}


def _catalog_objects(con: duckdb.DuckDBPyConnection) -> dict:
    tables = con.execute("SELECT schema_name || '.' || table_name, comment FROM duckdb_tables() "
                         "WHERE database_name = current_database() ORDER BY 1").fetchall()
    views = con.execute("SELECT schema_name || '.' || view_name, comment FROM duckdb_views() "
                        "WHERE database_name = current_database() AND NOT internal ORDER BY 1").fetchall()
    columns = con.execute("SELECT schema_name || '.' || table_name, column_name, data_type, comment FROM duckdb_columns() "
                          "WHERE database_name = current_database() AND table_name IN (SELECT table_name FROM "
                          "duckdb_tables() WHERE database_name = current_database()) ORDER BY 1, 2").fetchall()
    return {"tables": tables, "views": views, "columns": columns}


@pytest.mark.slow
def test_the_lake_has_the_files_tables_views_columns_and_comments(lake_env, tmp_path):
    cfg = load_config(lake_config(tmp_path, {"m": {"base_url": "http://127.0.0.1:9/v1", "model": "x"}}))
    lake = open_warehouse(cfg)
    assert isinstance(lake, LakeWarehouse)
    with lake.connect() as con, Warehouse(tmp_path / "file.duckdb").connect() as fcon:
        in_lake, in_file = _catalog_objects(con), _catalog_objects(fcon)
        assert con.execute("SELECT type FROM duckdb_databases() WHERE database_name = current_database()"
                           ).fetchall() == [("ducklake",)]
    assert len(in_lake["tables"]) > 20 and len(in_lake["views"]) > 20
    assert in_lake == in_file
    # the data is Parquet under the data path once rows are written
    lake.upsert("sources.records", [{"dataset": "d", "source": "fld", "subset": "s", "split": "test", "source_id": "1",
                                     "origin": "o", "row_number": 1, "context": "c", "question": "q", "extra": "{}"}])
    assert list((tmp_path / "lake").rglob("*.parquet"))


@pytest.mark.slow
def test_every_readme_query_runs_on_the_lake(lake_env, tmp_path):
    lake = open_warehouse(load_config(lake_config(tmp_path, {"m": {"base_url": "http://127.0.0.1:9/v1", "model": "x"}})))
    failed = []
    for query in readme_queries():
        try:
            lake.rows(query)
        except duckdb.Error as exc:
            failed.append(f"{query[:80]!r}: {exc}")
    assert not failed, "\n".join(failed)


@pytest.mark.slow
def test_a_plain_duckdb_client_reads_the_lake_the_project_wrote(lake_env, tmp_path):
    cfg = load_config(lake_config(tmp_path, {"m": {"base_url": "http://127.0.0.1:9/v1", "model": "x"}}))
    open_warehouse(cfg).upsert("sources.records", [{
        "dataset": "d", "source": "fld", "subset": "s", "split": "test", "source_id": "1", "origin": "o",
        "row_number": 1, "context": "c", "question": "q?", "extra": "{}"}])
    from warehouse.lake import extension_file

    client = textwrap.dedent(f"""
        import duckdb
        con = duckdb.connect()
        con.execute("LOAD '{extension_file('ducklake')}'")
        con.execute("LOAD '{extension_file('postgres_scanner')}'")
        con.execute("ATTACH 'ducklake:postgres:{lake_env}' AS benchsmith (DATA_PATH '{tmp_path / 'lake'}')")
        print(con.execute("SELECT question FROM benchsmith.sources.records").fetchall())
    """)
    out = subprocess.run([sys.executable, "-c", client], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[('q?',)]"


ASK = textwrap.dedent("""
    import sys
    from configuration import load_config
    from llm_calls import CallRequest, Ledger, ModelRegistry
    from warehouse import open_warehouse
    cfg = load_config(sys.argv[1])
    with ModelRegistry(cfg) as reg:
        results = Ledger(open_warehouse(cfg), reg).complete(
            sys.argv[2], [CallRequest([{"role": "user", "content": f"item {i}"}]) for i in range(int(sys.argv[3]))])
    assert all(r.ok for r in results)
""")


@pytest.mark.slow
def test_two_writers_asking_the_same_requests_at_once_leave_one_row_per_key(lake_env, tmp_path):
    n = 120
    with StubServer(delay_s=0.02) as stub:
        path = lake_config(tmp_path, {"m": stub_model(stub, 8)})
        procs = [subprocess.Popen([sys.executable, "-c", ASK, str(path), "m", str(n)], cwd=ROOT) for _ in range(2)]
        assert [p.wait(timeout=180) for p in procs] == [0, 0]
        asked = len(stub.contents())
    wh = open_warehouse(load_config(path))
    assert wh.rows("SELECT count(*) AS rows, count(DISTINCT key) AS keys, count(*) FILTER (status = 'ok') AS ok "
                   "FROM llm.calls") == [{"rows": n, "keys": n, "ok": n}]
    # both really ran at once: some requests were sent by both (the lake kept one row of each)
    assert n <= asked <= 2 * n


KILLED = textwrap.dedent("""
    import sys
    from configuration import load_config
    from llm_calls import CallRequest, Ledger, ModelRegistry
    from warehouse import open_warehouse
    cfg = load_config(sys.argv[1])
    with ModelRegistry(cfg) as reg:
        Ledger(open_warehouse(cfg), reg).complete(
            "m", [CallRequest([{"role": "user", "content": f"item {i}"}]) for i in range(int(sys.argv[2]))])
""")


@pytest.mark.slow
def test_a_writer_killed_mid_run_loses_only_its_calls_in_flight_and_the_rerun_repeats_none(lake_env, tmp_path):
    n, concurrency = 300, 4
    with StubServer(delay_s=0.03) as stub:
        path = lake_config(tmp_path, {"m": stub_model(stub, concurrency)})
        child = subprocess.Popen([sys.executable, "-c", KILLED, str(path), str(n)], cwd=ROOT)
        deadline = time.monotonic() + 120
        while len(stub.requests) < n // 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        first = set(stub.contents())
        assert n // 2 <= len(first) < n  # really killed mid-batch
        cfg = load_config(path)
        wh = open_warehouse(cfg)
        committed = {json.loads(r["request"])["messages"][0]["content"]
                     for r in wh.rows("SELECT request FROM llm.calls WHERE status = 'ok'")}
        # lost: at most the calls in flight and the answers waiting for their commit (the bound:
        # concurrency + ledger.max_unsaved, twice the concurrency by default)
        assert len(first - committed) <= concurrency + 2 * concurrency
        stub.requests.clear()
        with ModelRegistry(cfg) as reg:
            results = Ledger(wh, reg).complete("m", [CallRequest([{"role": "user", "content": f"item {i}"}])
                                                     for i in range(n)])
        rerun = stub.contents()
    assert all(r.ok for r in results)
    assert not committed & set(rerun), "a call committed before the kill was requested again"
    assert len(rerun) == len(set(rerun)) == n - len(committed)
    assert wh.rows("SELECT count(*) AS n, count(DISTINCT key) AS keys FROM llm.calls") == [{"n": n, "keys": n}]


def _two_runs(tmp_path: Path, stub: StubServer, how: str) -> int:
    """Two processes, each with its own warehouse (two users' runs, or two machines': each its own
    slot folder too when the slots are in Postgres), each a model with `concurrency: 4` on `stub`;
    the stub's peak of requests at once."""
    paths = []
    for model in "ab":
        folder = tmp_path / f"{how}-{model}"
        folder.mkdir()
        data = {"warehouse": {"path": str(folder / "wh.duckdb")},
                "ledger": {"timeout_s": 5.0, "progress_interval_s": 60, "endpoint_slots": how,
                           "slots_dir": str(folder if how == "postgres" else tmp_path / "slots")},
                "models": {model: stub_model(stub, 4)}, "evaluate": [model], "judge": model}
        paths.append(write_config(folder, data))
    procs = [subprocess.Popen([sys.executable, "-c", ASK, str(p), m, "120"], cwd=ROOT) for p, m in zip(paths, "ab")]
    assert [p.wait(timeout=180) for p in procs] == [0, 0]
    assert len(stub.contents()) == 240
    return stub.peak_in_flight


@pytest.mark.slow
def test_two_runs_on_one_endpoint_never_send_it_more_than_its_concurrency(tmp_path):
    """Two `materialize_all` runs at once (two users' backfills, each its own warehouse), each
    evaluating Instruction Boundary with a model of `concurrency: 4` on the same endpoint: the stub
    never holds more than 4 requests (`endpoint_slots: machine`, the default); with `run` (each run
    bounded alone) the same two runs send it more, so the test would see a breach."""
    ib = {"datasets": {"fld": {"form": "judging", "generator": "fld", "count": {"demo": 30, "paper": 600}}},
          "settings": ["vanilla", "conformity"]}
    peaks = {}
    for how in ("machine", "run"):
        with StubServer(delay_s=0.05, responder=reply) as stub:
            procs = []
            for model in ("a", "b"):
                folder = tmp_path / f"{how}-{model}"
                folder.mkdir()
                data = {"warehouse": {"path": str(folder / "wh.duckdb")}, "scale": "demo", "ib": ib,
                        "ledger": {"timeout_s": 5.0, "progress_interval_s": 60, "endpoint_slots": how,
                                   "slots_dir": str(tmp_path / "slots")},
                        "models": {model: stub_model(stub, 4)}, "evaluate": [model], "judge": model}
                env = {**os.environ, "BENCHSMITH_CONFIG": str(write_config(folder, data)), "DAGSTER_HOME": str(folder)}
                procs.append(subprocess.Popen([sys.executable, "-m", "assets.materialize_all", "--select", "ib"], cwd=ROOT,
                                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
            outs = [p.communicate(timeout=600)[0] for p in procs]
            assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-2000:] for o in outs)
            assert len(stub.contents()) > 100
            peaks[how] = stub.peak_in_flight
    assert peaks["machine"] <= 4, peaks
    assert peaks["run"] > 4, peaks


@pytest.mark.slow
def test_two_runs_on_two_machines_share_the_endpoints_slots_through_postgres(lake_env, tmp_path):
    with StubServer(delay_s=0.05) as stub:
        assert _two_runs(tmp_path, stub, "postgres") <= 4


@pytest.mark.slow
def test_migrate_copies_a_file_into_a_lake_and_back_with_every_table_and_the_ledger(lake_env, tmp_path, monkeypatch):
    from warehouse.migrate import main as migrate

    with StubServer(delay_s=0.0, responder=reply) as stub:
        path = lake_config(tmp_path, {"m": stub_model(stub)})
        cfg = load_config(path)
        file = Warehouse(cfg.warehouse_path())
        with ModelRegistry(cfg) as reg:
            Ledger(file, reg).complete("m", [CallRequest([{"role": "user", "content": f"q {i}"}]) for i in range(30)])
        file.upsert("sources.records", [{"dataset": "d", "source": "fld", "subset": "s", "split": "test",
                                         "source_id": str(i), "origin": "o", "row_number": i, "context": "c",
                                         "question": "q", "extra": "{}", "choices": "[1, 2]"} for i in range(5)])
    monkeypatch.setenv("BENCHSMITH_CONFIG", str(path))
    assert migrate(["--to-lake"]) == 0
    lake = open_warehouse(cfg)
    assert lake.rows("SELECT count(*) AS n, count(DISTINCT key) AS k FROM llm.calls") == [{"n": 30, "k": 30}]
    assert migrate(["--to-lake"]) == 2  # the lake holds rows now: refused without --replace
    assert migrate(["--to-file", str(tmp_path / "back.duckdb")]) == 0
    con = duckdb.connect()
    con.execute(f"ATTACH '{tmp_path / 'wh.duckdb'}' AS a (READ_ONLY)")
    con.execute(f"ATTACH '{tmp_path / 'back.duckdb'}' AS b (READ_ONLY)")
    for table in ("llm.calls", "sources.records"):
        assert con.execute(f"SELECT count(*) FROM (SELECT * FROM a.{table} EXCEPT ALL SELECT * FROM b.{table})"
                           ).fetchall() == [(0,)]
        assert con.execute(f"SELECT count(*) FROM b.{table}").fetchall()[0][0] in (30, 5)
    con.close()
    # the ledger answers from the copy: nothing is asked again
    with StubServer() as stub2:
        cfg2 = load_config(write_config(tmp_path, {**yaml.safe_load(path.read_text()),
                                                    "warehouse": {"path": str(tmp_path / "back.duckdb")}}, "back.yaml"))
        with ModelRegistry(cfg2) as reg:
            again = Ledger(Warehouse(cfg2.warehouse_path()), reg).complete(
                "m", [CallRequest([{"role": "user", "content": f"q {i}"}]) for i in range(30)])
        assert all(r.cached for r in again) and not stub2.requests


@pytest.mark.slow
def test_the_catalogs_connection_string_is_never_stored(lake_env, pg, tmp_path, monkeypatch):
    """A password in the catalog's connection string stays in the environment: not in the
    warehouse's tables, not in the Dagster resource, not in an error."""
    monkeypatch.setenv(ENV, lake_env + " password=s3cret-pw")
    with StubServer() as stub:
        cfg = load_config(lake_config(tmp_path, {"m": stub_model(stub)}))
        wh = open_warehouse(cfg)
        with ModelRegistry(cfg) as reg:
            Ledger(wh, reg).complete("m", [CallRequest([{"role": "user", "content": "hello"}])])
    from assets.definitions import build_definitions

    defs = build_definitions(cfg.source)
    assert "s3cret" not in json.dumps(defs.resources["warehouse"].model_dump(), default=str)
    with wh.connect(read_only=True) as con:
        for (table,) in con.execute("SELECT schema_name || '.' || table_name FROM duckdb_tables() "
                                    "WHERE database_name = current_database()").fetchall():
            assert "s3cret" not in repr(con.execute(f"SELECT * FROM {table}").fetchall()), table
        # D12: no query reads the password back from the attached catalog's string
        assert "s3cret" not in repr(con.execute("SELECT * FROM duckdb_databases()").fetchall())
    from warehouse import query as query_command

    assert "s3cret" not in json.dumps(query_command_rows(query_command, cfg), default=str)
    monkeypatch.setenv(ENV, f"dbname=nowhere host=127.0.0.1 port={pg.port} user=bench password=s3cret-pw")
    with pytest.raises(Exception) as err:
        open_warehouse(cfg).exists()
    assert "s3cret" not in str(err.value) and ENV in str(err.value)


def query_command_rows(query_command, cfg):
    """What `python -m warehouse.query "SELECT path FROM duckdb_databases()"` reads on the lake."""
    wh = open_warehouse(cfg)
    return wh.rows("SELECT database_name, path FROM duckdb_databases()")


def test_the_catalog_password_is_taken_out_of_the_attached_string(monkeypatch):
    from warehouse.lake import _without_password

    monkeypatch.delenv("PGPASSWORD", raising=False)
    assert _without_password("postgres:dbname=lake host=h user=u password=s3cret port=5") == \
        "postgres:dbname=lake host=h user=u port=5"
    assert os.environ["PGPASSWORD"] == "s3cret"
    assert _without_password("postgres:postgresql://u:p%40ss@h:5/lake") == "postgres:postgresql://u@h:5/lake"
    assert os.environ["PGPASSWORD"] == "p@ss"
    assert _without_password("sqlite:/tmp/catalog.sqlite") == "sqlite:/tmp/catalog.sqlite"


@pytest.mark.slow
def test_a_lake_on_a_sqlite_catalog_serves_one_machine(tmp_path):
    with StubServer() as stub:
        data = {"warehouse": {"path": str(tmp_path / "wh.duckdb"),
                              "lake": {"catalog": "sqlite", "catalog_path": "catalog.sqlite", "data_path": "lake"}},
                "models": {"m": stub_model(stub)}, "evaluate": ["m"], "judge": "m"}
        cfg = load_config(write_config(tmp_path, data))
        wh = open_warehouse(cfg)
        with ModelRegistry(cfg) as reg:
            Ledger(wh, reg).complete("m", [CallRequest([{"role": "user", "content": f"x {i}"}]) for i in range(20)])
            again = Ledger(wh, reg).complete("m", [CallRequest([{"role": "user", "content": f"x {i}"}]) for i in range(20)])
    assert all(r.cached for r in again)
    assert (tmp_path / "catalog.sqlite").exists() and list((tmp_path / "lake").rglob("*.parquet"))
    assert wh.rows("SELECT count(DISTINCT key) AS k FROM llm.calls") == [{"k": 20}]


# -- four runs at once: one lake, one Dagster instance on PostgreSQL -----------------------------------

def _compare(lake: LakeWarehouse, file: Path) -> list[str]:
    """Tables whose rows differ between the lake and the file, volatile columns left out (see
    tests/tables_digest.py)."""
    from warehouse.migrate import differences
    from warehouse.schema import TABLES

    return differences(lake, file, [t for t in TABLES if not t.startswith("runs.")],  # bookkeeping, per process
                       leave_out=lambda c: bool(VOLATILE.search(c)) or c in ("total_attempts", "probe_cached"))


@pytest.mark.slow
def test_four_runs_at_once_into_one_lake_and_one_dagster_instance_make_the_tables_one_run_makes(lake_env, pg, tmp_path):
    """Four processes, as four machines would be, each evaluating its own model (own endpoint)
    into one lake, recording their runs in one Dagster instance on PostgreSQL; afterwards every
    table equals a one-process run's of all four models into a file, and `llm.calls` has one row
    per key. Left out of the comparison besides the volatile columns: `total_attempts` (a judge
    request two runs asked at once is one row whose attempts count both) and `probe_cached` (each
    run probes every model, and the later runs' probes are answered from the ledger).)"""
    stubs = [StubServer(delay_s=0.01, responder=reply).start() for _ in range(4)]
    try:
        models = {f"m{k}": stub_model(s) for k, s in enumerate(stubs, 1)}
        # Instruction Boundary on two generated datasets and the miscellany, four settings: a slice
        # per model, its judge calls shared (the judge is m1)
        ib = {"datasets": {"fld": {"form": "judging", "generator": "fld", "count": {"demo": 2, "paper": 600}},
                           "arithmetic": {"form": "single", "generator": "arithmetic", "count": {"demo": 2, "paper": 300}}},
              "settings": ["vanilla", "multi_turn", "conformity", "disturbing_miscellany"]}
        path = lake_config(tmp_path, models, scale="demo", ib=ib)
        base = yaml.safe_load(path.read_text())
        home = tmp_path / "dagster"
        home.mkdir()
        (home / "dagster.yaml").write_text((ROOT / "dagster.postgres.yaml").read_text())
        env = {**os.environ, "BENCHSMITH_CONFIG": str(path), "DAGSTER_HOME": str(home), ENV: lake_env,
               "BENCHSMITH_DAGSTER_PG_URL": pg.url(_dagster_db(pg))}
        # the instance's tables are made once, as `dagster instance migrate` does on a new database
        subprocess.run([sys.executable, "-c", "import dagster as dg; dg.DagsterInstance.get().upgrade()"],
                       cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
        select = ["--select", "ib"]
        procs = [subprocess.Popen([sys.executable, "-m", "assets.materialize_all", *select, "--model", m],
                                  cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for m in models]
        outs = [p.communicate(timeout=900)[0] for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, "\n\n".join(_failed_lines(o) + o[-2500:] for o in outs)
        one = {**base, "warehouse": {"path": str(tmp_path / "one.duckdb")}}
        one_path = write_config(tmp_path, one, "one.yaml")
        solo = subprocess.run([sys.executable, "-m", "assets.materialize_all", *select], cwd=ROOT,
                              env={**env, "BENCHSMITH_CONFIG": str(one_path), "DAGSTER_HOME": str(tmp_path)},
                              capture_output=True, text=True, timeout=900)
        assert solo.returncode == 0, solo.stdout[-3000:] + solo.stderr[-3000:]
    finally:
        for s in stubs:
            s.stop()
    lake = open_warehouse(load_config(path))
    assert isinstance(lake, LakeWarehouse)
    assert lake.rows("SELECT count(*) AS n, count(DISTINCT key) AS k FROM llm.calls")[0]["n"] == \
        lake.rows("SELECT count(DISTINCT key) AS k FROM llm.calls")[0]["k"]
    assert lake.scalar("SELECT count(DISTINCT model) FROM ib.responses") == 4
    assert _compare(lake, tmp_path / "one.duckdb") == []
    # the four runs' history is in the one instance
    import dagster as dg

    os.environ["BENCHSMITH_DAGSTER_PG_URL"] = env["BENCHSMITH_DAGSTER_PG_URL"]
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            runs = instance.get_run_records()
            assert {r.dagster_run.tags.get("benchsmith/models") for r in runs} >= set(models)
    finally:
        os.environ.pop("BENCHSMITH_DAGSTER_PG_URL", None)


def _failed_lines(out: str) -> str:
    """A run command's FAILED lines (each names its step and the error), which the output's tail
    cut off may no longer hold."""
    return "".join(line + "\n" for line in out.splitlines() if line.startswith("FAILED:"))


def _dagster_db(pg: PostgresServer) -> str:
    name = f"dagster{next(_counter)}"
    pg.database(name)
    return name


REWRITE = textwrap.dedent("""
    import sys
    from configuration import load_config
    from warehouse import open_warehouse
    wh = open_warehouse(load_config(sys.argv[1]))
    v = 0
    while True:
        v += 1
        rows = [{"dataset": "d", "source": "fld", "subset": "s", "split": "test", "source_id": str(i), "origin": f"v{v}",
                 "row_number": i, "context": "c" * 200, "question": "q", "extra": "{}"} for i in range(3000)]
        print("begin", v, flush=True)
        wh.replace_partition("sources.records", rows, {"dataset": "d"})
        print("done", v, flush=True)
""")


@pytest.mark.slow
def test_a_writer_killed_mid_commit_leaves_the_partition_whole_and_the_lock_free(lake_env, tmp_path):
    """SIGKILL while a partition is being replaced: it holds the old version or the new one, all
    3000 rows of one version, and the next writer gets the write lock at once."""
    path = lake_config(tmp_path, {"m": {"base_url": "http://127.0.0.1:9/v1", "model": "x"}},
                       warehouse={"path": str(tmp_path / "wh.duckdb"), "lock_timeout_s": 20,
                                  "lake": {"catalog": "postgres", "data_path": str(tmp_path / "lake")}})
    wh = open_warehouse(load_config(path))
    mid_write = 0
    for attempt in range(10):
        child = subprocess.Popen([sys.executable, "-u", "-c", REWRITE, str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        lines = [child.stdout.readline() for _ in range(3 + attempt % 3)]  # some versions written
        time.sleep(0.02 * attempt)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        lines += child.stdout.readlines()
        mid_write += lines[-1].startswith("begin")
        got = wh.rows("SELECT count(*) AS n, count(DISTINCT origin) AS versions FROM sources.records WHERE dataset = 'd'")
        assert got == [{"n": 3000, "versions": 1}], (lines[-2:], got)
        if mid_write >= 2:
            break
    assert mid_write >= 2, "the kills never landed inside a write"
    t0 = time.monotonic()
    wh.replace_partition("sources.records", [], {"dataset": "d"})
    assert time.monotonic() - t0 < 10  # the killed writers' lock went with their sessions


def test_the_readmes_lake_configuration_is_valid_and_its_dagster_storage_is_the_shipped_files(tmp_path):
    from tests.test_readme import TEXT

    section = TEXT[re.search(r"^#+ Beyond one machine", TEXT, re.M).start():]
    lake_yaml, storage_yaml = re.findall(r"```yaml\n(.*?)```", section, re.S)[:2]
    data = {**yaml.safe_load(lake_yaml), "models": {"m": {"base_url": "http://127.0.0.1:9/v1", "model": "x"}},
            "evaluate": ["m"], "judge": "m"}
    cfg = load_config(write_config(tmp_path, data))
    assert cfg.warehouse.lake.catalog == "postgres" and cfg.ledger.endpoint_slots == "postgres"
    assert cfg.warehouse.lake.catalog_env == ENV
    shipped = yaml.safe_load((ROOT / "dagster.postgres.yaml").read_text())
    assert yaml.safe_load(storage_yaml) == {"storage": shipped["storage"]}
    # the command that prints the extensions' files, as the README gives it
    command = re.sub(r"\s+", " ", re.search(r'`python -c "(from warehouse\.lake import.*?)"`', section, re.S).group(1))
    out = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    files = out.stdout.split()
    assert len(files) == 2 and all(Path(f).exists() and f.endswith(".duckdb_extension") for f in files)


@pytest.mark.slow
def test_on_the_lake_a_failure_is_recorded_replaced_by_the_next_success_and_never_overwrites_one(lake_env, tmp_path):
    with StubServer() as stub:
        cfg = load_config(lake_config(tmp_path, {"m": stub_model(stub)}))
        wh = open_warehouse(cfg)
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(wh, reg)
            prompt = [{"role": "user", "content": "[[stub: status=500 times=3]] q"}]  # run 1's 3 attempts fail
            first = ledger.complete("m", [CallRequest(prompt)])[0]
            assert not first.ok and first.text is None and "HTTP 500" in first.error
            row = wh.rows("SELECT status, response_text, attempts, total_attempts FROM llm.calls")
            assert row == [{"status": "failed", "response_text": None, "attempts": 3, "total_attempts": 3}]
            second = ledger.complete("m", [CallRequest(prompt)])[0]
            assert second.ok and not second.cached
            assert wh.rows("SELECT status, attempts, total_attempts FROM llm.calls") == [
                {"status": "ok", "attempts": 1, "total_attempts": 4}]
    # a late failure for the same key (another run's) leaves the success as it was
    from llm_calls.records import UPSERT

    stored = wh.rows("SELECT * FROM llm.calls")[0]
    wh.writer().upsert("llm.calls", [{**stored, "status": "failed", "response_text": None, "error": "late", "attempts": 2}],
                       UPSERT)
    after = wh.rows("SELECT status, response_text, error, total_attempts FROM llm.calls")
    assert after == [{"status": "ok", "response_text": stored["response_text"], "error": None, "total_attempts": 4}]


@pytest.mark.slow
def test_compact_writes_out_the_inlined_ledger_merges_small_files_and_keeps_every_row(lake_env, tmp_path, monkeypatch, capsys):
    from warehouse.lake import main as lake_command

    with StubServer() as stub:
        path = lake_config(tmp_path, {"m": stub_model(stub)})
        cfg = load_config(path)
        wh = open_warehouse(cfg)
        with ModelRegistry(cfg) as reg:
            for k in range(6):  # six batches: six commits at least, each inlined in the catalog
                Ledger(wh, reg).complete("m", [CallRequest([{"role": "user", "content": f"b{k} q{i}"}]) for i in range(5)])
    for k in range(6):  # six small writes of another table: a small file each
        wh.upsert("sources.records", [{"dataset": "d", "source": "fld", "subset": "s", "split": "test",
                                       "source_id": str(k), "origin": "o", "row_number": k, "context": "c",
                                       "question": "q", "extra": "{}"}])
    assert not list((tmp_path / "lake").glob("llm/calls/*.parquet"))  # the ledger's rows are in the catalog
    rows = wh.rows("SELECT * FROM llm.calls ORDER BY key")
    before = wh.files()
    assert before >= 6
    # the command line as the README gives it (run as __main__, not imported)
    out = subprocess.run([sys.executable, "-m", "warehouse.lake", "compact", "--keep-days", "0"], cwd=ROOT,
                         env={**os.environ, "BENCHSMITH_CONFIG": str(path)}, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert wh.files() < before
    assert list((tmp_path / "lake").glob("llm/calls/*.parquet"))  # the inlined rows written out
    assert f"{before} data files before" in out.stdout
    monkeypatch.setenv("BENCHSMITH_CONFIG", str(write_config(tmp_path, {"models": {"m": stub_model(stub)},
                                                                       "evaluate": ["m"], "judge": "m"}, "file.yaml")))
    assert lake_command(["compact"]) == 2  # a configuration without a lake: said, nothing done
    assert "warehouse.lake is not set" in capsys.readouterr().err
    assert wh.rows("SELECT * FROM llm.calls ORDER BY key") == rows
    parquet = {p.name for p in (tmp_path / "lake").rglob("*.parquet")}
    assert len(parquet) == wh.files()  # the merged-away files are deleted from the data path too


# -- a network fault on the catalog (issue 52) -----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("forward", [False, True], ids=["commit-never-arrives", "commit-answer-lost"])
def test_a_catalog_connection_cut_mid_commit_loses_nothing_committed_and_the_rerun_asks_only_the_rest(
        lake_env, pg, tmp_path, monkeypatch, forward):
    """The writer reaches the catalog through a loopback proxy that cuts every connection on the
    first COMMIT after a third of the calls were sent, before the server sees it or after the server committed with the answer lost, and
    refuses connections until the test restores it. The writer fails, saying so; afterwards every
    row in the lake is whole and unique, and the rerun (through the restored proxy) asks exactly the
    requests that were not committed."""
    from tests.tcp_proxy import TcpProxy

    n = 120
    proxy = TcpProxy(pg.port).start()
    try:
        through_proxy = lake_env.replace(f"port={pg.port}", f"port={proxy.port}")
        assert through_proxy != lake_env
        with StubServer(delay_s=0.01) as stub:
            path = lake_config(tmp_path, {"m": stub_model(stub, 4)})
            env = {**os.environ, ENV: through_proxy}
            subprocess.run([sys.executable, "-c", KILLED, str(path), "0"], cwd=ROOT, env=env, check=True, timeout=120)
            child = subprocess.Popen([sys.executable, "-c", KILLED, str(path), str(n)], cwd=ROOT, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 120
            while len(stub.requests) < n // 3 and time.monotonic() < deadline:
                time.sleep(0.005)
            proxy.cut_at(b"COMMIT", 1, forward=forward)  # the next commit, mid-run
            _, stderr = child.communicate(timeout=300)
            assert proxy.cut_done.is_set(), "the proxy never cut a commit"
            assert child.returncode != 0, stderr[-2000:]
            asked = set(stub.contents())
            err = stderr.strip().splitlines()
            print("writer:", [e for e in err if "Error" in e][-1:], "committed before the cut:", end=" ")
            # read what the catalog holds, directly (not through the proxy, which is still down)
            wh = open_warehouse(load_config(path))
            rows = wh.rows("SELECT request, status, response_text FROM llm.calls")
            committed = {json.loads(r["request"])["messages"][0]["content"] for r in rows}
            assert len(committed) == len(rows), "a key stored twice"
            assert all(r["status"] == "ok" and r["response_text"] for r in rows), "a half-written row is visible"
            assert committed <= asked and 0 < len(committed) < n
            print(len(committed), "of", n)
            proxy.up()
            stub.requests.clear()
            rerun = subprocess.run([sys.executable, "-c", KILLED, str(path), str(n)], cwd=ROOT, env=env,
                                   capture_output=True, text=True, timeout=300)
            assert rerun.returncode == 0, rerun.stderr[-2000:]
            again = stub.contents()
        assert not committed & set(again), "a committed call was asked again"
        assert len(again) == len(set(again)) == n - len(committed)
        assert wh.rows("SELECT count(*) AS n, count(DISTINCT key) AS keys, count(*) FILTER (status = 'ok') AS ok "
                       "FROM llm.calls") == [{"n": n, "keys": n, "ok": n}]
    finally:
        proxy.stop()
