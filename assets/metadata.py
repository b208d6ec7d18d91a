"""Helpers that turn rows and figures into Dagster metadata (Markdown tables, PNG previews)."""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg


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


def headline(wh: Any, family: str) -> dict[str, dg.MetadataValue]:
    """The family's `report.headline` numbers as numeric metadata (`<model> <scope> <metric>`), so
    the UI plots each over the asset's materialisations."""
    return {f"{r['model']} {r['scope']} {r['metric']}": dg.MetadataValue.float(float(r["value"]))
            for r in wh.rows("SELECT model, scope, metric, value FROM report.headline WHERE family = ? "
                             "AND value IS NOT NULL AND model <> '-' ORDER BY model, scope, metric", [family])}


def figure_markdown(fig: Any) -> dg.MetadataValue:
    """A matplotlib figure embedded as a base64 PNG in Markdown (Dagster University idiom)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    encoded = base64.b64encode(buf.getvalue()).decode()
    return dg.MetadataValue.md(f"![plot](data:image/png;base64,{encoded})")


def legend(ax: Any, **kwargs: Any) -> None:
    """A legend when anything drawn has a label (an empty chart gets none, and no warning)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kwargs)


def draw_reliability(ax: Any, series: Mapping[str, tuple[list[float], list[float]]]) -> None:
    """MuSoBench's recall-confidence reliability diagram (paper figure 3a) on `ax`: per series
    (name -> confidences in 0-1, recalls), the mean recall of each confidence bin, with its ECE."""
    from evaluations import scoring

    ax.plot([0, 1], [0, 1], "k--", linewidth=1, label="perfect calibration")
    width = 0.1 / max(1, len(series))
    for k, (name, (confs, scores)) in enumerate(sorted(series.items())):
        bins = [b for b in scoring.reliability_bins(confs, scores) if b.count]
        xs = [b.lo + width * (k + 0.5) for b in bins]
        bars = ax.bar(xs, [b.mean_score for b in bins], width=width, alpha=0.35)
        # a marker per bin, sized by its replies: a bin at recall 0 (confident and wrong, the paper's
        # headline case) has no bar to see, and must still be the most visible point
        ax.scatter(xs, [b.mean_score for b in bins], s=[18 + 6 * b.count for b in bins], zorder=3,
                   color=bars.patches[0].get_facecolor()[:3] if bars.patches else None, edgecolors="black",
                   label=f"{name} (ECE {scoring.ece(confs, scores):.2f}, n={len(confs)})")
        for x, b in zip(xs, bins):
            ax.annotate(f"n={b.count}", (x, b.mean_score), textcoords="offset points", xytext=(0, 6),
                        ha="center", fontsize=6)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("stated confidence")
    ax.set_ylabel("mean recall")
    legend(ax, fontsize=7)


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files, no display): every figure starts here."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_stacked_bars(ax: Any, bars: Mapping[str, Mapping[str, float]], ylabel: str = "share",
                      colours: Mapping[str, str] | None = None) -> None:
    """One stacked bar per key of `bars` (in sorted order; categories stacked in sorted order, or
    in the order of `colours`), shares on a 0-1 axis, the legend beside the bars. The WakenLLM
    converting rates and the Instruction Boundary output distribution, in the asset's metadata and
    on the report page alike."""
    names = sorted(bars)
    cats = list(colours) if colours else sorted({c for b in bars.values() for c in b})
    bottom = [0.0] * len(names)
    for cat in cats:
        vals = [bars[n].get(cat, 0.0) for n in names]
        ax.bar(names, vals, bottom=bottom, label=cat, color=(colours or {}).get(cat))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylim(0, 1)
    ax.set_ylabel(ylabel)
    legend(ax, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # beside the bars, not over them
    ax.tick_params(axis="x", labelsize=7)


def stacked_bar_chart(bars: Mapping[str, Mapping[str, float]], title: str, ylabel: str = "share",
                      colours: Mapping[str, str] | None = None) -> dg.MetadataValue:
    """`draw_stacked_bars` as a PNG in Markdown."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4, 1.3 * len(bars)), 3.5))
    draw_stacked_bars(ax, bars, ylabel, colours)
    ax.set_title(title)
    value = figure_markdown(fig)
    plt.close(fig)
    return value


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
        return dg.MetadataValue.json(v) if isinstance(v, (list, tuple, dict)) else v

    return [dg.AssetCheckResult(check_name=c.name, passed=c.passed, description=c.description or None,
                                severity=dg.AssetCheckSeverity.WARN if c.warn else dg.AssetCheckSeverity.ERROR,
                                metadata={k: value(v) for k, v in c.metadata.items()}) for c in checks]

