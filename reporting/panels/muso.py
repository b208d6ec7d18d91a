"""MuSoBench's panel of a model's report: its plots and the paper's tables for that model."""

from __future__ import annotations

from typing import Any

from evaluations import scoring
from evaluations.muso import level_label
from reporting.figures import draw_reliability, legend
from reporting.panels import Panel, Writer, model_rows, not_run
from warehouse import Warehouse
from warehouse.schema import current

TASK_TICKS = {"timetabling": "TimeTabling", "subsetsum": "SubsetSum"}  # the paper's names, whole


def panel(wh: Warehouse, model: str, w: Writer) -> Panel:
    responses = wh.rows("SELECT paradigm, status, confidence, recall, precision, level_lo, level_hi, task, "
                        f"truncated FROM {current('muso.responses')} WHERE model = ? AND variant = 'standard'", [model])
    none = not_run("MuSoBench", "muso.responses", "muso", wh, model) if not responses else ""
    ok = [r for r in responses if r["status"] == "ok"]
    stated = [r for r in ok if r["confidence"] is not None and r["recall"] is not None]
    reason = none or ("" if stated else
                      f"no reply stated a confidence: {len(ok)} of {len(responses)} conversations answered, "
                      f"{sum(bool(r['truncated']) for r in responses)} cut at the token budget")

    def reliability(ax: Any) -> None:
        by: dict[str, tuple[list[float], list[float]]] = {}
        for r in stated:
            c, s = by.setdefault(r["paradigm"], ([], []))
            c.append(r["confidence"] / 100)
            s.append(r["recall"])
        draw_reliability(ax, by)

    scored = [r for r in ok if r["recall"] is not None]

    def by_level(ax: Any) -> None:
        levels = sorted({(r["task"], r["level_lo"], r["level_hi"]) for r in scored})
        labels = [f"{TASK_TICKS.get(t, t)}\n{level_label(lo, hi)}" for t, lo, hi in levels]
        for k, (metric, colour) in enumerate((("recall", "tab:blue"), ("precision", "tab:orange"))):
            for x, lv in enumerate(levels):
                values = [r[metric] for r in scored if (r["task"], r["level_lo"], r["level_hi"]) == lv
                          and r[metric] is not None]
                at = x + 0.4 * k - 0.2
                if values:
                    mean = scoring.mean(values)
                    # a mean of 0 is a bar of no height: an outline and its value keep it visible
                    ax.bar(at, max(mean, 0.004), width=0.4, color=colour, edgecolor=colour, linewidth=0.8,
                           label=metric if x == 0 else None)
                    ax.annotate(f"{mean:.2f}\nn={len(values)}", (at, mean), textcoords="offset points",
                                xytext=(0, 2), ha="center", fontsize=6)
                else:  # no mean to draw: say so instead of a bar at 0
                    ax.annotate(f"no {metric}", (at, 0.02), ha="center", fontsize=6, rotation=90, color=colour)
        ax.set_xticks(range(len(levels)), labels, fontsize=7)
        ax.set_ylim(0, 1)
        legend(ax, fontsize=7)

    bins = []
    for paradigm in sorted({r["paradigm"] for r in stated}):
        rs = [r for r in stated if r["paradigm"] == paradigm]
        bins += [f"{paradigm} confidence {b.lo:.1f}-{b.hi:.1f}: n={b.count}, mean recall {b.mean_score:.2f}"
                 for b in scoring.reliability_bins([r["confidence"] / 100 for r in rs], [r["recall"] for r in rs])
                 if b.count]
    plots = [w.plot("muso_reliability", "MuSoBench recall vs stated confidence", reason, reliability,
                    note="; ".join(bins)),
             w.plot("muso_levels", "Recall and precision by solution-count level",
                    none or ("" if scored else f"no reply was scored ({len(responses)} conversations, "
                                               f"{len(responses) - len(ok)} failed)"), by_level)]
    tables = [(v, model_rows(wh, v, model)) for v in ("muso.table2", "muso.table1")]
    return Panel("muso", "Overconfidence and calibration", "MuSoBench", plots, tables)
