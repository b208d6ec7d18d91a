"""Helpers that turn rows and figures into Dagster metadata (Markdown tables, PNG previews)."""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from reporting.figures import draw_stacked_bars, figure


def table(rows: Sequence[Mapping[str, Any]]) -> dg.MetadataValue:
    """Rows as a Dagster table (every row, typed columns; the UI scrolls it rather than cutting it)."""
    if not rows:
        return dg.MetadataValue.table(records=[], schema=dg.TableSchema(columns=[]))
    cols = list(rows[0].keys())

    def kind(col: str) -> str:
        values = [r.get(col) for r in rows if r.get(col) is not None]
        for name, types in (("bool", (bool,)), ("int", (int,)), ("float", (int, float))):
            if values and all(isinstance(v, types) and (name == "bool" or not isinstance(v, bool)) for v in values):
                return name
        return "string"

    kinds = {c: kind(c) for c in cols}

    def cell(col: str, v: Any) -> Any:
        if v is None or kinds[col] != "string":
            return round(v, 4) if isinstance(v, float) else v
        return str(v)

    return dg.MetadataValue.table(
        records=[dg.TableRecord({c: cell(c, r.get(c)) for c in cols}) for r in rows],
        schema=dg.TableSchema(columns=[dg.TableColumn(c, kinds[c]) for c in cols]))


def rounded(v: Any, digits: int = 4) -> Any:
    """A float as the UI shows it (0.3333, not 0.33333333333333331); anything else as it is."""
    return round(v, digits) if isinstance(v, float) else v


def headline(wh: Any, family: str) -> dict[str, dg.MetadataValue]:
    """The family's `report.headline` numbers as numeric metadata (`<model> <scope> <metric>`), so
    the UI plots each over the asset's materialisations."""
    return {f"{r['model']} {r['scope']} {r['metric']}": dg.MetadataValue.float(rounded(float(r["value"])))
            for r in wh.rows("SELECT model, scope, metric, value FROM report.headline WHERE family = ? "
                             "AND value IS NOT NULL AND model <> '-' ORDER BY model, scope, metric", [family])}


def figure_markdown(fig: Any) -> dg.MetadataValue:
    """A matplotlib figure embedded as a base64 PNG in Markdown (Dagster University idiom)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    encoded = base64.b64encode(buf.getvalue()).decode()
    return dg.MetadataValue.md(f"![plot](data:image/png;base64,{encoded})")






def stacked_bar_chart(bars: Mapping[str, Mapping[str, float]], title: str, ylabel: str = "share",
                      colours: Mapping[str, str] | None = None) -> dg.MetadataValue:
    """`draw_stacked_bars` as a PNG in Markdown."""
    fig, ax = figure((max(4, 1.3 * len(bars)), 3.5))
    draw_stacked_bars(ax, bars, ylabel, colours)
    ax.set_title(title)
    return figure_markdown(fig)


def column_schema(table: str) -> dict[str, Any]:
    """`dagster/column_schema` of the asset that writes `table`: its columns as declared by the DDL
    (`warehouse.rows.columns`), with their types, NOT NULL and documentation, shown in the UI."""
    from warehouse.rows import columns
    from warehouse.schema import TABLES, column_docs

    docs = column_docs(TABLES[table])
    return {"dagster/column_schema": dg.TableSchema(columns=[
        dg.TableColumn(c.name, c.type, description=docs.get(c.name) or None,
                       constraints=dg.TableColumnConstraints(nullable=not c.not_null))
        for c in columns(table)]), "dagster/table_name": table}


def check_results(checks: Sequence[Any]) -> list[dg.AssetCheckResult]:
    """Dagster's results of the checks a layer computed (`validators.checks.Check`): lists and
    mappings in the evidence become JSON metadata; a failed `warn` check is a warning."""
    def value(v: Any) -> Any:
        return dg.MetadataValue.json(v) if isinstance(v, (list, tuple, dict)) else rounded(v)

    return [dg.AssetCheckResult(check_name=c.name, passed=c.passed, description=c.description or None,
                                severity=dg.AssetCheckSeverity.WARN if c.warn else dg.AssetCheckSeverity.ERROR,
                                metadata={k: value(v) for k, v in c.metadata.items()}) for c in checks]

