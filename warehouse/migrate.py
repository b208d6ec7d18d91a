"""Move a warehouse between the DuckDB file and a DuckLake, tables and ledger intact.

    python -m warehouse.migrate --to-lake            # warehouse.path's file -> the warehouse.lake lake
    python -m warehouse.migrate --to-file [PATH]     # the lake -> a file (default: warehouse.path)

Every table of the schema is copied in one transaction of the destination (all or nothing; the
views are the destination's own, over the copied rows), then checked: each table's rows in the
destination equal the source's, `EXCEPT ALL` both ways, so a copy that lost, doubled or changed a
row says which table. A destination that holds rows already is refused unless `--replace`, so a
lake that other runs write into is never overwritten by accident. The ledger's keys stay unique:
the file enforces them, and the lake receives them from a table that had them unique.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from configuration import ConfigError, load_config
from warehouse import open_warehouse
from warehouse.connection import Warehouse, insert_rows
from warehouse.lake import LakeError, LakeWarehouse, attached
from warehouse.schema import TABLES


class MigrationError(RuntimeError):
    """The copy was refused or did not check out; nothing was changed (or it was rolled back)."""


@dataclass(frozen=True)
class Copied:
    rows: dict[str, int]

    def line(self, source: str, dest: str) -> str:
        return (f"copied {len(self.rows)} tables, {sum(self.rows.values())} rows, from {source} to {dest}; "
                "every table checked equal (EXCEPT ALL both ways)")


def copy(source: Warehouse, dest: Warehouse, replace: bool = False) -> Copied:
    """Copy every table of `source` into `dest` (one is the file, the other the lake), then check."""
    if source.is_lake == dest.is_lake:
        raise MigrationError("one side must be the file and the other the lake")
    lake = source if source.is_lake else dest
    file = dest if source.is_lake else source
    assert isinstance(lake, LakeWarehouse)
    if not source.exists():
        raise MigrationError(f"nothing to copy: no warehouse at {source.where}")
    with source.connect(read_only=True) as inp:
        have = {f"{s}.{t}" for s, t in inp.execute(
            "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = current_database()").fetchall()}
    tables = [t for t in TABLES if t in have]
    counts: dict[str, int] = {}
    with dest.connect() as out:  # the lake's write lock, or the file's, for the whole copy
        held = {t: out.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in TABLES}
        if any(held.values()) and not replace:
            full = ", ".join(f"{t} ({n})" for t, n in held.items() if n)
            raise MigrationError(f"{dest.where} holds rows already: {full}; --replace to overwrite them")
        out.execute("BEGIN TRANSACTION")
        try:
            for table in TABLES:
                out.execute(f"DELETE FROM {table}")
                if table not in tables:
                    continue
                with source.connect(read_only=True) as inp:
                    data = inp.sql(f"SELECT * FROM {table}").to_arrow_table()
                if data.num_rows:
                    insert_rows(out, table, data)
                counts[table] = data.num_rows
            out.execute("COMMIT")
        except BaseException:
            out.execute("ROLLBACK")
            raise
    bad = differences(lake, file.path, tables)
    if bad:
        raise MigrationError("the copy does not check out: " + "; ".join(bad))
    return Copied(counts)


def differences(lake: LakeWarehouse, file: Path, tables: Sequence[str],
                leave_out: Callable[[str], bool] = lambda column: False) -> list[str]:
    """The tables whose rows differ between the lake and the file (the file attached read-only
    beside the lake), `EXCEPT ALL` both ways over the file's columns but those `leave_out` names."""
    base = attached(lake._catalog, lake.data_path, lake.label)
    con = base.cursor()
    quoted = str(file).replace("'", "''")
    con.execute(f"ATTACH '{quoted}' AS migrated_file (READ_ONLY)")
    try:
        bad = []
        for table in tables:
            cols = [c for (c,) in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE database_name = 'migrated_file' AND "
                "schema_name || '.' || table_name = ? ORDER BY column_index", [table]).fetchall() if not leave_out(c)]
            sel = ", ".join(f'"{c}"' for c in cols)
            a, b = f"SELECT {sel} FROM benchsmith.{table}", f"SELECT {sel} FROM migrated_file.{table}"
            diff = con.execute(f"SELECT (SELECT count(*) FROM ({a} EXCEPT ALL {b})), "
                               f"(SELECT count(*) FROM ({b} EXCEPT ALL {a}))").fetchall()[0]
            if any(diff):
                bad.append(f"{table}: {diff[0]} rows only in the lake, {diff[1]} only in the file")
        return bad
    finally:
        con.execute("DETACH migrated_file")
        con.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m warehouse.migrate", description=__doc__.splitlines()[0])
    way = parser.add_mutually_exclusive_group(required=True)
    way.add_argument("--to-lake", action="store_true", help="copy the file at warehouse.path into warehouse.lake")
    way.add_argument("--to-file", nargs="?", const="", metavar="PATH",
                     help="copy warehouse.lake into a DuckDB file (default: warehouse.path)")
    parser.add_argument("--replace", action="store_true", help="overwrite a destination that holds rows")
    args = parser.parse_args(argv)
    try:
        cfg = load_config()
        if cfg.warehouse.lake is None:
            raise ConfigError(f"{cfg.source}: warehouse.lake is not set; configure the lake to copy to or from")
        lake = open_warehouse(cfg)
        file = Warehouse(cfg.beside(args.to_file) if args.to_file else cfg.warehouse_path(), cfg.warehouse.lock_timeout_s)
        source, dest = (file, lake) if args.to_lake else (lake, file)
        print(copy(source, dest, args.replace).line(source.where, dest.where))
    except (ConfigError, LakeError, MigrationError) as exc:
        print(f"warehouse.migrate: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
