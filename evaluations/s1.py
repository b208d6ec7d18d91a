"""S1-Bench evaluation (paper 002, section 3) through the ledger; the construction loop that
builds the items is `generators/s1_construction.py`.

Evaluation: k samples at temperature 0.6, top_p 0.95, plus greedy; thinking and final answer
split at the end-of-thinking marker; the format type (table 9); correctness of the final answer
of well formatted replies (exact check or judge; see `evaluate`); tokens by one tokenizer for every
model (Qwen2.5's, section 3.2), the server's usage counts beside them; difficulty awareness of the first paragraph; thinking redundancy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from configuration import Config
from evaluations.calls import AT_MOST, EXACT, Counts, Line, Protocol, Query
from generators.s1 import built_subcategories, left_out_at_demo, load_registry
from generators.s1_construction import DISCRIMINATE, GENERATE, REDUCE, VALIDATE, programmatic_candidates
from llm_calls import CallRequest
from validators.judge import Judge
from validators.outcomes import CALL_FAILED, FAILED
from validators.s1 import count_tokens, difficulty_awareness, redundancy
from validators.s1_read import (
    FORMAT_TYPES,
    HIDDEN_REASONING,
    STANDARD_MARKERS,
    STRICT_FORMATS,
    UNREADABLE_FORMATS,
    check_answer,
    format_type,
)

if TYPE_CHECKING:  # annotations only: importing the ledger loads the HTTP client
    from llm_calls import Ledger

# -- evaluation ------------------------------------------------------------------------------------

EVALUATE = "s1.evaluate"  # the evaluation's calls (k samples and a greedy answer); its judge's add ".judge"


def evaluate(ledger: Ledger, model: str, items: Sequence[dict[str, Any]], judge: Judge, k: int, temperature: float,
             top_p: float, max_tokens: int, reasoning: bool = True,
             sweep: tuple[Sequence[float], int] | None = None,
             markers: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One row per (item, mode, sample): k top-p samples and one greedy answer.

    A reasoning model (`reasoning`, an LRM as the paper evaluates) is scored only on well
    formatted replies (section 3.2: "accuracy metrics only for responses with correct
    formatting"; an end-of-thinking marker separating the thinking from a non-empty answer,
    formats 100 / 101): the final answer is checked exactly or judged, and any other format is
    not correct and never sent to the judge (an endless reply, 301, is not read at all). A model
    that does not think first (the paper's validator LLMs, f-acc "–") is scored on its whole reply.
    A reply whose reasoning the API hid (counted in `reasoning_tokens`, no text: o4-mini, Claude,
    Gemini, Hunyuan-T1) is format `HIDDEN_REASONING` and well formatted when it has an answer: table 3
    prints f-acc 100.00 for those models. `markers` are the model's end-of-thinking markers
    (`models.<name>.end_of_thinking`; None: the authors' list, `validators.s1_read.STANDARD_MARKERS`).
    """
    standard = tuple(markers or STANDARD_MARKERS)
    plan, requests = evaluation_requests(items, k, temperature, top_p, max_tokens, sweep)
    results = ledger.complete(model, requests, purpose=EVALUATE)
    rows = []
    for (it, mode, s), r in zip(plan, results):
        hidden = r.reasoning_hidden
        if hidden:
            fmt, thinking, answer = HIDDEN_REASONING, "", (r.text or "").strip()
        else:
            fmt, thinking, answer = format_type(r.reply, r.finish_reason, standard) if r.ok else (None, "", "")
        if hidden:
            well = bool(answer) if r.ok else None
        else:
            well = (fmt in STRICT_FORMATS) if reasoning and r.ok else None
        target = answer if (well or not reasoning or hidden) else ""
        first = (thinking or r.text or "").strip().split("\n\n")[0]
        method = CALL_FAILED if not r.ok else ("malformed" if reasoning and not well and not hidden else None)
        rows.append({"model": model, "item_id": it["item_id"], "subcategory": it["subcategory"],
                     "category": it["category"], "language": it["language"], "mode": mode, "sample_index": s,
                     "format_type": fmt, "well_formatted": well, "has_thinking": bool(thinking),
                     "has_answer": bool(answer), "judged_part": "answer" if target else None,
                     "correct": False if method == "malformed" else None, "method": method,
                     "detail": r.error if not r.ok else (f"format {fmt}: not scored" if method == "malformed" else None),
                     "tokens": reply_tokens(r, fmt, thinking, answer), "completion_tokens": r.completion_tokens,
                     "finish_reason": r.finish_reason,
                     "difficulty_class": difficulty_awareness(first) if r.ok else None,
                     "redundancy": json.dumps(redundancy(thinking)) if thinking else None,
                     "reply": r.reply, "call_key": r.key, "_target": target, "_check": it["check_spec"],
                     "_question": it["question"], "_answer": it["answer"]})
    to_judge = [row for row in rows if row["method"] is None and json.loads(row["_check"]) is None and row["_target"]]
    verdicts = judge.grade([(row["_question"], row["_target"], row["_answer"]) for row in to_judge], EVALUATE)
    for row, v in zip(to_judge, verdicts):
        row["correct"], row["method"], row["detail"] = v.answer, v.method, v.evidence
    for row in rows:
        if row["method"] is None:
            check = json.loads(row["_check"])
            if check is not None:
                row["correct"], row["method"] = check_answer(row["_target"], check, row["_question"]), "exact"
            else:
                row["correct"], row["method"] = False, "empty"
        for key in ("_target", "_check", "_question", "_answer"):
            row.pop(key)
    return rows




