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
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from assets.materialize_all import NAMES
from assets.metadata import draw_reliability, legend
from assets.resources import SettingsResource, WarehouseResource
from evaluations import scoring
from evaluations.muso import level_label
from warehouse import Warehouse
from warehouse.schema import current

GROUP = "report"


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

    def plot(self, name: str, title: str, reason: str, draw: Callable[[Any], None], note: str = "") -> Plot:
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
        return Plot(title, f"{self.folder.name}/{path.name}", note=note)


def _model_rows(wh: Warehouse, view: str, model: str) -> list[dict]:
    return wh.rows(f'SELECT * FROM {view} WHERE "Model" = ?', [model])


def _evaluated(wh: Warehouse, table: str, model: str) -> int:
    return wh.scalar(f"SELECT count(*) FROM {table} WHERE model = ?", [model])


def _not_run(family: str, table: str, select: str, wh: Warehouse, model: str) -> str:
    """Why a panel is empty: its replies are all stale, or the family never ran for the model."""
    stale = wh.scalar("SELECT sum(replies) FROM report.stale WHERE family = ? AND model = ?", [select, model])
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
        levels = sorted({(r["task"], r["level_lo"], r["level_hi"]) for r in scored})
        labels = [f"{t[:5]}\n{level_label(lo, hi)}" for t, lo, hi in levels]
        for k, (metric, colour) in enumerate((("recall", "tab:blue"), ("precision", "tab:orange"))):
            for x, lv in enumerate(levels):
                values = [r[metric] for r in scored if (r["task"], r["level_lo"], r["level_hi"]) == lv
                          and r[metric] is not None]
                at = x + 0.4 * k - 0.2
                if values:
                    ax.bar(at, scoring.mean(values), width=0.4, color=colour, label=metric if x == 0 else None)
                    ax.annotate(f"n={len(values)}", (at, scoring.mean(values)), textcoords="offset points",
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
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(560px, 100%), 1fr)); gap: 1.2rem; }
section { border: 1px solid #ccc; border-radius: 6px; padding: 0.8rem 1rem; min-width: 0; }
.scroll { overflow-x: auto; max-width: 100%; }
figure { margin: 0.5rem 0; }
figure img { max-width: 100%; height: auto; }
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
    return (f'<h4>{html.escape(name)}</h4><div class="scroll"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def _figure(p: Plot) -> str:
    if p.file is None:
        return (f'<figure class="plot empty"><figcaption>{html.escape(p.title)}</figcaption>'
                f'<p class="nodata"><strong>no data</strong>: {html.escape(p.reason)}</p></figure>')
    note = f'<p class="note">{html.escape(p.note)}</p>' if p.note else ""
    return (f'<figure class="plot"><img src="{html.escape(p.file)}" alt="{html.escape(p.title)}">'
            f"<figcaption>{html.escape(p.title)}</figcaption>{note}</figure>")


def render(model: str, about: dict[str, Any], panels: Sequence[Panel]) -> str:
    meta = "".join(f"<li>{html.escape(k)}: {html.escape(str(v))}</li>" for k, v in about.items())
    sections = "".join(
        f'<section id="{p.key}"><h2>{html.escape(p.title)} <small>({html.escape(p.family)})</small></h2>'
        + "".join(_figure(f) for f in p.plots) + "".join(_table(n, rows) for n, rows in p.tables) + "</section>"
        for p in panels)
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Benchsmith report: "
            f"{html.escape(model)}</title><style>{_CSS}</style></head><body><h1>Benchsmith report: "
            f"{html.escape(model)}</h1><p><a href=\"index.html\">leaderboard</a> &middot; <a href=\""
            f"{html.escape(safe_name(model))}/samples.html\">replies, and how each was read</a></p>"
            f"<ul class=\"about\">{meta}</ul><div class=\"grid\">{sections}</div>"
            f"</body></html>")


# -- the replies behind each headline number (the per-sample view) -------------------------------

# Per family: the replies a headline scope rests on (scopes named as `report.headline` names them),
# each with its item, the reply, how it was read and the verdict. Current replies only (see
# `warehouse.schema.current`): a stale reply is in no number, so it is on no page either.
SAMPLES = {
    "muso": f"""
        SELECT r.task || ' ' || r.paradigm || ' T=' || r.temperature AS scope, r.instance_id AS item, i.question,
               c.response_text AS reply,
               coalesce(r.parse_error, 'read ' || r.n_first || ' solutions (' || r.n_first_correct || ' right)')
                   || '; confidence: ' || coalesce(r.confidence_method, '-') AS how_read,
               CAST(r.answers_first AS VARCHAR) AS answer, i.reference_answer AS gold,
               'recall ' || coalesce(CAST(round(r.recall, 3) AS VARCHAR), '-') || ', confidence '
                   || coalesce(CAST(r.confidence AS VARCHAR), '-') AS verdict
        FROM {current('muso.responses', 'r')}
        JOIN muso.instances i ON i.partition_key = r.partition_key AND i.instance_id = r.instance_id
        LEFT JOIN llm.calls c ON c.key = json_extract_string(r.call_keys, '$[0]')
        WHERE r.model = ? AND r.variant = 'standard' ORDER BY scope, item""",
    "waken": f"""
        SELECT r.dataset AS scope, r.item_id AS item, i.question, r.reply, r.method AS how_read,
               r.prediction AS answer, r.gold, r.outcome AS verdict
        FROM {current('waken.outcomes', 'r')} JOIN waken.items i ON i.dataset = r.dataset AND i.item_id = r.item_id
        WHERE r.model = ? AND r.step = 'direct' AND r.setting = 'vanilla' ORDER BY scope, item""",
    "ib": f"""
        SELECT r.setting AS scope, r.item_id AS item, i.question, r.reply, r.method AS how_read,
               CAST(r.selected AS VARCHAR) AS answer, CAST(i.gold AS VARCHAR) AS gold,
               CASE WHEN r.correct THEN 'correct' WHEN NOT r.correct THEN 'wrong' ELSE r.output_category END AS verdict
        FROM {current('ib.responses', 'r')} JOIN ib.items i ON i.dataset = r.dataset AND i.item_id = r.item_id
        WHERE r.model = ? ORDER BY scope, item""",
    "s1": f"""
        SELECT 'all' AS scope, r.item_id || ' ' || r.mode || '#' || r.sample_index AS item, i.question, r.reply,
               r.method || ' (format ' || coalesce(CAST(r.format_type AS VARCHAR), '-') || ')' AS how_read,
               r.judged_part AS answer, i.answer AS gold,
               CASE WHEN r.correct THEN 'correct' WHEN NOT r.correct THEN 'wrong' ELSE r.method END AS verdict
        FROM {current('s1.responses', 'r')} JOIN s1.items i ON i.item_id = r.item_id
        WHERE r.model = ? ORDER BY scope, item""",
}
SAMPLES_SHOWN = 100  # replies per scope on a page; the page says how many it leaves out


def anchor(family: str, scope: str) -> str:
    return f"{family}-" + re.sub(r"[^A-Za-z0-9_.-]", "_", scope)


def _clip(text: Any, n: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= n else text[:n] + f" ... [{len(text) - n} more characters]"


def samples_page(wh: Warehouse, model: str) -> str:
    """Every scope of every family for `model`: its replies, each with the item, how it was read and
    the verdict (the first `SAMPLES_SHOWN` per scope)."""
    parts = []
    for family, sql in SAMPLES.items():
        rows = wh.rows(sql, [model])
        scopes: dict[str, list[dict]] = {}
        for r in rows:
            scopes.setdefault(r["scope"], []).append(r)
        for scope, rs in scopes.items():
            head = "".join(f"<th>{c}</th>" for c in ("item", "question", "reply", "how it was read", "answer read",
                                                      "gold", "verdict"))
            body = "".join(
                "<tr>" + "".join(f'<td class="text">{html.escape(_clip(r[c], n))}</td>' for c, n in (
                    ("item", 80), ("question", 400), ("reply", 800), ("how_read", 120), ("answer", 200),
                    ("gold", 200), ("verdict", 80))) + "</tr>" for r in rs[:SAMPLES_SHOWN])
            more = f"; the first {SAMPLES_SHOWN} shown" if len(rs) > SAMPLES_SHOWN else ""
            parts.append(f'<section id="{anchor(family, scope)}"><h2>{html.escape(family)}: '
                         f'{html.escape(scope)} <small>({len(rs)} replies{more})</small></h2>'
                         f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
                         f"</div></section>")
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Replies: {html.escape(model)}"
            f"</title><style>{_CSS} td.text {{ text-align: left; white-space: pre-wrap; max-width: 32rem; }}</style>"
            f"</head><body><h1>Replies of {html.escape(model)}</h1><p>Each headline number of the "
            f'<a href="../index.html">leaderboard</a> links to its scope here.</p>'
            + ("".join(parts) or "<p>no current replies</p>") + "</body></html>")


def leaderboard(wh: Warehouse, pages: Mapping[str, Path]) -> str:
    """`index.html`: every headline number of every model side by side, each with the count it rests
    on and a link to its replies; models no longer configured are marked, not hidden."""
    rows = wh.rows("SELECT * FROM report.headline ORDER BY family, scope, metric, model")
    configured = {}
    for r in rows:
        configured[r["model"]] = configured.get(r["model"], True) and bool(r["configured"])
    models = sorted((m for m in configured if m != "-"), key=lambda m: (not configured[m], m))
    cells: dict[tuple[str, str, str], dict[str, dict]] = {}
    for r in rows:
        cells.setdefault((r["family"], r["scope"], r["metric"]), {})[r["model"]] = r

    def cell(family: str, scope: str, r: dict | None) -> str:
        if r is None:
            return '<td class="null">-</td>'
        value = "NULL" if r["value"] is None else f"{r['value']:.4g}"
        text = f"{value} <small>n={r['n']}</small>"
        if r["model"] in pages and family in SAMPLES:
            href = f"{safe_name(r['model'])}/samples.html#{anchor(family, scope)}"
            text = f'<a href="{html.escape(href)}">{text}</a>'
        return f"<td>{text}</td>"

    head = "".join(f"<th>{html.escape(m)}" + ("" if configured[m] else "<br><small>(no longer configured)</small>")
                   + "</th>" for m in models)
    body = "".join(
        f"<tr><th>{html.escape(NAMES.get(f, f))}</th><th>{html.escape(sc)}</th><th>{html.escape(me)}</th>"
        + ("".join(cell(f, sc, by.get(m)) for m in models) if "-" not in by else
           f'<td colspan="{max(1, len(models))}">{by["-"]["value"]:.4g}</td>')
        + "</tr>" for (f, sc, me), by in cells.items())
    links = "".join(f'<li><a href="{html.escape(p.name)}">{html.escape(m)}</a> (<a href="'
                    f'{html.escape(safe_name(m))}/samples.html">replies</a>)</li>' for m, p in pages.items())
    gone = [m for m in models if not configured[m]]
    note = (f"<p>Models no longer configured: {html.escape(', '.join(gone))}. Their rows stay in the warehouse "
            "from an earlier configuration; no report page is rebuilt for them.</p>" if gone else "")
    stale = wh.rows("SELECT family, model, scope, replies FROM report.stale")
    if stale:
        note += ("<p>Stale replies, in no number below (made on items since rebuilt): "
                 + html.escape("; ".join(f"{r['family']} {r['model']} {r['scope']}: {r['replies']}" for r in stale))
                 + ".</p>")
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Benchsmith reports</title>"
            f"<style>{_CSS}</style></head><body><h1>Benchsmith reports</h1><ul>{links}</ul>"
            f"<h2>Leaderboard (report.headline)</h2><p>Fractions unless the metric names tokens or a count; n: the "
            f"replies or items each number rests on. Each number links to its replies and how each was read.</p>"
            f"{note}<div class=\"scroll\"><table id=\"leaderboard\"><thead><tr><th>family</th><th>scope</th>"
            f"<th>metric</th>{head}</tr></thead><tbody>{body}</tbody></table></div></body></html>")


