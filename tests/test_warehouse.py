"""Warehouse: partition replacement is atomic, and processes queue for the file instead of failing."""

import multiprocessing as mp
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import pytest

from warehouse import Warehouse, WarehouseLockTimeout
from warehouse.rows import RowError


@pytest.fixture
def wh(tmp_path):
    w = Warehouse(tmp_path / "wh.duckdb", lock_timeout_s=20)
    with w.connect() as con:
        con.execute("CREATE TABLE IF NOT EXISTS muso.t (part VARCHAR, i INTEGER NOT NULL, v VARCHAR)")
    return w


def test_every_schema_exists_after_first_connection(wh):
    names = {r["schema_name"] for r in wh.rows("SELECT schema_name FROM information_schema.schemata")}
    assert {"llm", "sources", "muso", "waken", "s1", "ib"} <= names


def test_replace_partition_replaces_only_that_partition(wh):
    wh.replace_partition("muso.t", [{"part": "a", "i": 1, "v": "x"}, {"part": "a", "i": 2, "v": "y"}], {"part": "a"})
    wh.replace_partition("muso.t", [{"part": "b", "i": 1, "v": "z"}], {"part": "b"})
    wh.replace_partition("muso.t", [{"part": "a", "i": 3, "v": "w"}], {"part": "a"})
    assert wh.rows("SELECT part, i FROM muso.t ORDER BY part, i") == [{"part": "a", "i": 3}, {"part": "b", "i": 1}]


def test_rematerialising_the_same_rows_does_not_duplicate(wh):
    rows = [{"part": "a", "i": 1, "v": "x"}]
    wh.replace_partition("muso.t", rows, {"part": "a"})
    wh.replace_partition("muso.t", rows, {"part": "a"})
    assert wh.scalar("SELECT count(*) FROM muso.t") == 1


def test_failed_write_leaves_the_previous_rows(wh):
    wh.replace_partition("muso.t", [{"part": "a", "i": 1, "v": "old"}], {"part": "a"})
    bad = [{"part": "a", "i": 2, "v": "new"}, {"part": "a", "i": None, "v": "violates NOT NULL"}]
    with pytest.raises(duckdb.ConstraintException):
        wh.replace_partition("muso.t", bad, {"part": "a"})
    assert wh.rows("SELECT i, v FROM muso.t") == [{"i": 1, "v": "old"}]


def test_row_outside_the_partition_is_refused_before_anything_is_written(wh):
    wh.replace_partition("muso.t", [{"part": "a", "i": 1, "v": "old"}], {"part": "a"})
    with pytest.raises(ValueError, match="part='b' does not belong to partition part='a'"):
        wh.replace_partition("muso.t", [{"part": "b", "i": 9, "v": "x"}], {"part": "a"})
    assert wh.scalar("SELECT count(*) FROM muso.t") == 1


def test_nested_connections_in_one_thread_reuse_the_connection(wh):
    with wh.connect() as outer:
        with wh.connect() as inner:
            assert inner is outer


def _writer(path: str, part: str, n: int) -> None:
    w = Warehouse(path, lock_timeout_s=60)
    for i in range(n):
        w.replace_partition("muso.t", [{"part": part, "i": j, "v": str(i)} for j in range(50)], {"part": part})


@pytest.mark.slow
def test_concurrent_processes_queue_for_the_file_instead_of_failing(wh):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(wh.path), f"p{k}", 15)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert wh.rows("SELECT part, count(*) AS n FROM muso.t GROUP BY part ORDER BY part") == [
        {"part": f"p{k}", "n": 50} for k in range(4)
    ]


