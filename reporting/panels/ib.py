"""Instruction Boundary's panel of a model's report: its plots and the paper's tables for that model."""

from __future__ import annotations

from typing import Any

from reporting.figures import draw_stacked_bars, legend
from reporting.panels import Panel, Writer, model_rows, not_run
from validators.outcomes import UNDECIDED
from warehouse import Warehouse
from warehouse.schema import current


def panel(wh: Warehouse, model: str, w: Writer) -> Panel:
    metrics = wh.rows("SELECT * FROM ib.metrics WHERE model = ? AND category = '-'", [model])
    none = not_run("Instruction Boundary", "ib.metrics", "ib", wh, model) if not metrics else ""
    acc = {(r["setting"], r["form"]): r["value"] for r in metrics if r["metric"] == "Acc" and r["value"] is not None}
    undecided = wh.scalar(f"SELECT count(*) FROM {current('ib.responses')} WHERE model = ? AND output_category = ?",
                          [model, UNDECIDED])
    total = wh.scalar(f"SELECT count(*) FROM {current('ib.responses')} WHERE model = ?", [model])

    def by_setting(ax: Any) -> None:
        settings = sorted({s for s, _ in acc})
        forms = [f for f in ("judging", "single", "multiple") if any(k[1] == f for k in acc)]
        width = 0.8 / max(1, len(forms))
        for k, form in enumerate(forms):
            xs = [x + width * (k - (len(forms) - 1) / 2) for x in range(len(settings))]
            have = [(x, acc[(s, form)]) for x, s in zip(xs, settings) if (s, form) in acc]
            ax.bar([x for x, _ in have], [v for _, v in have], width=width, label=form)
            for x, s in zip(xs, settings):  # no accuracy (no decided reply): marked, not drawn as 0
                if (s, form) not in acc:
                    ax.annotate("n/a", (x, 0.02), ha="center", fontsize=6, rotation=90)
        ax.set_xticks(range(len(settings)), settings, rotation=45, ha="right", fontsize=7)
        ax.set_ylim(0, 1)
        ax.set_ylabel("accuracy")
        legend(ax, fontsize=7)

    outputs = {(r2["form"], r2["category"]): r2["value"] for r2 in wh.rows(
        "SELECT form, category, value FROM ib.metrics WHERE model = ? AND metric = 'OR' AND setting = 'vanilla' "
        "AND value IS NOT NULL", [model])}

    def out(ax: Any) -> None:  # one stacked bar per form: the share of each output label (figure 6)
        bars: dict[str, dict[str, float]] = {}
        for (form, cat), v in outputs.items():
            bars.setdefault(form, {})[cat] = v
        draw_stacked_bars(ax, bars, "share of vanilla replies")

    acc_reason = none or ("" if acc else f"no reply was decided: {undecided} of {total} replies could not be read")
    plots = [w.plot("ib_accuracy", "Instruction Boundary accuracy per setting", acc_reason, by_setting),
             w.plot("ib_outputs", "Output labels (vanilla)",
                    none or ("" if outputs else "no vanilla replies for this model"), out)]
    tables = [(v, model_rows(wh, v, model)) for v in ("ib.table3", "ib.table7", "ib.miscellany")]
    return Panel("ib", "Instruction bias", "Instruction Boundary", plots, tables)
