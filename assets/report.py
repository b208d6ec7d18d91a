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
from reporting import stats
from reporting.pages import main, reports_url, safe_name, write_reports

GROUP = "report"


@dg.asset(group_name=GROUP, kinds={"html"}, code_version="2",
          deps=["models", *(f.metrics for f in FAMILIES)])
def model_report(settings: SettingsResource, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """One static HTML page per evaluated model (`reports/<model>.html` beside the warehouse, plots
    as PNG files): WakenLLM, MuSoBench, S1-Bench and Instruction Boundary side by side, with the
    papers' tables for that model; a plot with nothing to draw says why. Links in the metadata.
    First it recomputes `report.intervals` and `report.compare` (reporting/stats.py) from the units
    every family's metrics rest on."""
    cfg = settings.load()
    wh = warehouse.get()
    folder = Path(warehouse.path).parent / "reports"
    probed = {r["name"]: r for r in wh.rows("SELECT name, kind, served_model, endpoint_host FROM llm.models")}
    about = {m: {"served model": probed.get(m, {}).get("served_model", "?"),
                 "endpoint": probed.get(m, {}).get("endpoint_host") or "embedded",
                 "configuration": cfg.source, "scale": cfg.scale, "seed": cfg.seed} for m in cfg.evaluate}
    n_intervals, n_compared = stats.write(wh)  # before the pages, which show them
    written = write_reports(wh, cfg.evaluate, folder, about, _provenance(cfg.source))
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
    metadata["intervals"] = n_intervals
    metadata["comparisons"] = n_compared
    return dg.MaterializeResult(metadata=metadata)


def _provenance(config: str) -> dict[str, str]:
    """What the pages were made from: the code's commit, the configuration file and its digest, and when."""
    import datetime
    import hashlib
    import subprocess

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                                text=True, timeout=10).stdout.strip() or "unknown (not a git checkout)"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown (git not found)"
    try:
        digest = hashlib.sha256(Path(config).read_bytes()).hexdigest()[:16]
    except OSError:
        digest = "unreadable"
    made = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return {"commit": commit, "configuration": config, "configuration sha256": digest, "written": made}


if __name__ == "__main__":
    sys.exit(main())
