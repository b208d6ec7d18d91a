"""A model's report, one panel per family: the shared parts (plots, the writer, why a panel is empty).

Each family's panel is `panel(wh, model, writer)` in `reporting/panels/<key>.py`; `reporting/pages.py`
lays them out in the order of `configuration/families.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reporting.figures import figure
from warehouse import Warehouse


@dataclass
class Plot:
    title: str
    file: str | None  # PNG file name beside the page; None when there was nothing to draw
    reason: str = ""  # why there is no plot
    note: str = ""  # what the plot shows, in words (read by people who cannot see it, and by tests)


@dataclass
class Panel:
    key: str
    title: str
    family: str
    plots: list[Plot]
    tables: list[tuple[str, list[dict]]]  # (view name, rows for this model)


class Writer:
    """Draws the plots of one model's page into its folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.png"):
            old.unlink()

    def plot(self, name: str, title: str, reason: str, draw: Callable[[Any], None], note: str = "") -> Plot:
        """`draw(ax)` when `reason` is empty; otherwise a "no data" plot saying why."""
        if reason:
            return Plot(title, None, reason)
        fig, ax = figure((5.2, 3.4))
        draw(ax)
        ax.set_title(title, fontsize=10)
        path = self.folder / f"{name}.png"
        fig.savefig(path, format="png", dpi=90, bbox_inches="tight", metadata={"Software": None})
        return Plot(title, f"{self.folder.name}/{path.name}", note=note)


def model_rows(wh: Warehouse, view: str, model: str) -> list[dict]:
    return wh.rows(f"SELECT * FROM {view} WHERE model = ?", [model])


def evaluated(wh: Warehouse, table: str, model: str) -> int:
    return wh.scalar(f"SELECT count(*) FROM {table} WHERE model = ?", [model])


def not_run(family: str, table: str, select: str, wh: Warehouse, model: str) -> str:
    """Why a panel is empty: its replies are all stale, or the family never ran for the model."""
    stale = wh.scalar("SELECT sum(replies) FROM report.stale WHERE family = ? AND model = ?", [select, model])
    if stale:
        return (f"{family} has no current replies for this model: its {int(stale)} replies were made on items "
                f"since rebuilt differently or removed (report.stale; run `python -m assets.materialize_all "
                f"--select {select} --model {model}`)")
    return (f"{family} has not been evaluated for this model: no rows in {table} "
            f"(run `python -m assets.materialize_all --select {select}`)")
