"""The README stays true: its SQL runs against the warehouse schema, its commands exist."""

import re
from pathlib import Path

import pytest

from warehouse import Warehouse

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def readme_queries() -> list[str]:
    out = []
    for block in re.findall(r"```sql\n(.*?)```", README, re.S):
        for q in block.split(";"):
            q = "\n".join(line for line in q.splitlines() if not line.strip().startswith("--")).strip()
            if q:
                out.append(q)
    return out


@pytest.mark.parametrize("query", readme_queries())
def test_readme_sql_runs_against_the_schema(query, tmp_path):
    Warehouse(tmp_path / "wh.duckdb").rows(query)


def test_readme_names_the_commands_ci_and_the_makefile_run():
    assert "make demo" in README and "make test" in README
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "make test" in ci
