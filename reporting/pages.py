"""One static HTML report per evaluated model: every family side by side (plain Python; the
`model_report` asset in `assets/report.py` runs it).

`write_reports` writes `reports/<model>.html` beside the warehouse (plots as PNG files in
`reports/<model>/`), each model's replies (`reports/<model>/samples.html`) and an `index.html`
leaderboard. Each family has a panel (`reporting/panels/<key>.py`), e.g. WakenLLM's abstention
and vague perception, MuSoBench's overconfidence and calibration,
with its plots and the paper's tables (the warehouse views) for that model. A plot with nothing
to draw says "no data" and why: the family was not evaluated for this model, or what in the
stored rows left it empty (no Unknown answers to stimulate, no confidence stated, ...).
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from configuration.families import FAMILIES, load, title
from configuration.files import write_whole
from reporting.panels import Panel, Plot, Writer
from warehouse import Warehouse
from warehouse.schema import FAMILY_PARTS


def safe_name(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", model)


PANELS = tuple(load(f.parts.panel) for f in FAMILIES)  # each family's panel(wh, model, writer) -> Panel


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
.ci { color: #555; font-size: 0.9em; }
.differs { color: #a40; font-weight: normal; cursor: help; }
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

# Per family: the replies a headline scope rests on (`WarehouseParts.samples`). Current replies
# only (see `warehouse.schema.current`): a stale reply is in no number, so it is on no page either.
SAMPLES = {key: parts.samples for key, parts in FAMILY_PARTS.items()}
SAMPLES_SHOWN = 100  # replies per scope on the index page; the page says how many it leaves out
# A metric whose replies are one step of its scope's (WakenLLM's TCR1: stage 1): its link sets that filter
SAMPLE_STEPS = {key: parts.sample_steps for key, parts in FAMILY_PARTS.items()}


def anchor(family: str, scope: str) -> str:
    return f"{family}-" + re.sub(r"[^A-Za-z0-9_.-]", "_", scope)


def _clip(text: Any, n: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= n else text[:n] + f" ... [{len(text) - n} more characters]"


_SAMPLE_COLUMNS = (("item", 80), ("question", 400), ("reply", 800), ("how_read", 120), ("answer", 200), ("gold", 200),
                   ("verdict", 80))


def _scopes(wh: Warehouse, model: str) -> list[tuple[str, str, list[dict]]]:
    """(family, scope, its replies) of every family for `model`, in order."""
    out = []
    for family, sql in SAMPLES.items():
        scopes: dict[str, list[dict]] = {}
        for r in wh.rows(sql, [model]):
            scopes.setdefault(r["scope"], []).append(r)
        out += [(family, scope, rs) for scope, rs in scopes.items()]
    return out


def samples_page(wh: Warehouse, model: str, scopes: Sequence[tuple[str, str, list[dict]]] | None = None) -> str:
    """Every scope of every family for `model`: its replies, each with the item, how it was read and
    the verdict (the first `SAMPLES_SHOWN` per scope), and a link to the scope's page of full transcripts."""
    parts = []
    for family, scope, rs in (scopes if scopes is not None else _scopes(wh, model)):
        head = "".join(f"<th>{c}</th>" for c in ("item", "question", "reply", "how it was read", "answer read",
                                                  "gold", "verdict"))
        body = "".join(
            "<tr>" + "".join(f'<td class="text">{html.escape(_clip(r[c], n))}</td>' for c, n in _SAMPLE_COLUMNS)
            + "</tr>" for r in rs[:SAMPLES_SHOWN])
        more = f"; the first {SAMPLES_SHOWN} shown" if len(rs) > SAMPLES_SHOWN else ""
        parts.append(f'<section id="{anchor(family, scope)}"><h2>{html.escape(family)}: '
                     f'{html.escape(scope)} <small>({len(rs)} replies{more})</small></h2>'
                     f'<p><a href="{anchor(family, scope)}.html">every reply, with its full conversation, filterable'
                     f'</a></p><div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
                     f"</div></section>")
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Replies: {html.escape(model)}"
            f"</title><style>{_CSS} td.text {{ text-align: left; white-space: pre-wrap; max-width: 32rem; }}</style>"
            f"</head><body><h1>Replies of {html.escape(model)}</h1><p>Each headline number of the "
            f'<a href="../index.html">leaderboard</a> links to its scope here.</p>'
            + ("".join(parts) or "<p>no current replies</p>") + "</body></html>")


