"""SQL fragments the families' views share: percentages, a reply table's current rows, literals."""

from __future__ import annotations

from collections.abc import Sequence


def literal(text: str) -> str:
    """A string as an SQL literal, quoted."""
    return "'" + text.replace("'", "''") + "'"


def in_list(values: Sequence[str]) -> str:
    """`('a', 'b')`, for `IN`: values the code chose (family keys), written into the statement.
    A bound parameter of any kind makes DuckDB 1.4's Python client import pandas (0.3-0.4 s), which
    the run command's up-to-date path otherwise never needs."""
    return "(" + ", ".join(literal(v) for v in values) + ")" if values else "(NULL)"


def pct(expr: str) -> str:
    """A fraction as the papers print it: percent, two decimals."""
    return f"round(100 * ({expr}), 2)"


def made_on_join(items: str, keys: tuple[str, ...], alias: str = "r") -> str:
    """`JOIN` target: the items table `items` (as `i`) on the columns `keys` that name one item."""
    return f"{items} i ON " + " AND ".join(f"i.{k} = {alias}.{k}" for k in keys)


def current_rows(table: str, items: str, keys: tuple[str, ...], alias: str = "") -> str:
    """A subquery of the rows of reply table `table` made on the items stored now in `items`
    (the same `item_digest`): `SELECT * FROM {current_rows(...)} ORDER BY ...`."""
    return (f"(SELECT r.* FROM {table} r JOIN {made_on_join(items, keys)} "
            f"AND i.item_digest IS NOT DISTINCT FROM r.item_digest) AS {alias or table.split('.')[1]}")
