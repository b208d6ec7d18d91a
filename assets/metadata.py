"""Helpers that turn rows and figures into Dagster metadata (Markdown tables, PNG previews)."""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg


def markdown_table(rows: Sequence[Mapping[str, Any]], limit: int = 50) -> str:
    """Rows as a Markdown table (first `limit` rows), for `MetadataValue.md`."""
    if not rows:
        return "_no rows_"
    cols = list(rows[0].keys())
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows[:limit]:
        cells = [str(r.get(c, "")).replace("|", "\\|").replace("\n", " ")[:80] for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    if len(rows) > limit:
        lines.append(f"\n_{len(rows) - limit} more rows_")
    return "\n".join(lines)


def figure_markdown(fig: Any) -> dg.MetadataValue:
    """A matplotlib figure embedded as a base64 PNG in Markdown (Dagster University idiom)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    encoded = base64.b64encode(buf.getvalue()).decode()
    return dg.MetadataValue.md(f"![plot](data:image/png;base64,{encoded})")