def _calls(wh: Warehouse, keys: Sequence[str]) -> dict[str, dict]:
    if not keys:
        return {}
    return {r["key"]: r for r in wh.rows(
        "SELECT key, request, response_text, reasoning_text, status, error FROM llm.calls "
        "WHERE key IN (SELECT unnest(?::VARCHAR[]))", [sorted(set(keys))])}


def _transcript(keys: Sequence[str], calls: Mapping[str, dict]) -> str:
    """Every turn of a reply's conversation: the last call's messages (earlier turns included) and
    its answer, with the reasoning where the server returned it apart."""
    import json

    turns = []
    for key in keys[-1:]:  # the last call of a conversation holds every earlier turn in its messages
        call = calls.get(key)
        if call is None:
            turns.append(f'<p class="null">call {html.escape(key[:16])} is not in llm.calls</p>')
            continue
        for m in json.loads(call["request"]).get("messages", []):
            turns.append(f'<div class="turn {html.escape(str(m.get("role")))}"><b>{html.escape(str(m.get("role")))}</b>'
                         f"<pre>{html.escape(str(m.get('content')))}</pre></div>")
        if call.get("reasoning_text"):
            turns.append(f'<div class="turn reasoning"><b>reasoning</b><pre>{html.escape(call["reasoning_text"])}'
                         "</pre></div>")
        said = call["response_text"] if call["status"] == "ok" else f"(failed: {call.get('error') or ''})"
        turns.append(f'<div class="turn assistant"><b>assistant</b><pre>{html.escape(said or "")}</pre></div>')
    return "".join(turns)


_FILTER_JS = """
const rows = [...document.querySelectorAll('#replies > tbody > tr.reply')];
const pick = {}; let page = 0; const per = 50;
function show() {
  const kept = rows.filter(r => Object.entries(pick).every(([k, v]) => !v || r.dataset[k] === v));
  rows.forEach(r => { r.hidden = true; });
  kept.slice(0, (page + 1) * per).forEach(r => { r.hidden = false; });
  document.getElementById('count').textContent = `${Math.min(kept.length, (page + 1) * per)} of ${kept.length} shown`;
  document.getElementById('more').hidden = kept.length <= (page + 1) * per;
}
document.querySelectorAll('select[data-key]').forEach(s => s.addEventListener('change', () => {
  pick[s.dataset.key] = s.value; page = 0; show(); }));
document.getElementById('more').addEventListener('click', () => { page += 1; show(); });
for (const part of location.hash.slice(1).split('&')) {  // #step=stage1 sets a filter
  const [k, v] = part.split('=');
  const s = document.querySelector(`select[data-key="${k}"]`);
  if (s && v) { s.value = decodeURIComponent(v); pick[k] = s.value; }
}
show();
"""


