"""One static HTML report per evaluated model: the four families side by side.

`model_report` writes `reports/<model>.html` beside the warehouse (plots as PNG files in
`reports/<model>/`) and an `index.html` listing them; its metadata links each from the UI.
Each family has a panel: WakenLLM (abstention and vague perception), MuSoBench (overconfidence
and calibration), S1-Bench (overthinking and format), Instruction Boundary (instruction bias),
with its plots and the paper's tables (the warehouse views) for that model. A plot with nothing
to draw says "no data" and why: the family was not evaluated for this model, or what in the
stored rows left it empty (no Unknown answers to stimulate, no confidence stated, ...).
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from assets.metadata import draw_reliability, legend
from assets.resources import SettingsResource, WarehouseResource
from evaluations import scoring
from warehouse import Warehouse
from warehouse.schema import current

GROUP = "report"


@dataclass
class Plot:
    title: str
    file: str | None  # PNG file name beside the page; None when there was nothing to draw
    reason: str = ""  # why there is no plot


@dataclass
class Panel:
    key: str
    title: str
    family: str
    plots: list[Plot]
    tables: list[tuple[str, list[dict]]]  # (view name, rows for this model)


def safe_name(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", model)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


class _Writer:
    """Draws the plots of one model's page into its folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.png"):
            old.unlink()

    def plot(self, name: str, title: str, reason: str, draw: Callable[[Any], None]) -> Plot:
        """`draw(ax)` when `reason` is empty; otherwise a "no data" plot saying why."""
        if reason:
            return Plot(title, None, reason)
        plt = _plt()
        fig, ax = plt.subplots(figsize=(5.2, 3.4))
        draw(ax)
        ax.set_title(title, fontsize=10)
        path = self.folder / f"{name}.png"
        fig.savefig(path, format="png", dpi=90, bbox_inches="tight", metadata={"Software": None})
        plt.close(fig)
        return Plot(title, f"{self.folder.name}/{path.name}")


def _model_rows(wh: Warehouse, view: str, model: str) -> list[dict]:
    return wh.rows(f'SELECT * FROM {view} WHERE "Model" = ?', [model])


def _evaluated(wh: Warehouse, table: str, model: str) -> int:
    return wh.scalar(f"SELECT count(*) FROM {table} WHERE model = ?", [model])


def _not_run(family: str, table: str, select: str, wh: Warehouse | None = None, model: str = "") -> str:
    stale = wh.scalar("SELECT sum(replies) FROM report.stale WHERE family = ? AND model = ?",
                      [select, model]) if wh is not None else None
    if stale:
        return (f"{family} has no current replies for this model: its {int(stale)} replies were made on items "
                f"since rebuilt differently or removed (report.stale; run `python -m assets.materialize_all "
                f"--select {select} --model {model}`)")
    return (f"{family} has not been evaluated for this model: no rows in {table} "
            f"(run `python -m assets.materialize_all --select {select}`)")


# -- the four panels ------------------------------------------------------------------------------

def waken_panel(wh: Warehouse, model: str, w: _Writer) -> Panel:
    metrics = wh.rows("SELECT * FROM waken.metrics WHERE model = ?", [model])
    none = _not_run("WakenLLM", "waken.metrics", "waken", wh, model) if not metrics else ""
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
        bars = sorted({(d, s) for d, s, _ in rates})
        labels = [f"{d}\nstage {s}" for d, s in bars]
        bottom = [0.0] * len(bars)
        for metric, colour in (("TCR", "tab:green"), ("FCR", "tab:red"), ("UCR", "tab:gray")):
            vals = [rates.get((d, s, metric), 0.0) for d, s in bars]
            ax.bar(labels, vals, bottom=bottom, label=metric, color=colour)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_ylim(0, 1)
        ax.set_ylabel("share of the stage's input")
        legend(ax, fontsize=7)

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
    tables = [(v, _model_rows(wh, v, model)) for v in ("waken.table3", "waken.table6", "waken.table8")]
    return Panel("waken", "Abstention and vague perception", "WakenLLM", plots, tables)


