"""S1-Bench's panel of a model's report: its plots and the paper's tables for that model."""

from __future__ import annotations

from collections import Counter
from typing import Any

from reporting.panels import Panel, Writer, model_rows, not_run
from warehouse import Warehouse
from warehouse.schema import current


def panel(wh: Warehouse, model: str, w: Writer) -> Panel:
    responses = wh.rows(f"SELECT format_type, completion_tokens, subcategory, mode FROM {current('s1.responses')} WHERE model = ?",
                        [model])
    accepted = wh.scalar("SELECT count(*) FROM s1.items")
    candidates = wh.scalar("SELECT count(*) FROM s1.candidates")
    if responses:
        none = ""
    elif candidates and not accepted:
        none = (f"no S1-Bench question was accepted: of {candidates} candidate versions, the validator models "
                "answered none correctly every time (see s1.rounds)")
    else:
        none = not_run("S1-Bench", "s1.responses", "s1", wh, model)
    formats = Counter(str(r["format_type"]) for r in responses if r["format_type"] is not None)

    def fmt(ax: Any) -> None:
        names = sorted(formats)
        total = sum(formats.values())
        ax.bar(names, [formats[n] / total for n in names], color="tab:purple")
        ax.set_xlabel("response format type (paper table 9)")
        ax.set_ylabel("share of replies")
        ax.set_ylim(0, 1)

    tokens: dict[str, list[int]] = {}
    for r in responses:
        if r["completion_tokens"] is not None:
            tokens.setdefault(r["subcategory"], []).append(r["completion_tokens"])

    def tok(ax: Any) -> None:
        subs = sorted(tokens)
        ax.barh(subs, [sum(tokens[s]) / len(tokens[s]) for s in subs], color="tab:cyan")
        ax.set_xlabel("mean completion tokens")
        ax.tick_params(axis="y", labelsize=7)

    plots = [w.plot("s1_formats", "S1-Bench response formats",
                    none or ("" if formats else "no reply was answered (every call failed)"), fmt),
             w.plot("s1_tokens", "S1-Bench tokens by subcategory",
                    none or ("" if tokens else "no token counts were reported by the endpoint"), tok)]
    tables = [(v, model_rows(wh, v, model)) for v in ("s1.table3", "s1.table8", "s1.table5")]
    return Panel("s1", "Overthinking and format", "S1-Bench", plots, tables)