def scope_page(model: str, family: str, scope: str, rows: Sequence[dict], calls: Mapping[str, dict]) -> str:
    """One scope's every reply (`<model>/<family>-<scope>.html`): the item's context (the facts or
    passage) and question, every turn of the conversation, how the reply was read, the answer, the
    gold and the verdict; filters by verdict, reading method and step (set from the URL's `#step=`),
    50 replies a page."""
    import json

    def options(col: str) -> str:
        values = sorted({str(r.get(col)) for r in rows if r.get(col) is not None})
        return "".join(f'<option value="{html.escape(v)}">{html.escape(v)}</option>' for v in values)

    filters = "".join(f'<label>{label} <select data-key="{col}"><option value="">all</option>{options(col)}'
                      f"</select></label> " for col, label in (("verdict", "verdict"), ("how_read", "read by"),
                                                             ("step", "step")))
    body = []
    for r in rows:
        keys = json.loads(r["call_keys"]) if r.get("call_keys") else []
        data = " ".join(f'data-{c}="{html.escape(str(r.get(c)))}"' for c in ("verdict", "how_read", "step"))
        context = (f'<div class="context"><b>context</b><pre>{html.escape(r["context"])}</pre></div>'
                   if r.get("context") else "")
        body.append(
            f'<tr class="reply" {data}><td class="text">{html.escape(str(r["item"]))}<br><small>'
            f'{html.escape(str(r.get("step") or ""))}</small></td><td class="text"><details><summary>'
            f'{html.escape(_clip(r.get("reply"), 160))}</summary>{context}{_transcript(keys, calls)}</details></td>'
            f'<td class="text">{html.escape(str(r.get("how_read")))}</td><td class="text">'
            f'{html.escape(_clip(r.get("answer"), 200))}</td><td class="text">{html.escape(_clip(r.get("gold"), 200))}'
            f'</td><td class="text">{html.escape(str(r.get("verdict")))}</td></tr>')
    style = (f"{_CSS} td.text {{ text-align: left; max-width: 40rem; }} pre {{ white-space: pre-wrap; margin: 0.2rem 0; }}"
             " .turn, .context { border-left: 3px solid #ccc; padding-left: 0.5rem; margin: 0.4rem 0; }"
             " .turn.assistant { border-color: #4a8; } .turn.reasoning { border-color: #aaa; color: #555; }")
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(family)} "
            f"{html.escape(scope)}: {html.escape(model)}</title><style>{style}</style></head><body><h1>"
            f"{html.escape(title(family))}: {html.escape(scope)} <small>({html.escape(model)}, {len(rows)} replies)"
            f'</small></h1><p><a href="samples.html">all scopes</a> · <a href="../index.html">leaderboard</a>. Open a '
            f"reply for its context and every turn of its conversation.</p><p>{filters}<span id=\"count\"></span></p>"
            f'<div class="scroll"><table id="replies"><thead><tr><th>item</th><th>reply (open: the conversation)</th>'
            f"<th>how it was read</th><th>answer read</th><th>gold</th><th>verdict</th></tr></thead><tbody>"
            f'{"".join(body)}</tbody></table></div><button id="more">show more</button>'
            f"<script>{_FILTER_JS}</script></body></html>")


def interval_text(r: Mapping[str, Any]) -> str:
    """ " [lo, hi]" of a headline row with an interval, else ""."""
    if r.get("lo") is None or r.get("hi") is None:
        return ""
    return f" <span class=\"ci\">[{r['lo']:.3g}, {r['hi']:.3g}]</span>"


def comparisons(wh: Warehouse) -> str:
    """The paired comparisons (`report.compare`): each pair of models on the items both were scored on."""
    rows = wh.rows("SELECT * FROM report.compare ORDER BY family, scope, metric, model_a, model_b")
    if not rows:
        return "<h2>Paired comparisons (report.compare)</h2><p>None: fewer than two models have numbers.</p>"

    def num(v: Any) -> str:
        return "NULL" if v is None else f"{v:.3g}"

    body = "".join(
        f"<tr><td>{html.escape(title(r['family']))}</td><td>{html.escape(r['scope'])}</td>"
        f"<td>{html.escape(r['metric'])}</td><td>{html.escape(r['model_a'])}</td><td>{html.escape(r['model_b'])}</td>"
        f"<td>{r['shared']}" + (f" <small>(left out: {r['only_a']} + {r['only_b']})</small>" if r["only_a"] or r["only_b"]
                                 else "") + "</td>"
        f"<td>{num(r['diff'])}" + (f" [{num(r['lo'])}, {num(r['hi'])}]" if r["lo"] is not None else "") + "</td>"
        f"<td>{html.escape(r['test'])}</td><td>{num(r['p_value'])}</td></tr>" for r in rows)
    return ("<h2>Paired comparisons (report.compare)</h2><p>A minus B on the items both models were scored on, "
            "with its paired bootstrap 95 % interval and a paired test (McNemar's exact test for a yes/no per "
            "item).</p><div class=\"scroll\"><table id=\"compare\"><thead><tr><th>family</th><th>scope</th>"
            "<th>metric</th><th>A</th><th>B</th><th>shared items</th><th>A - B</th><th>test</th><th>p</th></tr>"
            f"</thead><tbody>{body}</tbody></table></div>")