def muso_panel(wh: Warehouse, model: str, w: _Writer) -> Panel:
    responses = wh.rows("SELECT paradigm, status, confidence, recall, precision, level_lo, level_hi, task, "
                        f"truncated FROM {current('muso.responses')} WHERE model = ? AND variant = 'standard'", [model])
    none = _not_run("MuSoBench", "muso.responses", "muso", wh, model) if not responses else ""
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
        levels = sorted({(r["task"], r["level_lo"]) for r in scored})
        labels = [f"{t[:5]}\n{lo}+" for t, lo in levels]
        for k, (metric, colour) in enumerate((("recall", "tab:blue"), ("precision", "tab:orange"))):
            vals = [scoring.mean([r[metric] for r in scored if (r["task"], r["level_lo"]) == lv
                                  and r[metric] is not None]) or 0.0 for lv in levels]
            ax.bar([x + 0.4 * k - 0.2 for x in range(len(levels))], vals, width=0.4, label=metric, color=colour)
        ax.set_xticks(range(len(levels)), labels, fontsize=7)
        ax.set_ylim(0, 1)
        legend(ax, fontsize=7)

    plots = [w.plot("muso_reliability", "MuSoBench recall vs stated confidence", reason, reliability),
             w.plot("muso_levels", "Recall and precision by solution-count level",
                    none or ("" if scored else f"no reply was scored ({len(responses)} conversations, "
                                               f"{len(responses) - len(ok)} failed)"), by_level)]
    tables = [(v, _model_rows(wh, v, model)) for v in ("muso.table2", "muso.table1")]
    return Panel("muso", "Overconfidence and calibration", "MuSoBench", plots, tables)


def s1_panel(wh: Warehouse, model: str, w: _Writer) -> Panel:
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
        none = _not_run("S1-Bench", "s1.responses", "s1", wh, model)
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
    tables = [(v, _model_rows(wh, v, model)) for v in ("s1.table3", "s1.table8", "s1.table5")]
    return Panel("s1", "Overthinking and format", "S1-Bench", plots, tables)


def ib_panel(wh: Warehouse, model: str, w: _Writer) -> Panel:
    metrics = wh.rows("SELECT * FROM ib.metrics WHERE model = ? AND category = '-'", [model])
    none = _not_run("Instruction Boundary", "ib.metrics", "ib", wh, model) if not metrics else ""
    acc = {(r["setting"], r["form"]): r["value"] for r in metrics if r["metric"] == "Acc" and r["value"] is not None}
    undecided = wh.scalar(f"SELECT count(*) FROM {current('ib.responses')} WHERE model = ? AND output_category = 'undecided'", [model])
    total = wh.scalar(f"SELECT count(*) FROM {current('ib.responses')} WHERE model = ?", [model])

    def by_setting(ax: Any) -> None:
        settings = sorted({s for s, _ in acc})
        forms = [f for f in ("judging", "single", "multiple") if any(k[1] == f for k in acc)]
        width = 0.8 / max(1, len(forms))
        for k, form in enumerate(forms):
            ax.bar([x + width * (k - (len(forms) - 1) / 2) for x in range(len(settings))],
                   [acc.get((s, form), 0.0) for s in settings], width=width, label=form)
        ax.set_xticks(range(len(settings)), settings, rotation=45, ha="right", fontsize=7)
        ax.set_ylim(0, 1)
        ax.set_ylabel("accuracy")
        legend(ax, fontsize=7)

    outputs = {(r2["form"], r2["category"]): r2["value"] for r2 in wh.rows(
        "SELECT form, category, value FROM ib.metrics WHERE model = ? AND metric = 'OR' AND setting = 'vanilla' "
        "AND value IS NOT NULL", [model])}

    def out(ax: Any) -> None:  # one stacked bar per form: the share of each output label (figure 6)
        forms = [f for f in ("judging", "single", "multiple") if any(k[0] == f for k in outputs)]
        bottom = [0.0] * len(forms)
        for cat in sorted({c for _, c in outputs}):
            vals = [outputs.get((f, cat), 0.0) for f in forms]
            ax.bar(forms, vals, bottom=bottom, label=cat)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_ylabel("share of vanilla replies")
        ax.set_ylim(0, 1)
        legend(ax, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))

    acc_reason = none or ("" if acc else f"no reply was decided: {undecided} of {total} replies could not be read")
    plots = [w.plot("ib_accuracy", "Instruction Boundary accuracy per setting", acc_reason, by_setting),
             w.plot("ib_outputs", "Output labels (vanilla)",
                    none or ("" if outputs else "no vanilla replies for this model"), out)]
    tables = [(v, _model_rows(wh, v, model)) for v in ("ib.table3", "ib.table7", "ib.miscellany")]
    return Panel("ib", "Instruction bias", "Instruction Boundary", plots, tables)


