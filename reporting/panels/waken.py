"""WakenLLM's panel of a model's report: its plots and the paper's tables for that model."""

from __future__ import annotations

from typing import Any

from reporting.figures import draw_stacked_bars, legend
from reporting.panels import Panel, Writer, model_rows, not_run
from warehouse import Warehouse

# the converting classes of a stage (section 3.2), stacked in this order
RATE_COLOURS = {"TCR": "tab:green", "FCR": "tab:red", "UCR": "tab:gray"}


def panel(wh: Warehouse, model: str, w: Writer) -> Panel:
    metrics = wh.rows("SELECT * FROM waken.metrics WHERE model = ?", [model])
    none = not_run("WakenLLM", "waken.metrics", "waken", wh, model) if not metrics else ""
    d_vp = {(r["dataset"], r["stage"]): r["value"] for r in metrics
            if r["metric"] == "d_vp" and r["setting"] == "vanilla"}
    rates = {(r["dataset"], r["stage"], r["metric"]): r["value"] for r in metrics
             if r["metric"] in ("TCR", "FCR", "UCR") and r["sample_type"] == "all" and r["setting"] == "vanilla"
             and r["stage"] in ("1", "2") and r["value"] is not None}
    conv_reason = none or ("" if rates else
                           "stage 1 never ran: on every dataset the vague-perception set is empty (the model "
                           "answered no solvable item Unknown, and no Unknown item's explanation failed); "
                           f"d_vp per dataset and stage: {dict(sorted((f'{d} s{s}', int(v or 0)) for (d, s), v in d_vp.items()))}")

    def conv(ax: Any) -> None:
        bars: dict[str, dict[str, float]] = {}
        for (d, s, metric), v in rates.items():
            bars.setdefault(f"{d}\nstage {s}", {})[metric] = v
        draw_stacked_bars(ax, bars, "share of the stage's input", RATE_COLOURS)

    vp = {(r["dataset"], r["sample_type"]): r["value"] for r in metrics
          if r["metric"] == "vague_perception_share" and r["value"] is not None}

    def vague(ax: Any) -> None:
        datasets = sorted({d for d, _ in vp})
        xs = range(len(datasets))
        ax.bar([x - 0.2 for x in xs], [vp.get((d, "s"), 0.0) for d in datasets], width=0.4,
               label="V: solvable answered Unknown")
        ax.bar([x + 0.2 for x in xs], [vp.get((d, "u"), 0.0) for d in datasets], width=0.4,
               label="U: Unknown, explanation failed")
        ax.set_xticks(list(xs), datasets)
        ax.set_ylim(0, 1)
        legend(ax, fontsize=7)

    plots = [w.plot("waken_converting", "WakenLLM converting rates (vanilla)", conv_reason, conv),
             w.plot("waken_vague", "Vague perception", none or ("" if vp else "no vague-perception share: no "
                                                                "items of either type were answered"), vague)]
    tables = [(v, model_rows(wh, v, model)) for v in ("waken.table3", "waken.table6", "waken.table8")]
    return Panel("waken", "Abstention and vague perception", "WakenLLM", plots, tables)