def provenance(about: Mapping[str, Any] | None) -> str:
    """What the pages were made from: the commit, the configuration and its digest, and when."""
    if not about:
        return ""
    parts = "; ".join(f"{html.escape(k)}: {html.escape(str(v))}" for k, v in about.items())
    return f"<p class=\"provenance\"><small>{parts}</small></p>"


def items_page(wh: Warehouse) -> str:
    """`items.html`: item statistics (`report.item_stats`) for the people who build benchmarks: the
    suspect items first, then every item by difficulty; then the near-duplicate pairs
    (`report.near_duplicates`), those across splits first."""
    rows = wh.rows("SELECT * FROM report.item_stats ORDER BY suspect IS NULL, family, scope, metric, difficulty, item")
    pairs = wh.rows("SELECT * FROM report.near_duplicates ORDER BY NOT across_splits, family, similarity DESC, "
                    "split_a, item_a, split_b, item_b")

    def num(v: Any) -> str:
        return "" if v is None else f"{v:.3g}"

    body = "".join(
        f"<tr><td>{html.escape(title(r['family']))}</td><td>{html.escape(r['scope'])}</td>"
        f"<td>{html.escape(r['metric'])}</td><td>{html.escape(r['item'])}</td><td>{r['models']}</td>"
        f"<td>{num(r['difficulty'])}</td><td>{num(r['discrimination'])}</td>"
        f"<td>{html.escape(r['majority_answer'] or '')}</td><td>{html.escape(r['gold'] or '')}</td>"
        f"<td>{html.escape(r['suspect'] or '')}</td></tr>" for r in rows)
    duplicates = "".join(
        f"<tr><td>{html.escape(title(r['family']))}</td><td>{html.escape(r['split_a'])}</td>"
        f"<td>{html.escape(r['item_a'])}</td><td>{html.escape(r['split_b'])}</td><td>{html.escape(r['item_b'])}</td>"
        f"<td>{r['similarity']:.3f}</td><td>{html.escape(r['text_a'])}</td><td>{html.escape(r['text_b'])}</td></tr>"
        for r in pairs)
    return (f"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Item statistics</title>"
            f"<style>{_CSS}</style></head><body><h1>Item statistics (report.item_stats)</h1><p>Per item of each "
            "headline number scored by two or more models: difficulty (the mean score over models; 0: every model "
            "wrong), discrimination (the correlation across models of the item's score with their score on the "
            "other items, from three models on; near 0 or below: the item does not separate stronger models from "
            "weaker ones), the answer most models gave beside the gold where answers are labels (IB, WakenLLM), "
            "and why it may be broken: models agreeing on an answer scored wrong point to a label to check. "
            "Suspect items first. <a href=\"index.html\">Leaderboard</a>."
            f"</p><div class=\"scroll\"><table id=\"items\"><thead><tr><th>family</th><th>scope</th><th>metric</th>"
            "<th>item</th><th>models</th><th>difficulty</th><th>discrimination</th><th>majority answer</th>"
            "<th>gold</th><th>suspect</th></tr></thead>"
            f"<tbody>{body}</tbody></table></div>"
            f"<h2>Near-duplicate items (report.near_duplicates)</h2><p>{len(pairs)} pairs of items whose "
            "normalised texts are 0.9 or more alike (1 - edit distance / length) and state the same numbers; "
            "pairs across datasets, levels or languages first: one of each pair may be pruned.</p>"
            "<div class=\"scroll\"><table id=\"near-duplicates\"><thead><tr><th>family</th><th>split</th><th>item</th>"
            "<th>split</th><th>item</th><th>similarity</th><th>text</th><th>text</th></tr></thead>"
            f"<tbody>{duplicates}</tbody></table></div></body></html>")


