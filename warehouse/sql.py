"""SQL fragments the families' views share: percentages, and a reply table's current rows."""

from __future__ import annotations


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
