"""The `model_report` asset: the per-model report pages of `reporting/pages.py`, linked from the UI.

`python -m assets.report --serve` serves them (`reporting.pages.main`), as `make ui` does.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import dagster as dg

from assets.resources import SettingsResource, WarehouseResource
from configuration.families import FAMILIES
from reporting.pages import main, reports_url, safe_name, write_reports

GROUP = "report"


@dg.asset(group_name=GROUP, kinds={"html"}, code_version="1",
          deps=["models", *(f.metrics for f in FAMILIES)])
def model_report(settings: SettingsResource, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """One static HTML page per evaluated model (`reports/<model>.html` beside the warehouse, plots
    as PNG files): WakenLLM, MuSoBench, S1-Bench and Instruction Boundary side by side, with the
    papers' tables for that model; a plot with nothing to draw says why. Links in the metadata."""
    cfg = settings.load()
    wh = warehouse.get()
    folder = Path(warehouse.path).parent / "reports"
    probed = {r["name"]: r for r in wh.rows("SELECT name, kind, served_model, endpoint_host FROM llm.models")}
    about = {m: {"served model": probed.get(m, {}).get("served_model", "?"),
                 "endpoint": probed.get(m, {}).get("endpoint_host") or "embedded",
                 "configuration": cfg.source, "scale": cfg.scale, "seed": cfg.seed} for m in cfg.evaluate}
    written = write_reports(wh, cfg.evaluate, folder, about)
    base = reports_url()
    # links a browser opens from the UI in one click: pages served over HTTP (`make ui` serves them;
    # browsers refuse file:// links from an http:// page); the files' paths beside them
    metadata: dict[str, Any] = {"leaderboard": dg.MetadataValue.url(f"{base}/index.html"),
                                "index": dg.MetadataValue.path(str(folder / "index.html"))}
    lines = [f"- [leaderboard]({base}/index.html): every model's headline numbers, each linked to its replies"]
    for model, (page, panels) in written.items():
        metadata[f"report_{safe_name(model)}"] = dg.MetadataValue.url(f"{base}/{page.name}")
        empty = [f"{p.family}: {pl.title}" for p in panels for pl in p.plots if pl.file is None]
        lines.append(f"- [{model}]({base}/{page.name}): {sum(pl.file is not None for p in panels for pl in p.plots)}"
                     f" plots" + (f"; no data in {len(empty)} ({'; '.join(empty)})" if empty else ""))
    metadata["reports"] = dg.MetadataValue.md("\n".join(lines) or "_no evaluated models_")
    metadata["dagster/row_count"] = len(written)
    return dg.MaterializeResult(metadata=metadata)


if __name__ == "__main__":
    sys.exit(main())
