"""Run SQL against the warehouse from a shell: `python -m warehouse.query "SELECT ..."`.

Opens the file read-only and waits politely for a running materialisation to
finish its current write. The warehouse path comes from the configuration.
"""

from __future__ import annotations

import argparse
import sys

from configuration import load_config
from warehouse.connection import Warehouse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sql", help="a SQL query, e.g. \"SELECT * FROM llm.call_summary\"")
    parser.add_argument("--db", help="DuckDB file (default: warehouse.path of the configuration)")
    args = parser.parse_args(argv)
    path = args.db or load_config().warehouse_path()
    wh = Warehouse(path)
    with wh.connect(read_only=True) as con:
        cur = con.execute(args.sql)
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
    widths = [max(len(n), *(len(str(r[i])) for r in rows)) if rows else len(n) for i, n in enumerate(names)]
    widths = [min(w, 60) for w in widths]
    print("  ".join(n.ljust(w) for n, w in zip(names, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(v)[:60].ljust(w) for v, w in zip(r, widths)))
    print(f"({len(rows)} rows)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
