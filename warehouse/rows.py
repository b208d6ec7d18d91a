"""Typed rows: each table's columns, declared once by its DDL, and the frames written to it.

`columns(table)` reads a table's column names, types and NOT NULL from its `CREATE TABLE` text
(`warehouse/schema.py` and `warehouse/<key>.py`), so there is no second list to keep in step.
`frame(table, rows)` turns the rows a family made into a polars DataFrame of exactly that
schema, after checking every row against it: an unknown column, a missing required value or a
value of the wrong type is refused with the table, the row and the field named, before anything
is written. The writer hands the frame to DuckDB as Arrow. The same declaration is the asset's
column schema in the Dagster UI (`assets.metadata.column_schema`).

Where plain Python stays: the families' seeded draws (per-topic quotas, 1:1 splits, item
sampling) use `random.Random` streams whose every draw is part of a stored item set; redone in
polars (its own generator) every released item set would change, so they stay as they are. The
metrics are sums over a few hundred rows per group, written as the paper's formulas; frames would
hide the formula without saving time.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import polars as pl


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # as the DDL spells it: VARCHAR, INTEGER, BIGINT, DOUBLE, BOOLEAN, JSON, TIMESTAMP, VARCHAR[]
    not_null: bool


_POLARS = {"VARCHAR": pl.String, "JSON": pl.String, "INTEGER": pl.Int32, "BIGINT": pl.Int64, "DOUBLE": pl.Float64,
           "BOOLEAN": pl.Boolean, "TIMESTAMP": pl.Datetime("us"), "VARCHAR[]": pl.List(pl.String)}
# the Python values a column of each type accepts (bool is an int to Python, never to a table)
_ACCEPTS: dict[str, tuple[type, ...]] = {
    "VARCHAR": (str,), "JSON": (str,), "INTEGER": (int,), "BIGINT": (int,), "DOUBLE": (float, int),
    "BOOLEAN": (bool,), "TIMESTAMP": (dt.datetime,), "VARCHAR[]": (list, tuple)}
_INT32 = 2**31


class RowError(ValueError):
    """A row that does not fit its table's declared columns; the message names table, row, field."""


def parse_columns(ddl: str) -> list[Column]:
    """The columns of a `CREATE TABLE` body, in order (comments and table constraints skipped)."""
    out = []
    for line in ddl.strip().splitlines():
        m = re.match(r"\s*(\w+)\s+([A-Z][A-Z0-9]*(?:\[\])?)(.*)", line.split("--", 1)[0])
        if m and m.group(1).upper() not in ("PRIMARY", "UNIQUE", "CHECK", "FOREIGN"):
            rest = m.group(3).upper()
            out.append(Column(m.group(1), m.group(2), "NOT NULL" in rest or "PRIMARY KEY" in rest))
    return out


@cache
def columns(table: str) -> tuple[Column, ...]:
    """`table`'s declared columns (a staging copy, `<table>__staging`, has its table's)."""
    from warehouse.schema import TABLES

    name = table.removesuffix("__staging")
    if name not in TABLES:
        raise RowError(f"{table}: not a table of the warehouse schema")
    return tuple(parse_columns(TABLES[name]))


def polars_schema(table: str) -> dict[str, Any]:
    return {c.name: _POLARS[c.type] for c in columns(table)}


@cache
def arrow_schema(table: str, names: tuple[str, ...]) -> Any:
    """The Arrow schema of the columns `names` of `table`, typed as declared (the types the polars
    frame of `frame` has); None if the table is not declared or one of `names` is not its column."""
    import pyarrow as pa

    try:
        declared = polars_schema(table)
    except RowError:
        return None
    if not names or any(n not in declared for n in names):
        return None
    return pa.schema([(n, pl.Series(n, [], dtype=declared[n]).to_arrow().type) for n in names])


def _fits(col: Column, value: Any) -> bool:
    if not isinstance(value, _ACCEPTS[col.type]) or (isinstance(value, bool) and col.type != "BOOLEAN"):
        return False
    if col.type == "INTEGER":
        return -_INT32 <= value < _INT32
    if col.type == "VARCHAR[]":
        return all(v is None or isinstance(v, str) for v in value)
    return True


def check_rows(table: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """Every row against `table`'s columns; the first misfit raises `RowError` naming it."""
    cols = {c.name: c for c in columns(table)}
    for i, row in enumerate(rows):
        unknown = sorted(set(row) - set(cols))
        if unknown:
            raise RowError(f"{table}: row {i}: field {unknown[0]!r} is not a column of the table "
                           f"(columns: {', '.join(cols)})")
        for name, col in cols.items():
            value = row.get(name)
            if value is None:
                if col.not_null and name != "item_digest":  # the writer stamps the digest
                    raise RowError(f"{table}: row {i}: field {name!r} is required (NOT NULL) and missing")
            elif not _fits(col, value):
                raise RowError(f"{table}: row {i}: field {name!r} expects {col.type}, got {type(value).__name__} "
                               f"{str(value)[:60]!r}")


# the exact Python types that `_fits` accepts for a column type without looking at the value
# (VARCHAR[] is not here: its elements are checked one by one)
_EXACT: dict[str, frozenset[type]] = {t: frozenset(accepts) for t, accepts in _ACCEPTS.items() if t != "VARCHAR[]"}


def _columns_fit(cols: Sequence[Column], values: Mapping[str, list[Any]]) -> bool:
    """True if every value fits its column, judged a column at a time (`values`: column -> its
    values, None where a row lacks it): what `check_rows` accepts, at C speed for the common case.
    False sends the rows to `check_rows`, which names the first misfit (or accepts a value of a
    subclass, which this test leaves to it)."""
    for col in cols:
        vs = values.get(col.name)
        if vs is None:
            if col.not_null and col.name != "item_digest":
                return False
            continue
        types = set(map(type, vs))
        if type(None) in types:
            if col.not_null and col.name != "item_digest":
                return False
            types.discard(type(None))
        exact = _EXACT.get(col.type)
        if exact is None:  # VARCHAR[]
            if not all(v is None or _fits(col, v) for v in vs):
                return False
            continue
        if not types <= exact:
            return False
        if col.type == "INTEGER" and types:
            present = [v for v in vs if v is not None]
            if min(present) < -_INT32 or max(present) >= _INT32:
                return False
    return True


def frame(table: str, rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """`rows` as a DataFrame of `table`'s declared columns (only those the rows carry, in the
    table's order), checked first (`check_rows`'s verdicts, tested a column at a time; a row that
    fails is named by `check_rows`)."""
    cols = columns(table)
    present: set[str] = set().union(*rows)
    names = {c.name for c in cols}
    values = {c.name: [r.get(c.name) for r in rows] for c in cols if c.name in present}
    if not present <= names or not _columns_fit(cols, values):
        check_rows(table, rows)  # raises, naming the row and the field
    schema = {name: dtype for name, dtype in polars_schema(table).items() if name in present}
    return pl.DataFrame({k: values[k] for k in schema}, schema=schema)