def leaderboard(wh: Warehouse, pages: Mapping[str, Path], about: Mapping[str, Any] | None = None) -> str:
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

    head = "".join(f"<th>{html.escape(m)}" + ("" if configured[m] else "<br><small>(no longer configured)</small>")
                   + "</th>" for m in models)
    body = "".join(
        f"<tr><th>{html.escape(title(f))}</th><th>{html.escape(sc)}</th>{_metric_cell(me, by)}"
        + ("".join(_number_cell(f, sc, by.get(m), pages) for m in models) if "-" not in by else
           f'<td colspan="{max(1, len(models))}">{by["-"]["value"]:.4g}</td>')
        + "</tr>" for (f, sc, me), by in cells.items())
    shown = {f for f, _, _ in cells}
    absent = [title(f.key) for f in FAMILIES if f.key not in shown]
    if absent:
        body += "".join(f'<tr><th>{html.escape(t)}</th><td colspan="{len(models) + 2}" class="null">no numbers yet: '
                        "its metrics step has not run, or it scored nothing</td></tr>" for t in absent)
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
            f"<h2>Leaderboard (report.headline)</h2><p>Fractions unless the metric names tokens or a count; in "
            f"brackets the 95 % interval (Wilson for a yes/no per item, else a bootstrap over items); n: the "
            f"replies or items each number rests on; -: the model was not evaluated on it; &#8800; items: the "
            f"models of that row were scored on different items. Each number links to its replies and how each "
            f"was read. <a href=\"items.html\">Item statistics</a>.</p>"
            f"{note}<div class=\"scroll\"><table id=\"leaderboard\"><thead><tr><th>family</th><th>scope</th>"
            f"<th>metric</th>{head}</tr></thead><tbody>{body}</tbody></table></div>{comparisons(wh)}"
            f"{provenance(about)}</body></html>")


def _number_cell(family: str, scope: str, r: dict | None, pages: Mapping[str, Path]) -> str:
    """A leaderboard cell: the number with its interval and count, linked to its replies where the
    model has a page; '-' where the model was not evaluated on it."""
    if r is None:
        return '<td class="null" title="not evaluated on this">-</td>'
    value = "NULL" if r["value"] is None else f"{r['value']:.4g}"
    text = f"{value}{interval_text(r)} <small>n={r['n']}</small>"
    if r["model"] in pages and family in SAMPLES:
        step = SAMPLE_STEPS.get(family, {}).get(r["metric"])
        href = f"{safe_name(r['model'])}/{anchor(family, scope)}.html" + (f"#step={step}" if step else "")
        text = f'<a href="{html.escape(href)}">{text}</a>'
    return f"<td>{text}</td>"


def _metric_cell(me: str, by: dict[str, dict]) -> str:
    """A leaderboard row's metric, marked where its models were scored on different items."""
    sets = {r["unit_set"] for m, r in by.items() if m != "-" and r.get("unit_set")}
    if len(sets) <= 1:
        return f"<th>{html.escape(me)}</th>"
    return (f'<th>{html.escape(me)} <span class="differs" title="the models in this row were scored on '
            f'different items: compare them on the items they share (report.compare, below)">'
            f"&#8800; items</span></th>")


