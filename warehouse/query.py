"""Run SQL against the warehouse from a shell: `python -m warehouse.query "SELECT ..."`.

Opens the file read-only and waits politely for a running materialisation to
finish its current write. The warehouse path comes from the configuration
(`warehouse.path`, or the DuckLake of `warehouse.lake`), or `--db FILE`. Output as an aligned table (default), CSV,
Markdown or JSON; NULL is printed as NULL; values are never cut unless
`--max-width` asks for it. A SQL error is one line on stderr (exit 1); a
warehouse that does not exist yet is said so (exit 2) and no empty file is made.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb

from configuration import load_config
from warehouse import open_warehouse
from warehouse.connection import Warehouse, WarehouseVersionError
from warehouse.lake import LakeError

FORMATS = ("table", "csv", "markdown", "json")


def _text(value: Any, null: str = "NULL") -> str:
    return null if value is None else str(value)


def _cut(text: str, width: int) -> str:
    return text if width <= 0 or len(text) <= width else text[: max(1, width - 1)] + "…"


def render(names: Sequence[str], rows: Sequence[Sequence[Any]], fmt: str = "table", max_width: int = 0) -> str:
    """The result in one of FORMATS."""
    if fmt == "json":
        def plain(v: Any) -> Any:
            if isinstance(v, (datetime, date)):
                return v.isoformat()
            if isinstance(v, Decimal):
                return float(v)
            return v
        return json.dumps([{n: plain(v) for n, v in zip(names, r)} for r in rows], ensure_ascii=False, default=str)
    if fmt == "csv":
        from io import StringIO

        buf = StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(names)
        w.writerows([[_text(v, "") for v in r] for r in rows])
        return buf.getvalue().rstrip("\n")
    cells = [[_cut(_text(v), max_width).replace("\n", " ") for v in r] for r in rows]
    if fmt == "markdown":
        esc = [[c.replace("|", "\\|") for c in r] for r in cells]
        lines = ["| " + " | ".join(names) + " |", "| " + " | ".join("---" for _ in names) + " |"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in esc])
    widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
    lines = ["  ".join(n.ljust(w) for n, w in zip(names, widths)), "  ".join("-" * w for w in widths)]
    return "\n".join(lines + ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m warehouse.query", description=__doc__.splitlines()[0])
    parser.add_argument("sql", help="a SQL query, e.g. \"SELECT * FROM llm.call_summary\"")
    parser.add_argument("--db", help="DuckDB file (default: the configured warehouse: warehouse.path, or warehouse.lake)")
    parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    parser.add_argument("--max-width", type=int, default=0, help="cut longer values to this width (0: never)")
    args = parser.parse_args(argv)
    try:
        wh = Warehouse(Path(args.db)) if args.db else open_warehouse(load_config())
        present = wh.exists()
    except LakeError as exc:
        print(f"warehouse.query: {exc}", file=sys.stderr)
        return 2
    if not present:
        print(f"warehouse.query: no warehouse at {wh.where} yet; materialise an asset first (make demo)", file=sys.stderr)
        return 2
    try:
        with wh.connect(read_only=True) as con:
            cur = con.execute(args.sql)
            names = [d[0] for d in cur.description] if cur.description else []
            rows = cur.fetchall() if names else []
    except WarehouseVersionError as exc:
        print(f"warehouse.query: {exc}", file=sys.stderr)
        return 2
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"warehouse.query: {first}", file=sys.stderr)
        return 1
    try:
        print(render(names, rows, args.format, args.max_width))
        sys.stdout.flush()
    except BrokenPipeError:  # `... | head` closed the pipe: the reader has what it wanted
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout at exit
        return 0
    if args.format == "table":
        print(f"({len(rows)} rows)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
