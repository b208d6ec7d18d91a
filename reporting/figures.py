"""Every figure, drawn once on a matplotlib axis: the assets' metadata previews and the report
pages draw with the same functions, and `figure` is the one place a figure is made."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def figure(figsize: tuple[float, float]) -> tuple[Any, Any]:
    """A figure and its one axis, drawn off-screen (Agg, files only), without pyplot: pyplot keeps
    every open figure in one registry per process, which steps drawing at once in threads of one
    process (`materialize_all` runs independent steps at once) would share; a `Figure` made
    directly belongs to its caller alone and is freed with its last reference (no `close`)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots()


def warm_up() -> None:
    """What a process's first figure costs beyond the next ones (0.3 s of 0.35: importing
    matplotlib, loading its fonts), paid now: one small figure drawn to PNG and dropped."""
    import io

    fig, ax = figure((1, 1))
    ax.set_title("warm-up")
    ax.plot([0, 1], [0, 1])
    fig.savefig(io.BytesIO(), format="png")


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