def evaluation_requests(items: Sequence[dict[str, Any]], k: int, temperature: float, top_p: float, max_tokens: int,
                        sweep: tuple[Sequence[float], int] | None = None
                        ) -> tuple[list[tuple[dict[str, Any], str, int]], list[CallRequest]]:
    """(item, mode, sample) per request, and the requests: k top-p samples and one greedy answer per
    item, and table 2's sweep (n samples at each temperature, mode "t=<temperature>") when asked."""
    plan = [(it, "sample", s) for it in items for s in range(k)] + [(it, "greedy", 0) for it in items]
    if sweep is not None:
        temps, n = sweep
        plan += [(it, f"t={t}", s) for t in temps for it in items for s in range(n)]

    def params(mode: str) -> dict[str, Any]:
        if mode == "sample":
            return {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}
        if mode == "greedy":
            return {"temperature": 0.0, "max_tokens": max_tokens}
        return {"temperature": float(mode[2:]), "max_tokens": max_tokens}

    return plan, [CallRequest([{"role": "user", "content": it["question"]}], params(mode), s) for it, mode, s in plan]


def evaluation_args(cfg: Config, model: str) -> dict[str, Any]:
    """How `model` is evaluated (the asset passes these to `evaluate`): k, the sampling, the budget,
    whether it reasons, and table 2's temperature sweep for the models it names."""
    s = cfg.s1
    return {"k": s.k, "temperature": s.eval_temperature, "top_p": s.eval_top_p,
            "max_tokens": s.eval_max_tokens.at(cfg.scale), "reasoning": cfg.models[model].reasoning,
            "sweep": (s.temperatures, s.samples_per_temperature) if model in s.table2_models else None,
            "markers": cfg.models[model].end_of_thinking}


def planned_requests(cfg: Config, query: Query) -> Iterator[tuple[str, str, CallRequest]]:
    """(model, purpose, request) of every evaluation request over the stored accepted items; the
    construction's calls and the judge's carry replies. Nothing before the items are built."""
    items = query("SELECT item_id, question FROM s1.items ORDER BY item_id")
    for model in cfg.evaluate:
        a = evaluation_args(cfg, model)
        _, requests = evaluation_requests(items, a["k"], a["temperature"], a["top_p"], a["max_tokens"], a["sweep"])
        yield from ((model, EVALUATE, r) for r in requests)


def reply_tokens(r: Any, fmt: int | None = None, thinking: str = "", answer: str = "") -> int | None:
    """A reply's tokens as section 3.2 counts them, by one tokenizer, Qwen2.5's, for every model: the
    thinking part's plus the answer part's, the end-of-thinking and opening markers left out (the
    authors' `thinking_part_tokens + answering_part_tokens`, WYRipple/S1_Bench split_think_answer.py;
    a reply with no marker, 207 and 301, counts whole). Reasoning a provider hid cannot be counted so:
    its `reasoning_tokens` (the provider's count) are added to the answer's Qwen2.5 tokens."""
    if not r.ok:
        return None
    if r.reasoning_hidden:
        return count_tokens(r.reply or "") + (r.reasoning_tokens or 0)
    if fmt is None or fmt in (207, 301):
        return count_tokens(r.reply or "")
    return (count_tokens(thinking) if thinking else 0) + (count_tokens(answer) if answer else 0)


