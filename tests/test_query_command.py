"""`python -m warehouse.query`: formats, NULLs, no silent cut, clear errors, no empty file."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from warehouse import Warehouse
from warehouse.query import render

ROOT = Path(__file__).resolve().parent.parent


def query(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "warehouse.query", *args], cwd=ROOT, capture_output=True, text=True)


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "wh.duckdb"
    Warehouse(path).replace_partition("s1.metrics", [
        {"model": "m", "level": "all", "scope": "all", "metric": "pass@1", "category": "-", "value": None, "n": 0,
         "n_failed": 3},
        {"model": "m", "level": "all", "scope": "all", "metric": "x" * 90, "category": "-", "value": 0.5, "n": 2,
         "n_failed": 0}])
    return path


@pytest.mark.slow
def test_table_shows_null_and_never_cuts_by_default(db):
    out = query("SELECT metric, value FROM s1.metrics ORDER BY n", "--db", str(db))
    assert out.returncode == 0 and "NULL" in out.stdout and "x" * 90 in out.stdout


def test_max_width_cuts_on_request():
    text = render(["a"], [["y" * 30]], "table", max_width=10)
    assert "y" * 9 + "…" in text and "y" * 10 not in text


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "markdown", "json"])
def test_other_formats(db, fmt):
    out = query("SELECT metric, value FROM s1.metrics ORDER BY n", "--db", str(db), "--format", fmt)
    assert out.returncode == 0
    if fmt == "json":
        assert json.loads(out.stdout)[0] == {"metric": "pass@1", "value": None}
    elif fmt == "csv":
        assert out.stdout.splitlines()[:2] == ["metric,value", "pass@1,"]
    else:
        assert out.stdout.splitlines()[:3] == ["| metric | value |", "| --- | --- |", "| pass@1 | NULL |"]


def test_a_sql_error_is_one_clear_line(db):
    out = query("SELECT nope FROM s1.metrics", "--db", str(db))
    assert out.returncode == 1 and out.stderr.count("\n") == 1 and "nope" in out.stderr


def test_no_warehouse_yet_is_said_and_no_empty_file_is_made(tmp_path):
    missing = tmp_path / "none.duckdb"
    out = query("SELECT 1", "--db", str(missing))
    assert out.returncode == 2 and "no warehouse" in out.stderr and not missing.exists()


def test_a_reader_that_stops_early_ends_no_traceback(tmp_path):
    """`python -m warehouse.query ... | head -1`: the pipe closes after one line; no BrokenPipeError."""
    path = tmp_path / "wh.duckdb"
    Warehouse(path).upsert("sources.records", [
        {"dataset": "d", "source": "fld", "subset": "s", "split": "test", "source_id": str(i), "origin": "o",
         "row_number": i, "context": "c" * 200, "question": "q", "extra": "{}"} for i in range(3000)])
    got = subprocess.run(f"{sys.executable} -m warehouse.query --db {path} 'SELECT * FROM sources.records' | head -1",
                         shell=True, cwd=ROOT, capture_output=True, text=True)
    assert got.stdout.startswith("dataset") and "Traceback" not in got.stderr and "BrokenPipe" not in got.stderr