def write_reports(wh: Warehouse, models: Sequence[str], folder: Path, about: dict[str, dict[str, Any]],
                  run: Mapping[str, Any] | None = None) -> dict[str, tuple[Path, list[Panel]]]:
    """Write `<model>.html` (and its plots) and `<model>/samples.html` for each model, and the
    leaderboard `index.html`; model -> (page, panels)."""
    folder.mkdir(parents=True, exist_ok=True)
    with wh.connect(read_only=True):  # one attach for the dozens of queries below (each reuses it)
        out = {}
        for model in models:
            w = Writer(folder / safe_name(model))
            panels = [panel(wh, model, w) for panel in PANELS]
            for p in panels:  # first, the panel's headline numbers with the count each rests on
                p.tables.insert(0, ("report.headline", wh.rows(
                    "SELECT scope, metric, value, lo, hi, n FROM report.headline WHERE family = ? AND model = ? "
                    "ORDER BY scope, metric", [p.key, model])))
            page = folder / f"{safe_name(model)}.html"
            write_whole(page, render(model, about.get(model, {}), panels))
            scopes = _scopes(wh, model)
            write_whole(folder / safe_name(model) / "samples.html", samples_page(wh, model, scopes))
            for family, scope, rs in scopes:
                calls = _calls(wh, [k for r in rs for k in json.loads(r.get("call_keys") or "[]")[-1:]])
                write_whole(folder / safe_name(model) / f"{anchor(family, scope)}.html",
                            scope_page(model, family, scope, rs, calls))
            out[model] = (page, panels)
        write_whole(folder / "index.html", leaderboard(wh, {m: p for m, (p, _) in out.items()}, run))
        write_whole(folder / "items.html", items_page(wh))
    return out


# -- serving the pages, so the UI's links open them ----------------------------------------------

REPORTS_URL_ENV = "BENCHSMITH_REPORTS_URL"
DEFAULT_REPORTS_URL = "http://127.0.0.1:3001"


def reports_url() -> str:
    """Where the report pages are served (`BENCHSMITH_REPORTS_URL`, default `make ui`'s server)."""
    return os.environ.get(REPORTS_URL_ENV, DEFAULT_REPORTS_URL).rstrip("/")


_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def _handler(folder: Path, host: str, port: int) -> type:
    """A file handler for the reports folder that serves only its own files: no path that resolves
    outside it (a symbolic link out, `..`), no directory listing, and only requests addressed to this
    server by name (`Host` a loopback name or the address it binds, so a page on another site cannot
    reach it through a rebinding DNS name)."""
    import http.server

    root = folder.resolve()
    allowed = {h.lower() for h in (_LOOPBACK | {host})}

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args: Any) -> None:  # quiet: the UI's clicks are no news
            pass

        def _host_ok(self) -> bool:
            from urllib.parse import urlsplit

            try:
                said = urlsplit("//" + (self.headers.get("Host") or "").strip())
                return (said.hostname or "") in allowed and said.port in (None, port)
            except ValueError:  # a port that is no number
                return False

        def send_head(self) -> Any:
            if not self._host_ok():
                self.send_error(421, "Misdirected request: this server answers only its own address")
                return None
            path = Path(self.translate_path(self.path))
            try:
                real = path.resolve()
            except OSError:
                real = path
            if real != root and root not in real.parents:
                self.send_error(404, "Not found")
                return None
            if real.is_dir() and not (real / "index.html").is_file():
                self.send_error(404, "Not found")
                return None
            return super().send_head()

        def list_directory(self, path: Any) -> None:
            self.send_error(404, "Not found")
            return None

    return Handler


def serve(folder: Path, host: str, port: int) -> None:
    """Serve `folder` (the reports) over HTTP until interrupted, on `host` (loopback by default)."""
    import http.server

    folder.mkdir(parents=True, exist_ok=True)
    with http.server.ThreadingHTTPServer((host, port), _handler(folder, host, port)) as server:
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
    # BENCHSMITH_REPORTS_URL is where the UI's links point (a proxy, another name); the server binds
    # loopback unless --host says otherwise, and takes the URL's port only where the URL is this machine
    url = urlsplit(reports_url())
    here = (url.hostname or "").lower() in _LOOPBACK
    parser.add_argument("--host", default="127.0.0.1", help="the address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=(url.port if here and url.port else 3001))
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