def metric_rows(model: str, responses: Sequence[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """Paper section 3.2 and appendix B, for all items, per category, per subcategory, per
    language and per language x category (table 5):

    - pass@1 (mean correctness over the k samples) and acc@k (share of items with all k samples
      correct); a malformed reply of a reasoning model counts as not correct, so f-acc bounds
      both, as in table 3; greedy accuracy likewise (table 8);
    - f-acc: the share of well formatted replies (formats 100 / 101), NULL for models that do not
      think first; strict / loose format rates and the rate of each format type (tables 19, 20);
    - mean response tokens, leaving out endless replies (format 301), as the paper does: counted
      with one tokenizer, Qwen2.5's, for every model (section 3.2; `mean_tokens`), the servers' own
      counts beside them (`mean_server_tokens`);
    - difficulty-awareness shares and mean redundancy per segment.

    `greedy_*` metrics are the same over the greedy answers. Unreadable judge verdicts count as not
    correct. Failed calls and failed judgements are not answers: they are left out of every
    denominator (acc@k counts only items whose k samples were all answered) and counted in
    `n_failed` beside each metric."""
    out: list[dict[str, Any]] = []
    scopes: dict[tuple[str, str], list[dict[str, Any]]] = {("all", "all"): list(responses)}
    for r in responses:
        scopes.setdefault(("category", r["category"]), []).append(r)
        scopes.setdefault(("subcategory", r["subcategory"]), []).append(r)
        scopes.setdefault(("language", r["language"]), []).append(r)
        scopes.setdefault(("language_category", f"{r['language']}:{r['category']}"), []).append(r)
    for (level, scope), every in sorted(scopes.items()):
        n_failed = sum(r.get("method") in FAILED for r in every)

        def put(metric: str, value: float | None, n: int, category: str = "-",
                level: str = level, scope: str = scope, n_failed: int = n_failed) -> None:
            out.append({"model": model, "level": level, "scope": scope, "metric": metric, "category": category,
                        "value": value, "n": n, "n_failed": n_failed})

        _scope_rows(put, [r for r in every if r.get("method") not in FAILED], k)
    return out


def _scope_rows(put: Callable[..., None], rows: Sequence[dict[str, Any]], k: int) -> None:
    """`metric_rows` of one scope, from its answered `rows`."""
    sampled = [r for r in rows if r["mode"] == "sample"]
    greedy = [r for r in rows if r["mode"] == "greedy"]
    by_item: dict[str, list[bool]] = {}
    for r in sampled:
        by_item.setdefault(r["item_id"], []).append(bool(r["correct"]))
    complete = {i: v for i, v in by_item.items() if len(v) == k}
    put("pass@1", sum(sum(v) / len(v) for v in by_item.values()) / len(by_item) if by_item else None, len(by_item))
    put(f"acc@{k}", sum(all(v) for v in complete.values()) / len(complete) if complete else None, len(complete))
    put("greedy_acc", sum(bool(r["correct"]) for r in greedy) / len(greedy) if greedy else None, len(greedy))
    for prefix, group in (("", sampled), ("greedy_", greedy)):
        judged = [r["well_formatted"] for r in group if r.get("well_formatted") is not None]
        put(f"{prefix}f-acc", sum(judged) / len(judged) if judged else None, len(judged))
        fmts = [r["format_type"] for r in group if r["format_type"] not in (None, HIDDEN_REASONING)]
        put(f"{prefix}strict_format", sum(f in STRICT_FORMATS for f in fmts) / len(fmts) if fmts else None, len(fmts))
        put(f"{prefix}loose_format", sum(f not in UNREADABLE_FORMATS for f in fmts) / len(fmts) if fmts else None,
            len(fmts))
        for f in FORMAT_TYPES if fmts else ():
            put(f"{prefix}format_type", sum(x == f for x in fmts) / len(fmts), len(fmts), str(f))
        for metric, column in (("mean_tokens", "tokens"), ("mean_server_tokens", "completion_tokens")):
            toks = [r[column] for r in group if r.get(column) is not None and r["format_type"] != 301]
            put(f"{prefix}{metric}", sum(toks) / len(toks) if toks else None, len(toks))
    hidden = [r["format_type"] == HIDDEN_REASONING for r in sampled if r["format_type"] is not None]
    if any(hidden):  # only where it happens: the tables of models that show their thinking stay as they were
        put("reasoning_hidden", sum(hidden) / len(hidden), len(hidden))
    _table2_rows(put, [r for r in rows if r["mode"].startswith("t=")])
    classes = [r["difficulty_class"] for r in sampled if r["difficulty_class"] is not None]
    for c in (1, 2, 3, 4):
        put("difficulty_awareness", sum(x == c for x in classes) / len(classes) if classes else None, len(classes), str(c))
    reds = [json.loads(r["redundancy"]) for r in sampled if r.get("redundancy") and json.loads(r["redundancy"])]
    for pos in range(max((len(x) for x in reds), default=0)):
        vals = [x[pos] for x in reds if len(x) > pos]
        put("redundancy", sum(vals) / len(vals), len(vals), str(pos + 2))


def _table2_rows(put: Callable[..., None], swept: Sequence[dict[str, Any]]) -> None:
    """Table 2: the mean accuracy over the samples at each temperature (its caption's "average
    accuracy"; Qwen2.5-14B's 99.74 and Qwen2.5-32B's 99.98 cannot be shares of 422 items with all
    10 samples right), over the items with every sample answered, and tokens over them all."""
    for mode in sorted({r["mode"] for r in swept}):
        per_item: dict[str, list[bool]] = {}
        for r in swept:
            if r["mode"] == mode:
                per_item.setdefault(r["item_id"], []).append(bool(r["correct"]))
        n = max((len(v) for v in per_item.values()), default=0)
        whole = [v for v in per_item.values() if len(v) == n]
        put("table2_acc", sum(sum(v) for v in whole) / (n * len(whole)) if whole else None, len(whole), mode[2:])
    if swept:
        toks = [r["tokens"] for r in swept if r.get("tokens") is not None and r["format_type"] != 301]
        put("table2_tokens", sum(toks) / len(toks) if toks else None, len(toks))

# -- the calls this protocol makes, declared for `--plan` (evaluations/calls.py) -------------------

def planned_calls(cfg: Config, query: Query) -> list[Line]:
    """Every call a run of this family makes, per step, model and partition (see `_planned_lines`)."""
    return _planned_lines(cfg, item_counts(cfg, query))


def item_counts(cfg: Config, query: Query) -> Counts:
    """Initial candidates (the programmatic ones made here exactly as the construction makes them,
    the LLM generators' as many as each is asked for) and the accepted items if stored."""
    s = cfg.s1
    reg = load_registry()
    subs = built_subcategories(cfg, reg)
    per = s.candidates_per_subcategory.at(cfg.scale)
    programmatic = sum(len(programmatic_candidates(cfg.seed, sub, s.languages, per)) for sub in subs) \
        if s.programmatic else 0
    generated = len(s.generators) * len(subs) * per * len(s.languages)
    stored = query("SELECT count(*) AS n FROM s1.items")
    items = stored[0]["n"] if stored and stored[0]["n"] else None
    return Counts({"construction": {"subcategories": len(subs), "programmatic": programmatic,
                                    "generated": generated},
                   "evaluation": {"items": items if items is not None else programmatic + generated}},
                  {"construction": "configuration",
                   "evaluation": "warehouse" if items is not None else "configuration (every candidate accepted)"})


def _planned_lines(cfg: Config, counts: Counts) -> list[Line]:
    """generators/s1_construction.py and evaluations/s1.py: one generation call per generator and
    subcategory; each candidate discriminated by every discriminator and validated by every
    validator (temperatures x samples), the judge grading answers without an exact check, the
    failures reduced and sent round again, for at most `max_rounds` reductions; then every
    accepted item answered k times plus once greedily by each evaluated model, the judge grading
    (with up to two rewrites) the answers that have no exact check."""
    s = cfg.s1
    c = counts.by_partition["construction"]
    candidates = c["programmatic"] + c["generated"]
    rounds = 1 + s.max_rounds.at(cfg.scale)
    validators = s.validators or [cfg.judge]
    per_validator = len(s.temperatures) * s.samples_per_temperature
    out = [Line("s1", g, GENERATE, c["subcategories"]) for g in s.generators]
    for d in s.discriminators:
        out.append(Line("s1", d, DISCRIMINATE, candidates * rounds, AT_MOST))
    for v in validators:
        # round 0: the candidates that discrimination and near-duplicate removal leave
        out.append(Line("s1", v, VALIDATE, candidates * per_validator, AT_MOST))
        if rounds > 1:
            out.append(Line("s1", v, f"{VALIDATE} (reduced)", candidates * per_validator * (rounds - 1), AT_MOST))
    out.append(Line("s1", s.reducer or cfg.judge, REDUCE, candidates * (rounds - 1), AT_MOST))
    out.append(Line("s1", cfg.judge, f"{VALIDATE}.judge", candidates * rounds * per_validator * len(validators), AT_MOST))
    items, src = counts.by_partition["evaluation"]["items"], counts.source["evaluation"]
    per_model = items * (s.k + 1)
    kind = EXACT if src == "warehouse" else AT_MOST
    for model in cfg.evaluate:
        calls = per_model + (items * per_validator if model in s.table2_models else 0)  # table 2's sweep
        out.append(Line("s1", model, EVALUATE, calls, kind, src, for_model=model))
        out.append(Line("s1", cfg.judge, f"{EVALUATE}.judge", 3 * calls, AT_MOST, src, for_model=model))
    return out


# what the cross-family code reads (configuration/families.py: Parts.protocol)
PROTOCOL = Protocol(planned_calls, planned_requests, left_out_at_demo=left_out_at_demo)