def write_reports(wh: Warehouse, models: Sequence[str], folder: Path, about: dict[str, dict[str, Any]]
                  ) -> dict[str, tuple[Path, list[Panel]]]:
    """Write `<model>.html` (and its plots) and `<model>/samples.html` for each model, and the
    leaderboard `index.html`; model -> (page, panels)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for model in models:
        w = _Writer(folder / safe_name(model))
        panels = [panel(wh, model, w) for panel in PANELS]
        for p in panels:  # first, the panel's headline numbers with the count each rests on
            p.tables.insert(0, ("report.headline", wh.rows(
                "SELECT scope, metric, value, n FROM report.headline WHERE family = ? AND model = ? "
                "ORDER BY scope, metric", [p.key, model])))
        page = folder / f"{safe_name(model)}.html"
        page.write_text(render(model, about.get(model, {}), panels), encoding="utf-8")
        (folder / safe_name(model) / "samples.html").write_text(samples_page(wh, model), encoding="utf-8")
        out[model] = (page, panels)
    (folder / "index.html").write_text(leaderboard(wh, {m: p for m, (p, _) in out.items()}), encoding="utf-8")
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


# -- serving the pages, so the UI's links open them ----------------------------------------------

REPORTS_URL_ENV = "BENCHSMITH_REPORTS_URL"
DEFAULT_REPORTS_URL = "http://127.0.0.1:3001"


def reports_url() -> str:
    """Where the report pages are served (`BENCHSMITH_REPORTS_URL`, default `make ui`'s server)."""
    return os.environ.get(REPORTS_URL_ENV, DEFAULT_REPORTS_URL).rstrip("/")


def serve(folder: Path, host: str, port: int) -> None:
    """Serve `folder` (the reports) over HTTP until interrupted."""
    import functools
    import http.server

    folder.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    with http.server.ThreadingHTTPServer((host, port), handler) as server:
        print(f"serving {folder} at http://{host}:{port}/index.html", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    from urllib.parse import urlsplit

    from configuration import ConfigError, load_config

    parser = argparse.ArgumentParser(prog="python -m assets.report",
                                     description="Serve the per-model reports beside the configured warehouse.")
    parser.add_argument("--serve", action="store_true", required=True)
    url = urlsplit(reports_url())
    parser.add_argument("--host", default=url.hostname or "127.0.0.1")
    parser.add_argument("--port", type=int, default=url.port or 3001)
    args = parser.parse_args(argv)
    try:
        folder = load_config().warehouse_path().parent / "reports"
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    serve(folder, args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