@pytest.mark.slow
def test_a_foreign_process_holding_the_file_makes_writers_wait_then_time_out(tmp_path):
    path = tmp_path / "held.duckdb"
    Warehouse(path).scalar("SELECT 1")  # create it
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, sys, time
            con = duckdb.connect({str(path)!r})
            print("held", flush=True)
            time.sleep(30)
        """)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(WarehouseLockTimeout, match=r"held.duckdb: locked by a process outside Benchsmith"):
            Warehouse(path, lock_timeout_s=1.5).scalar("SELECT 1")
    finally:
        holder.kill()
        holder.wait()
    assert Warehouse(path, lock_timeout_s=5).scalar("SELECT 42") == 42


def test_an_older_file_gets_new_columns_and_relaxed_constraints_without_a_version_bump(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA llm")
    con.execute("CREATE TABLE llm.schema_version (version INTEGER)")  # an older file: numbered versions
    con.execute("INSERT INTO llm.schema_version VALUES (6)")
    con.execute("CREATE SCHEMA ib")
    con.execute("CREATE TABLE ib.metrics (model VARCHAR NOT NULL, setting VARCHAR NOT NULL, form VARCHAR NOT NULL, "
                "metric VARCHAR NOT NULL, category VARCHAR NOT NULL, value DOUBLE, numerator DOUBLE, denominator DOUBLE)")
    con.execute("INSERT INTO ib.metrics VALUES ('m', 'vanilla', 'single', 'Acc', '-', 0.5, 1, 2)")
    con.execute("CREATE TABLE ib.responses (dataset VARCHAR NOT NULL, correct BOOLEAN NOT NULL)")
    con.execute("CREATE TABLE llm.calls (key VARCHAR PRIMARY KEY, model VARCHAR NOT NULL)")  # keyed, with a row
    con.execute("INSERT INTO llm.calls VALUES ('k', 'm')")
    con.close()
    wh = Warehouse(path)
    assert wh.rows("SELECT value, n_failed FROM ib.metrics") == [{"value": 0.5, "n_failed": None}]  # rows kept
    with wh.connect() as c:
        c.execute("INSERT INTO ib.responses (dataset, correct) VALUES ('d', NULL)")  # NULL allowed now
        nullable = c.execute("SELECT is_nullable FROM information_schema.columns WHERE table_schema = 'ib' "
                             "AND table_name = 'responses' AND column_name = 'correct'").fetchone()[0]
    assert nullable == "YES"
    assert wh.rows("SELECT key, reasoning_text, reasoning_tokens FROM llm.calls") == [
        {"key": "k", "reasoning_text": None, "reasoning_tokens": None}]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["s1.duckdb", "llm.duckdb", "it's here.duckdb"])
def test_any_file_name_works_even_one_named_like_a_schema(tmp_path, name):
    wh = Warehouse(tmp_path / name)
    wh.replace_partition("s1.metrics", [{"model": "m", "level": "all", "scope": "all", "metric": "pass@1",
                                         "category": "-", "value": 1.0, "n": 1, "n_failed": 0}])
    assert wh.rows("SELECT value FROM s1.metrics") == [{"value": 1.0}]
    assert Warehouse(tmp_path / name).rows("SELECT count(*) AS n FROM s1.table3") == [{"n": 1}]


def test_staged_rows_are_swapped_in_with_the_rest_or_not_at_all(wh):
    wh.replace_partition("muso.t", [{"part": "old", "i": 1, "v": "kept"}])
    wh.begin_staging("muso.t")
    wh.append_staging("muso.t", [{"part": "new", "i": 2, "v": "a"}])
    wh.append_staging("muso.t", [{"part": "new", "i": 3, "v": "b"}])
    with pytest.raises(RowError, match="s1.metrics: row 0"):  # another table in the same swap is refused: nothing changes
        wh.replace_partitions({"s1.metrics": [{"model": None}]}, staged=["muso.t"])
    assert wh.rows("SELECT v FROM muso.t") == [{"v": "kept"}]
    counts = wh.replace_partitions({}, staged=["muso.t"])
    assert counts == {"muso.t": 2} and wh.rows("SELECT v FROM muso.t ORDER BY i") == [{"v": "a"}, {"v": "b"}]
    assert wh.scalar("SELECT count(*) FROM information_schema.tables WHERE table_name = 't__staging'") == 0


def test_the_file_is_free_for_other_processes_as_soon_as_a_unit_of_work_ends(wh):
    """The process keeps a DuckDB instance per file but detaches the file after each use: a plain
    duckdb client in another process (which takes no sidecar lock) can open it right away."""
    wh.replace_partition("muso.t", [{"part": "a", "i": 1, "v": "x"}], {"part": "a"})
    writer = wh.writer()
    writer.upsert("muso.t", [{"part": "b", "i": 2, "v": "y"}])
    writer.close()
    other = subprocess.run(
        [sys.executable, "-c", f"import duckdb; print(duckdb.connect({str(wh.path)!r}).execute("
                               "'SELECT count(*) FROM muso.t').fetchall()[0][0])"],
        capture_output=True, text=True, timeout=60)
    assert other.returncode == 0, other.stderr
    assert other.stdout.strip() == "2"


def test_a_writer_keeps_the_file_while_nobody_waits_and_yields_it_when_another_process_does(wh):
    """Past its hold time a writer re-attaches only when another process queues for the file: a
    lone run keeps one connection for the whole step; a reader in another process gets in after
    the writer's next commit, not at the end of the step."""
    writer = wh.writer(max_hold_s=0.0)
    writer.upsert("muso.t", [{"part": "a", "i": 0, "v": "x"}])
    con = writer._con
    for i in range(1, 4):
        writer.upsert("muso.t", [{"part": "a", "i": i, "v": "x"}])
    assert writer._con is con  # the same attachment throughout: nobody asked for the file
    reader = subprocess.Popen(
        [sys.executable, "-c", f"from warehouse import Warehouse; print(Warehouse({str(wh.path)!r})"
                               ".scalar('SELECT count(*) FROM muso.t'), flush=True)"],
        cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not wh.someone_waits() and time.monotonic() < deadline:  # the reader queues for the file
            time.sleep(0.02)
        assert wh.someone_waits()
        writer.upsert("muso.t", [{"part": "a", "i": 4, "v": "x"}])
        assert writer._con is None  # it yielded after that commit
        assert reader.stdout.readline().strip() == "5"
    finally:
        reader.kill()
        reader.wait()
        writer.close()


@pytest.mark.slow
def test_a_thread_waiting_for_the_file_another_thread_holds_takes_it_when_that_one_lets_go(wh, monkeypatch):
    """The poll interval made 20 s: a thread whose `connect` finds the file held by another thread
    of this process gets it as soon as that one lets go, not at its next poll; and likewise after
    a writer of this process closes."""
    import threading

    from warehouse import connection

    monkeypatch.setattr(connection, "_POLL_FIRST_S", 20.0)
    monkeypatch.setattr(connection, "_POLL_CAP_S", 20.0)
    for hold in ("connect", "writer"):
        held, got = threading.Event(), []

        def waiter(held=held, got=got):
            held.wait()
            with wh.connect() as con:
                got.append((time.monotonic(), con.execute("SELECT count(*) FROM muso.t").fetchone()[0]))

        thread = threading.Thread(target=waiter)
        thread.start()
        if hold == "connect":
            with wh.connect() as con:
                con.execute("INSERT INTO muso.t VALUES ('a', 1, 'x')")
                held.set()
                time.sleep(0.5)  # the waiter finds the file held and waits
            let_go = time.monotonic()
        else:
            writer = wh.writer()
            writer.upsert("muso.t", [{"part": "a", "i": 2, "v": "x"}])
            held.set()
            time.sleep(0.5)
            writer.close()
            let_go = time.monotonic()
        thread.join(timeout=15)
        assert not thread.is_alive(), f"{hold}: the waiter was still polling"
        assert got and got[0][0] - let_go < 5
    assert got[0][1] == 2


def test_threads_reading_one_file_at_once_and_two_files_at_once_each_see_their_own_rows(tmp_path):
    import threading

    a, b = Warehouse(tmp_path / "a.duckdb"), Warehouse(tmp_path / "b.duckdb")
    for w, v in ((a, "from a"), (b, "from b")):
        w.upsert("llm.schema_version", [{"version": v}])
    barrier, seen, errors = threading.Barrier(4), [], []

    def read(w: Warehouse) -> None:
        try:
            with w.connect(read_only=True) as con:
                barrier.wait(timeout=30)  # all four connections are open at once
                seen.append((w.path.name, sorted(r[0] for r in con.execute("SELECT version FROM llm.schema_version").fetchall())))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=read, args=(w,)) for w in (a, a, b, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(name for name, _ in seen) == ["a.duckdb", "a.duckdb", "b.duckdb", "b.duckdb"]
    assert all(("from a" if name == "a.duckdb" else "from b") in versions for name, versions in seen)
    assert all(("from b" if name == "a.duckdb" else "from a") not in versions for name, versions in seen)


@pytest.mark.slow
def test_each_table_s_declared_columns_are_the_columns_duckdb_created(wh):
    """`warehouse.rows.columns` reads the DDL: names, types and NOT NULL as the file has them."""
    from warehouse.rows import columns
    from warehouse.schema import TABLES

    wh.rows("SELECT 1")  # creates the schema
    for table in TABLES:
        schema, name = table.split(".")
        got = wh.rows("SELECT column_name, data_type, is_nullable FROM information_schema.columns "
                      "WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position", [schema, name])
        declared = [(c.name, c.type, c.not_null) for c in columns(table)]
        assert declared == [(r["column_name"], r["data_type"], r["is_nullable"] == "NO") for r in got], table


@pytest.mark.parametrize("row, message", [
    ({"model": "m", "setting": "s", "form": "f", "metric": "Acc", "category": "-", "colour": "red"},
     "ib.metrics: row 1: field 'colour' is not a column of the table"),
    ({"model": "m", "setting": "s", "form": "f", "metric": "Acc"},
     "ib.metrics: row 1: field 'category' is required (NOT NULL) and missing"),
    ({"model": "m", "setting": "s", "form": "f", "metric": "Acc", "category": "-", "n_failed": "3"},
     "ib.metrics: row 1: field 'n_failed' expects INTEGER, got str '3'"),
    ({"model": "m", "setting": "s", "form": "f", "metric": "Acc", "category": "-", "value": True},
     "ib.metrics: row 1: field 'value' expects DOUBLE, got bool 'True'"),
    ({"model": "m", "setting": "s", "form": "f", "metric": "Acc", "category": "-", "n_failed": 2**31},
     "ib.metrics: row 1: field 'n_failed' expects INTEGER, got int '2147483648'"),
    ({"model": "m", "setting": "s", "form": "f", "metric": "Acc", "category": "-", "n_failed": False},
     "ib.metrics: row 1: field 'n_failed' expects INTEGER, got bool 'False'"),
    ({"model": "m", "setting": "s", "form": "f", "metric": "Acc", "category": "-", "n_failed": 1.0},
     "ib.metrics: row 1: field 'n_failed' expects INTEGER, got float '1.0'"),
])
@pytest.mark.slow
def test_a_row_that_does_not_fit_its_table_is_refused_by_name_and_nothing_is_written(wh, row, message):
    good = {"model": "m", "setting": "vanilla", "form": "judging", "metric": "Acc", "category": "-", "value": 0.5}
    wh.replace_partition("ib.metrics", [good])
    with pytest.raises(RowError, match=re.escape(message)):
        wh.replace_partition("ib.metrics", [good, row])
    assert wh.rows("SELECT model, setting, value FROM ib.metrics") == [{"model": "m", "setting": "vanilla", "value": 0.5}]


def test_rows_are_checked_a_column_at_a_time_with_the_verdicts_of_the_row_by_row_check():
    """`frame` tests whole columns at once (exact types, the INTEGER range, NOT NULL) and leaves what
    that test cannot accept to `check_rows`: a str subclass is still a string; in a VARCHAR[]
    column a tuple of strings is accepted and a list holding a non-string is refused by row."""
    import datetime as dt

    from warehouse.rows import frame

    class Name(str):
        pass

    f = frame("ib.metrics", [{"model": Name("m"), "setting": "s", "form": "f", "metric": "Acc", "category": "-",
                              "value": 1, "n_failed": -2**31}])
    assert f["model"].to_list() == ["m"] and f["n_failed"].to_list() == [-2**31]
    probe = {"name": "m", "kind": "remote", "reachable": True, "checked_at": dt.datetime(2026, 1, 1)}
    assert frame("llm.models", [{**probe, "served_ids": ("a", "b")}])["served_ids"].to_list() == [["a", "b"]]
    with pytest.raises(RowError, match=re.escape("llm.models: row 1: field 'served_ids' expects VARCHAR[]")):
        frame("llm.models", [{**probe, "served_ids": ["a"]}, {**probe, "served_ids": ["a", 3]}])


def test_rows_are_written_with_the_declared_types_whatever_python_made_them():
    from warehouse.rows import frame

    f = frame("ib.metrics", [{"model": "m", "setting": "s", "form": "f", "metric": "Acc", "category": "-",
                              "value": 1, "n_failed": 0}])
    assert str(f.schema["value"]) == "Float64" and str(f.schema["n_failed"]) == "Int32"


def test_a_file_written_by_a_newer_duckdb_is_refused_naming_the_file_and_what_to_do(tmp_path, monkeypatch):
    """DuckDB 1.4 cannot read a file DuckDB 2.x wrote; the message (DuckDB's own, as 1.4.4 words it
    for a file of 2.0.1) becomes one that names the file and the way out."""
    from warehouse import connection

    def newer(path, read_only):
        raise duckdb.IOException("IO Error: Trying to read a database file with version number 999, but we can only "
                                 "read versions between 64 and 67.\nThe database file was created with an newer "
                                 "version of DuckDB.")

    monkeypatch.setattr(connection, "_attach", newer)
    path = tmp_path / "new.duckdb"
    path.write_bytes(b"")
    t0 = time.monotonic()
    with pytest.raises(connection.WarehouseVersionError) as err:
        Warehouse(path, lock_timeout_s=30).rows("SELECT 1")
    assert str(path) in str(err.value) and "EXPORT DATABASE" in str(err.value) and "Move it aside" in str(err.value)
    assert time.monotonic() - t0 < 5  # refused at once, not retried as a lock


def test_the_run_command_and_the_query_command_refuse_a_newer_file_once_with_the_message(tmp_path, monkeypatch, capsys):
    from assets.materialize_all import main as materialize_all
    from warehouse import connection
    from warehouse.query import main as query

    def newer(path, read_only):
        raise duckdb.IOException("IO Error: Trying to read a database file with version number 999, but we can only "
                                 "read versions between 64 and 67.\nThe database file was created with an newer "
                                 "version of DuckDB.")

    monkeypatch.setattr(connection, "_attach", newer)
    (tmp_path / "wh.duckdb").write_bytes(b"")
    cfg = tmp_path / "benchsmith.yaml"
    cfg.write_text(f"warehouse: {{path: {tmp_path / 'wh.duckdb'}}}\nmodels: {{m: {{base_url: 'http://127.0.0.1:9/v1', "
                   "model: x}}\nevaluate: [m]\njudge: m\n")
    monkeypatch.setenv("BENCHSMITH_CONFIG", str(cfg))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    assert materialize_all(["--select", "ib"]) == 2
    err = capsys.readouterr().err
    assert err.count("written by a newer DuckDB") == 1 and str(tmp_path / "wh.duckdb") in err
    assert query(["SELECT 1"]) == 2
    assert "written by a newer DuckDB" in capsys.readouterr().err


def test_a_corrupt_file_is_an_error_at_once_not_a_lock_to_wait_for(tmp_path):
    path = tmp_path / "bad.duckdb"
    duckdb.connect(str(path)).close()
    data = bytearray(path.read_bytes())
    data[20:28] = b"\xff" * 8  # breaks the header's checksum ("... in block at location 0")
    path.write_bytes(bytes(data))
    t0 = time.monotonic()
    with pytest.raises(duckdb.IOException, match="block"):
        Warehouse(path, lock_timeout_s=30).rows("SELECT 1")
    assert time.monotonic() - t0 < 5


def _call_row(key: str, **changes) -> dict:
    from datetime import datetime

    row = {"key": key, "model": "m", "model_identity": "m@h", "served_model": None, "endpoint_host": "h:1",
           "purpose": "p", "request": '{"messages": []}', "sample_index": 0, "status": "ok", "response_text": "hi",
           "finish_reason": "stop", "prompt_tokens": 3, "completion_tokens": None, "latency_s": 1,
           "attempts": 1, "total_attempts": 1, "error": None, "run_id": "r",
           "created_at": datetime(2026, 1, 2, 3, 4, 5, 678901), "finished_at": datetime(2026, 1, 2, 3, 4, 6)}
    return {**row, **changes}


def test_a_writers_rows_are_typed_by_the_tables_columns_and_a_misfit_is_named_before_anything_is_written(wh):
    """The writer converts a commit's rows by the declared column types (not by inference): an int
    latency is stored as a DOUBLE, a column all NULL in the batch is still its type, a datetime keeps
    its microseconds; a value that is not its column's type is refused naming the row and field,
    and the batch it came in is not written."""
    writer = wh.writer()
    try:
        writer.upsert("llm.calls", [_call_row("a"), _call_row("b", served_model="s", latency_s=0.5)])
        with pytest.raises(RowError, match=r"llm.calls: row 1: field 'prompt_tokens' expects INTEGER"):
            writer.upsert("llm.calls", [_call_row("c"), _call_row("d", prompt_tokens="12")])
        with pytest.raises(RowError, match=r"row 0: field 'attempts' expects INTEGER, got int"):
            writer.upsert("llm.calls", [_call_row("e", attempts=2**40)])
        # rows whose fields differ are converted as they are (a missing column takes its default)
        writer.upsert("llm.calls", [_call_row("f"), {k: v for k, v in _call_row("g").items() if k != "error"}])
    finally:
        writer.close()
    stored = wh.rows("SELECT key, served_model, latency_s, completion_tokens, created_at, "
                     "typeof(latency_s) AS t FROM llm.calls ORDER BY key")
    assert [(r["key"], r["served_model"], r["latency_s"], r["completion_tokens"], r["t"]) for r in stored] == [
        ("a", None, 1.0, None, "DOUBLE"), ("b", "s", 0.5, None, "DOUBLE"), ("f", None, 1.0, None, "DOUBLE"),
        ("g", None, 1.0, None, "DOUBLE")]
    assert stored[0]["created_at"].microsecond == 678901


@pytest.mark.slow
def test_two_writers_of_one_process_write_at_once_without_taking_turns(tmp_path):
    """The steps `materialize_all` runs at once write from threads of one process: a second writer
    commits while the first still holds the file (it no longer waits for it to yield), and rows with
    one key written by both at once end as one row, the conflict clause applied."""
    import threading

    from warehouse import OnConflict

    wh = Warehouse(tmp_path / "wh.duckdb", lock_timeout_s=3)
    with wh.connect() as con:
        con.execute("CREATE TABLE muso.k (key VARCHAR PRIMARY KEY, n INTEGER)")
        con.execute("CREATE TABLE muso.t (part VARCHAR, i INTEGER NOT NULL, v VARCHAR)")
    first, second = wh.writer(), wh.writer()
    first.upsert("muso.t", [{"part": "a", "i": 0, "v": "x"}])
    held = first._con
    second.upsert("muso.t", [{"part": "b", "i": 0, "v": "y"}])  # timed out after 3 s when it waited
    assert first._con is held  # the first kept its attachment: nobody outside waited
    add = OnConflict(("key",), {"n": "stored.n + incoming.n"})
    rounds, errors = 40, []
    first.upsert("muso.k", [{"key": f"u{r}", "n": 0} for r in range(rounds)])  # rows both will update
    barrier = threading.Barrier(2)

    def write(writer):
        try:
            for r in range(rounds):
                barrier.wait(timeout=10)
                writer.upsert("muso.k", [{"key": f"k{r}", "n": 1}], add, insert_first=True)
                writer.upsert("muso.k", [{"key": f"u{r}", "n": 1}], add)  # one row updated by both at once
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in (first, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    first.close()
    second.close()
    assert not errors, errors
    assert wh.rows("SELECT count(*) AS keys, sum(n) AS n FROM muso.k WHERE key LIKE 'k%'") == [
        {"keys": rounds, "n": 2 * rounds}]
    assert wh.rows("SELECT count(*) AS keys, sum(n) AS n FROM muso.k WHERE key LIKE 'u%'") == [
        {"keys": rounds, "n": 2 * rounds}]  # both updates of each row counted: none lost, none failed


def test_a_reader_of_the_same_process_gets_in_while_two_writers_keep_writing(wh):
    """Writers that share the file yield it together when someone waits: once one has let go for a
    waiter, no writer of the process joins until the last has, so the reader is not starved."""
    import threading

    stop, errors = threading.Event(), []

    def keep_writing(part):
        writer = wh.writer(max_hold_s=0.2)
        try:
            i = 0
            while not stop.is_set():
                writer.upsert("muso.t", [{"part": part, "i": i, "v": "x"}])
                i += 1
                time.sleep(0.01)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)
        finally:
            writer.close()

    writers = [threading.Thread(target=keep_writing, args=(p,)) for p in ("a", "b")]
    for t in writers:
        t.start()
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        seen = Warehouse(wh.path, lock_timeout_s=10).scalar("SELECT count(*) FROM muso.t")
        waited = time.monotonic() - t0
    finally:
        stop.set()
        for t in writers:
            t.join(timeout=30)
    assert not errors, errors
    assert seen > 0 and waited < 5, waited


def test_duckdb_threads_holds_this_process_s_duckdb_to_n_threads_while_its_block_runs(tmp_path):
    """While a worker process generates MuSoBench levels, the steps' DuckDB leaves it a core
    (`runner.command.built_ahead`); afterwards DuckDB has its default again."""
    from warehouse.connection import duckdb_threads

    wh = Warehouse(tmp_path / "wh.duckdb")
    default = wh.scalar("SELECT current_setting('threads')")
    assert default != 7  # (DuckDB's default is one thread per core)
    with duckdb_threads(7):
        assert wh.scalar("SELECT current_setting('threads')") == 7
        with duckdb_threads(None):
            assert wh.scalar("SELECT current_setting('threads')") == default
        assert wh.scalar("SELECT current_setting('threads')") == 7
    assert wh.scalar("SELECT current_setting('threads')") == default