PANELS = (waken_panel, muso_panel, s1_panel, ib_panel)


# -- HTML -----------------------------------------------------------------------------------------

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 1.2rem; }
section { border: 1px solid #ccc; border-radius: 6px; padding: 0.8rem 1rem; }
figure { margin: 0.5rem 0; }
figure.empty { border: 1px dashed #999; padding: 1.2rem; background: #fafafa; }
table { border-collapse: collapse; font-size: 0.8rem; margin: 0.4rem 0 1rem; }
td, th { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
td.null { color: #999; }
"""


def _cell(v: Any) -> str:
    if v is None:
        return '<td class="null">NULL</td>'
    if isinstance(v, float):
        return f"<td>{v:.4g}</td>"
    return f"<td>{html.escape(str(v))}</td>"


def _table(name: str, rows: Sequence[dict]) -> str:
    if not rows:
        return f'<h4>{html.escape(name)}</h4><p class="norows">no rows for this model</p>'
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(_cell(v) for v in r.values()) + "</tr>" for r in rows)
    return f"<h4>{html.escape(name)}</h4><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(p: Plot) -> str:
    if p.file is None:
        return (f'<figure class="plot empty"><figcaption>{html.escape(p.title)}</figcaption>'
                f'<p class="nodata"><strong>no data</strong>: {html.escape(p.reason)}</p></figure>')
    return (f'<figure class="plot"><img src="{html.escape(p.file)}" alt="{html.escape(p.title)}">'
            f"<figcaption>{html.escape(p.title)}</figcaption></figure>")


def render(model: str, about: dict[str, Any], panels: Sequence[Panel]) -> str:
    meta = "".join(f"<li>{html.escape(k)}: {html.escape(str(v))}</li>" for k, v in about.items())
    sections = "".join(
        f'<section id="{p.key}"><h2>{html.escape(p.title)} <small>({html.escape(p.family)})</small></h2>'
        + "".join(_figure(f) for f in p.plots) + "".join(_table(n, rows) for n, rows in p.tables) + "</section>"
        for p in panels)
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Benchsmith report: "
            f"{html.escape(model)}</title><style>{_CSS}</style></head><body><h1>Benchsmith report: "
            f"{html.escape(model)}</h1><ul class=\"about\">{meta}</ul><div class=\"grid\">{sections}</div>"
            f"</body></html>")


def write_reports(wh: Warehouse, models: Sequence[str], folder: Path, about: dict[str, dict[str, Any]]
                  ) -> dict[str, tuple[Path, list[Panel]]]:
    """Write `<model>.html` (and its plots) for each model, and `index.html`; model -> (page, panels)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for model in models:
        w = _Writer(folder / safe_name(model))
        panels = [panel(wh, model, w) for panel in PANELS]
        page = folder / f"{safe_name(model)}.html"
        page.write_text(render(model, about.get(model, {}), panels), encoding="utf-8")
        out[model] = (page, panels)
    links = "".join(f'<li><a href="{html.escape(p.name)}">{html.escape(m)}</a></li>' for m, (p, _) in out.items())
    (folder / "index.html").write_text(f"<!doctype html><html><head><meta charset=\"utf-8\"><title>Benchsmith "
                                       f"reports</title></head><body><h1>Benchsmith reports</h1><ul>{links}</ul>"
                                       f"</body></html>", encoding="utf-8")
    return out


@dg.asset(group_name=GROUP, kinds={"html"}, code_version="1",
          deps=["models", "muso_metrics", "waken_metrics", "ib_metrics", "s1_metrics"])
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
    metadata: dict[str, Any] = {"index": dg.MetadataValue.path(str(folder / "index.html"))}
    lines = []
    for model, (page, panels) in written.items():
        metadata[f"report_{safe_name(model)}"] = dg.MetadataValue.url(page.resolve().as_uri())
        empty = [f"{p.family}: {pl.title}" for p in panels for pl in p.plots if pl.file is None]
        lines.append(f"- [{model}]({page.resolve().as_uri()}): {sum(pl.file is not None for p in panels for pl in p.plots)}"
                     f" plots" + (f"; no data in {len(empty)} ({'; '.join(empty)})" if empty else ""))
    metadata["reports"] = dg.MetadataValue.md("\n".join(lines) or "_no evaluated models_")
    metadata["dagster/row_count"] = len(written)
    return dg.MaterializeResult(metadata=metadata)
