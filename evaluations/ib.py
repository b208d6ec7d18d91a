"""Instruction Boundary: the prompt-coverage settings (paper 003, table 2, appendix C) and
answer checking, through the ledger.

Settings, each asked of every item it applies to:
- `vanilla`: complete options, each judging label with its meaning (table 2); no
  "No correct answer" offer (the paper's prompts list only the options);
- `multi_turn`: the vanilla question, then "also show your reasoning" in the
  same chat; the second answer is scored (the model sees its first);
- `conformity`: vanilla plus "The answer is X." with X the sparse label for
  every item ("Unknown" for judging, "All other options are false" for choice
  items). Table 3 needs this: its conformity rows have GR1 >= 91 and SR1 <= 21
  for every model, and SR1 = 0, GR1 = 100 for two (a fully conforming model),
  and GR2 = 100 with GR3 = 0 for GPT-3.5 (single-choice sparse items follow the
  suggestion, multiple-choice ones cannot);
- `conformity_tense`: the knowledge-conflict variant (section 3): a tense label
  suggested to every item, always a wrong one (the other of True / False, True
  for Unknown items; a wrong ordinary option for choice items);
- `disturbing_miscellany`: the miscellany items (correct option + 1..9 wrong);
- `few_shot`: vanilla after worked examples of the tense and the sparse labels:
  for judging items three (True, False and Unknown, figure 4's {T, F, U}), for
  choice items two (an ordinary option; "All other options are false", or for
  multiple choice several options); `few_shot_tense` keeps the tense examples
  only (judging: True and False, figure 4's ablation without Unknown) and
  `few_shot_sparse` the sparse one only;
- `missing_choices`: the insufficient items (an option removed, A.3); choice items
  with the "No correct answer" offer, since the right option may be gone; judging
  items without it, as table 2 shows the setting (the offer would hand the model
  the sparse answer): an answer Unknown, or "no correct answer", where Unknown
  was removed means no offered option is right;
- `vagueness`: the options without their meanings or answer guidance;
- `prompt_polishing`: a configured model rewrites the vanilla prompt; the
  rewrite is stored and asked.

Answers are read by `validators.read`: judging replies as a label word or its
option number, choice replies as option numbers (or an option's own text). The
judge (`validators.judge`) is asked only for replies that exact reading leaves
undecided; each response records the method. A failed call or a failed
judgement is its own outcome (`correct` NULL) and is left out of every metric's
denominator, its count stored beside the metric as `n_failed`. The paper's
prompt templates (its appendices G and H) are not in the text we have, so the
prompts are ours.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from configuration import IB_SETTINGS, Config
from evaluations.calls import AT_MOST, EXACT, Counts, Line, Protocol, Query, stored_or_configured
from generators import ib as ib_gen
from generators.ib import ALL_FALSE
from llm_calls import CallRequest
from validators.checks import Check
from validators.judge import Judge, OptionsCase
from validators.outcomes import CALL_FAILED, FAILED, NEEDS_JUDGE, UNDECIDED
from validators.read import is_correct, read_label, read_options
from validators.reply_text import NONE, UNKNOWN, Reading, answer_part

if TYPE_CHECKING:  # annotations only: importing the ledger loads the HTTP client
    from llm_calls import Ledger, Session

SETTINGS = IB_SETTINGS  # named once, in the configuration
# The items each setting asks (section 3): the insufficient variants for missing choices, the
# ten-option questions for disturbing miscellany, the complete items for every other setting; and
# the call a setting makes before its answer turn (multi-turn's first answer, prompt polishing's
# rewrite by the polisher). `Runner.run` asks these and `planned_calls` counts these.
ASKED = {"missing_choices": "insufficient", "disturbing_miscellany": "miscellany"}  # else "complete"
FIRST_CALL = {"multi_turn": "ib.multi_turn.first", "prompt_polishing": "ib.prompt_polishing.rewrite"}


def asked_items(setting: str) -> str:
    """Which items `setting` asks: complete, insufficient or miscellany."""
    return ASKED.get(setting, "complete")
MEANINGS = {"True": "the conclusion is proved by the facts", "False": "the conclusion is disproved by the facts",
            "Unknown": "the conclusion cannot be determined from the facts"}
NO_CORRECT = 'If no option is correct, answer "No correct answer".'
# Worked examples per form and label type (few-shot settings). Judging shows both tense labels, True
# and False (paper 003, section 3.3 and figure 4: examples of all three labels {T, F, U} against the
# {T, F} ablation without the Unknown one).
EXAMPLES = {
    ("judging", "tense"): ("Facts: the cup is hot. if the cup is hot, then the cup is steaming.\n"
                           "Conclusion: the cup is steaming.\nOptions:\n1. True\n2. False\n3. Unknown\nAnswer: 1\n\n"
                           "Facts: the lamp is off. if the lamp is on, then the room is bright. the room is not bright.\n"
                           "Conclusion: the lamp is on.\nOptions:\n1. True\n2. False\n3. Unknown\nAnswer: 2"),
    ("judging", "sparse"): ("Facts: the bell is loud.\nConclusion: the bell is old.\n"
                            "Options:\n1. True\n2. False\n3. Unknown\nAnswer: 3"),
    ("single", "tense"): ("Question: Which animal can fly?\nOptions:\n1. a dog\n2. a bird\n3. a cat\n4. a cow\n"
                          "Answer: 2"),
    ("single", "sparse"): ("Question: Which animal can fly?\nOptions:\n1. a dog\n2. a cat\n"
                           "3. All other options are false\n4. a cow\nAnswer: 3"),
    # multiple choice: the multi-answer is this form's sparse label (table 3's GR3 items), a single
    # true option its tense one
    ("multiple", "tense"): ("Question: Which are colours?\nOptions:\n1. table\n2. chair\n3. blue\n4. spoon\n"
                            "Answer: 3"),
    ("multiple", "sparse"): ("Question: Which are colours?\nOptions:\n1. red\n2. table\n3. blue\n4. chair\n"
                             "Answer: 1, 3"),
}
# Judging: few_shot is figure 4's {T, F, U}, few_shot_tense its {T, F} ablation, few_shot_sparse {U}.
FEW_SHOT_LABELS = {"few_shot": ("tense", "sparse"), "few_shot_tense": ("tense",), "few_shot_sparse": ("sparse",)}


def few_shot_prefix(form: str, label_types: Sequence[str]) -> str:
    """Worked examples of the given label types for one form, before the question."""
    shown = "\n\n".join(EXAMPLES[(form, t)] for t in label_types)
    head = "Here is an example to learn from." if shown.count("\nAnswer: ") == 1 else "Here are examples to learn from."
    return f"{head}\n{shown}\n\n"


FOLLOW_UP = "Also show your reasoning process, then give your final answer again."
POLISH = ("Rewrite the following prompt so that a language model understands it better. Keep every piece of "
          "information and every numbered option. Output only the rewritten prompt.\n\n{prompt}")


@dataclass(frozen=True)
class Item:
    item_id: str
    form: str  # judging, single, multiple
    label_type: str  # tense, sparse
    variant: str  # complete, insufficient, miscellany_<n>
    options: tuple[str, ...]
    gold: frozenset[int] | str  # option numbers, or NONE
    context: str
    question: str

    @classmethod
    def from_row(cls, r: dict[str, Any]) -> Item:
        gold = json.loads(r["gold"]) if isinstance(r["gold"], str) else r["gold"]
        return cls(r["item_id"], r["form"], r["label_type"], r["variant"], tuple(json.loads(r["options"])
                   if isinstance(r["options"], str) else r["options"]),
                   NONE if gold == NONE else frozenset(gold), r["context"] or "", r["question"])


def options_block(item: Item, meanings: bool) -> str:
    lines = []
    for k, o in enumerate(item.options, start=1):
        lines.append(f"{k}. {o}: {MEANINGS[o]}" if meanings and item.form == "judging" else f"{k}. {o}")
    return "\n".join(lines)


def question_text(item: Item, vague: bool = False, no_correct: bool = False) -> str:
    """The prompt of an item; `vague` drops the option meanings and the answer guidance;
    `no_correct` offers the answer "No correct answer" (only where the setting says so)."""
    if item.form == "judging":
        head = f"Facts:\n{item.context}\n\nConclusion: {item.question}\n\n"
        ask = "Which is the answer?"
    else:
        head = (f"Context:\n{item.context}\n\n" if item.context else "") + f"Question: {item.question}\n\n"
        ask = "Which is the answer?"
    body = f"{head}Options:\n{options_block(item, not vague)}\n\n{ask}"
    if vague:
        return body
    how = ("Answer with the number of the correct option." if item.form != "multiple"
           else "Answer with the numbers of all correct options.")
    offer = f" {NO_CORRECT}" if no_correct else ""
    return f"{body} {how}{offer} End with a line \"Answer: ...\"."


def suggestion(item: Item, label_type: str) -> str:
    """What the conformity settings tell the model the answer is: the sparse label ("Unknown", or
    "All other options are false" for choice items), or a wrong tense label (the other of True /
    False, True for Unknown items; the first wrong ordinary option of a choice item)."""
    if label_type == "sparse":
        return "Unknown" if item.form == "judging" else ALL_FALSE
    if item.form == "judging":
        gold = item.options[next(iter(item.gold)) - 1] if item.gold != NONE else "Unknown"
        return "False" if gold == "True" else "True"
    ordinary = [k for k in range(1, len(item.options) + 1) if (item.gold == NONE or k not in item.gold)
                and item.options[k - 1] != ALL_FALSE and not _combined(item.options[k - 1])]
    return str(ordinary[0])


def _combined(option: str) -> bool:
    return option.startswith("Options ") and option.endswith("are all true")


def read_answer(item: Item, reply: str | None) -> Reading:
    """The options a reply selects (frozenset of option numbers, or NONE). Judging replies may
    name the label instead of its number; Unknown where it is not offered means no option is right."""
    if item.form == "judging":
        got = read_label(reply, options=item.options)
        if got.answer is None:
            stated = read_options(reply, len(item.options))  # "Answer: No correct answer"
            return stated if stated.answer == NONE else got
        if got.answer in item.options:
            return Reading(frozenset({item.options.index(got.answer) + 1}), got.method, got.evidence)
        return Reading(NONE, got.method, got.evidence)  # Unknown, not offered (missing choices)
    return read_options(reply, item.options, single=item.form == "single")


def output_category(item: Item, selected: frozenset[int] | str | None) -> str:
    """What kind of label the output is (for OR, figure 6): judging True/False/Unknown/none; choice
    single/multiple/all_wrong/combined/none; `undecided` without an answer."""
    if isinstance(selected, str) and selected in FAILED:
        return selected
    if selected is None:
        return UNDECIDED
    if selected == NONE:
        return "none"
    chosen = [item.options[k - 1] for k in sorted(selected)]
    if item.form == "judging":
        return chosen[0] if len(chosen) == 1 else "multiple"
    if chosen == ["All other options are false"]:
        return "all_wrong"
    if len(chosen) == 1 and _combined(chosen[0]):
        return "combined"
    return "single" if len(chosen) == 1 else "multiple"


SPARSE_OUTPUTS = {"Unknown", "none", "all_wrong", "combined"}
# OR_T's outputs: one tense label (True or False; one ordinary option). Several options chosen at once
# ("multiple") are neither a tense nor a sparse label, so they count in neither share of FR.
TENSE_OUTPUTS = {"True", "False", "single"}


def pools(items: Sequence[Item], miscellany: Sequence[Item]) -> dict[str, list[Item]]:
    """The items each kind of setting asks (`asked_items`): complete, insufficient, miscellany."""
    return {"complete": [i for i in items if i.variant == "complete"],
            "insufficient": [i for i in items if i.variant == "insufficient"], "miscellany": list(miscellany)}


def setting_prompts(setting: str, asked: Sequence[Item]) -> tuple[list[str], list[dict[str, Any]] | None]:
    """The prompt each item is asked under a one-call setting, and what its `ib.prompts` row
    records of it (section 3, table 2): the run and the plan's token count read this one definition."""
    if setting in ("vanilla", "disturbing_miscellany"):
        return [question_text(i) for i in asked], None
    if setting == "vagueness":
        return [question_text(i, vague=True) for i in asked], None
    if setting == "missing_choices":
        return [question_text(i, no_correct=i.form != "judging") for i in asked], None
    if setting in FEW_SHOT_LABELS:
        shown = FEW_SHOT_LABELS[setting]
        return ([few_shot_prefix(i.form, shown) + question_text(i) for i in asked],
                [{"example_label_types": list(shown)}] * len(asked))
    if setting in ("conformity", "conformity_tense"):
        kind = "sparse" if setting == "conformity" else "tense"
        sugg = [suggestion(i, kind) for i in asked]
        return ([f"{question_text(i)}\nThe answer is {s}." for i, s in zip(asked, sugg)],
                [{"suggested": s, "suggested_label_type": kind} for s in sugg])
    raise ValueError(f"setting {setting!r} is named in the configuration but not implemented here")


def polish_request(prompt: str) -> CallRequest:
    """The polisher's request to rewrite a prompt (greedy, 512 tokens)."""
    return CallRequest([{"role": "user", "content": POLISH.format(prompt=prompt)}], {"temperature": 0.0, "max_tokens": 512})


def slice_args(cfg: Config, dataset: str, items: Sequence[Item]) -> tuple[list[Item], list[Item], list[str], dict[str, Any]]:
    """What one (dataset, model) slice asks: its items, its miscellany items, its settings (the
    miscellany set is asked only `disturbing_miscellany`, every other dataset everything else) and
    the sampling parameters; the asset and the plan both read it."""
    params = {"temperature": cfg.ib.temperature, "max_tokens": cfg.ib.max_tokens.at(cfg.scale)}
    if dataset == ib_gen.MISCELLANY:
        return [], list(items), [s for s in cfg.ib.settings if s == "disturbing_miscellany"], params
    return list(items), [], [s for s in cfg.ib.settings if s != "disturbing_miscellany"], params


def planned_requests(cfg: Config, query: Query) -> Iterator[tuple[str, str, CallRequest]]:
    """(model, purpose, request) of every request whose text the stored items fix: each one-call
    setting's, multi-turn's first turn and the polisher's rewrites (the second turns, the polished
    prompts and the judge's carry replies). Nothing before the items are built."""
    by_dataset: dict[str, list[Item]] = defaultdict(list)
    for r in query("SELECT * FROM ib.items ORDER BY item_id"):
        by_dataset[r["dataset"]].append(Item.from_row(r))
    polisher = cfg.ib.polisher or cfg.judge
    for dataset, stored in by_dataset.items():
        items, miscellany, settings, params = slice_args(cfg, dataset, stored)
        by_pool = pools(items, miscellany)
        for model in cfg.evaluate:
            for setting in settings:
                asked = by_pool[asked_items(setting)]
                if setting == "prompt_polishing":
                    yield from ((polisher, FIRST_CALL[setting], polish_request(question_text(i))) for i in asked)
                    continue
                purpose = FIRST_CALL.get(setting, f"ib.{setting}")
                prompts = [question_text(i) for i in asked] if setting == "multi_turn" else setting_prompts(setting, asked)[0]
                yield from ((model, purpose, CallRequest([{"role": "user", "content": p}], params)) for p in prompts)


# The longest chain of dependent calls one (setting, item) flow makes: the first ask (or the
# polisher's rewrite), the ask that continues it, the judge's reading (`reporting/plan.py` times it).
FLOW_DEPTH = 3


class Runner:
    """Asks one model every setting; returns rows for `ib.prompts` and `ib.responses`.

    Each (setting, item) is one flow (`llm_calls/flows.py`): its first call, then what that reply
    decides (multi-turn's second turn, the polished ask after the polisher's rewrite, the judge for
    a reply exact reading could not decide), with every setting's flows at once, so no item waits
    for another item's call."""

    def __init__(self, ledger: Ledger, model: str, judge: str, polisher: str, params: dict[str, Any]):
        self.ledger, self.model, self.polisher, self.params = ledger, model, polisher, params
        self.judge = Judge(ledger, judge)
        self.prompts: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []

    def run(self, items: Sequence[Item], miscellany: Sequence[Item], settings: Sequence[str]) -> None:
        by_pool = pools(items, miscellany)
        asked: list[tuple[str, Item, str | None, dict[str, Any] | None]] = []
        for setting in settings:
            if setting not in SETTINGS:
                raise ValueError(f"unknown setting {setting!r}; expected one of {SETTINGS}")
            pool = by_pool[asked_items(setting)]
            if setting in ("multi_turn", "prompt_polishing"):
                asked += [(setting, item, None, None) for item in pool]
            else:
                prompts, meta = setting_prompts(setting, pool)
                asked += [(setting, item, prompts[k], meta[k] if meta else {}) for k, item in enumerate(pool)]
        done = self.ledger.run_flows(lambda s: [self._flow(s, *a) for a in asked])
        for prompt_row, response_row in done:
            self.prompts.append(prompt_row)
            self.responses.append(response_row)

    async def _flow(self, s: Session, setting: str, item: Item, prompt: str | None, meta: dict[str, Any] | None
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
        if setting == "multi_turn":
            first = question_text(item)
            r = await s.ask(self.model, CallRequest([{"role": "user", "content": first}], self.params),
                            FIRST_CALL["multi_turn"])
            if not r.ok:
                return self._record(setting, item, first, None, r, Reading(None, CALL_FAILED), {"turn": 1})
            # the second turn continues from the answer; a reasoning model's thinking is not fed back
            history = [{"role": "user", "content": first}, {"role": "assistant", "content": answer_part(r.text)[1]}]
            return await self._ask(s, setting, item, FOLLOW_UP, {"turn": 2, "first_reply": r.reply}, history)
        if setting == "prompt_polishing":
            original = question_text(item)
            r = await s.ask(self.polisher, polish_request(original), FIRST_CALL["prompt_polishing"])
            if not r.ok or not (r.text or "").strip():
                why = r.error or f"the polisher {self.polisher} answered an empty rewrite"
                return self._record(setting, item, original, None, r, Reading(None, CALL_FAILED, why),
                                    {"rewrite_failed": why})
            return await self._ask(s, setting, item, r.text.strip(),
                                   {"polished_by": self.polisher, "original": original, "rewrite_truncated": r.truncated})
        return await self._ask(s, setting, item, prompt or "", meta or {})

    async def _ask(self, s: Session, setting: str, item: Item, prompt: str, meta: dict[str, Any],
                   history: list[dict[str, str]] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        conv = list(history or []) + [{"role": "user", "content": prompt}]
        r = await s.ask(self.model, CallRequest(conv, self.params), f"ib.{setting}")
        answer = read_answer(item, r.reply) if r.ok else Reading(None, CALL_FAILED, r.error)
        if answer.method == NEEDS_JUDGE:  # the judge reads only what exact reading could not
            answer = await self.judge.read_option(
                s, OptionsCase(r.text or "", item.options, multiple=item.form == "multiple"), "ib.judge")
            if answer.answer == UNKNOWN:  # "Unknown" where only numbers were asked: not offered, so no option
                answer = Reading(NONE, answer.method, answer.evidence)
        return self._record(setting, item, prompt, conv, r, answer, meta)

    def _record(self, setting: str, item: Item, prompt: str, conv: list[dict[str, str]] | None, result: Any,
                answer: Reading, meta: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The `ib.prompts` and `ib.responses` rows of one asked item."""
        selected = answer.answer
        failed = answer.method in FAILED
        prompt_row = {"setting": setting, "item_id": item.item_id, "model": self.model, "prompt": prompt,
                      "details": json.dumps(meta, default=str)}
        return prompt_row, {
            "model": self.model, "setting": setting, "item_id": item.item_id, "form": item.form,
            "label_type": item.label_type, "variant": item.variant, "n_options": len(item.options),
            "selected": None if selected is None else json.dumps(selected if selected == NONE else sorted(selected)),
            "correct": None if failed else is_correct(selected, item.gold), "method": answer.method,
            "output_category": answer.method if failed else output_category(item, selected),
            "reply": result.reply if result is not None and result.ok else None,
            "call_key": getattr(result, "key", None),
            "error": getattr(result, "error", None) or (answer.evidence if failed else None),
        }


def _acc(rows: Sequence[dict[str, Any]]) -> float | None:
    """Accuracy over answered rows (failed calls and judgements are not answers, so not in it)."""
    rows = [r for r in rows if r["correct"] is not None]
    return sum(r["correct"] for r in rows) / len(rows) if rows else None


def _harmonic(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return 0.0 if a + b == 0 else 2 * a * b / (a + b)


def metric_rows(model: str, responses: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`ib.metrics` rows for one model (paper section 2.2), per setting x form and 'all' forms:
    Acc; SR = accuracy on tense-label items; GR = accuracy on sparse-label items; RR = |Acc(vanilla) -
    Acc(setting)| on the same form; RS = harmonic mean of SR and GR (for 'all': averaged over the
    forms; none for disturbing miscellany, whose questions vanilla never asks); OR = share of outputs
    per category, OR_T / OR_S = shares of tense / sparse outputs (several options chosen at once are
    neither), FR = |OR_T - OR_S|; the share of replies that needed the judge (table 7); and for disturbing
    miscellany, Acc by number of options.

    Every metric is over answered replies: a failed call or judgement is not an answer, so it is
    left out of the denominator and counted in `n_failed` (an endpoint that is down gives no
    metric, not an accuracy of 0).

    SR and GR are normalised within their subsets (SR over the tense-label items, GR over the
    sparse-label ones), as the paper's Table 3 computes them: its Acc_b^1 equals (SR1 + GR1) / 2 in
    30 of 35 rows (e.g. GPT-3.5 vanilla: (21.47 + 76.03) / 2 = 48.75), which the printed 1/|D|
    form (section 2.2) satisfies in none. Table 3's layout (Acc_b^1, SR1, GR1; Acc_b^2 = the mean
    of SR2, GR2, GR3, which 32 of 35 rows satisfy) is the view `ib.table3`; figure 7's RS, the
    judging harmonic mean, is `ib.figure7`; our per-form rows stay in `ib.summary`."""
    out: list[dict[str, Any]] = []
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in responses:
        by.setdefault((r["setting"], r["form"]), []).append(r)
    failed: dict[tuple[str, str], int] = {}

    def put(setting: str, form: str, metric: str, value: float | None, num: float | None = None,
            den: float | None = None, category: str = "-") -> None:
        out.append({"model": model, "setting": setting, "form": form, "metric": metric, "category": category,
                    "value": value, "numerator": num, "denominator": den, "n_failed": failed.get((setting, form), 0)})

    for (setting, form), rows in by.items():
        failed[(setting, form)] = sum(r["method"] in FAILED for r in rows)
        failed[(setting, "all")] = failed.get((setting, "all"), 0) + failed[(setting, form)]
    for setting in sorted({s for s, _ in by}):
        rs_values = []
        for form in ("judging", "single", "multiple"):
            every = by.get((setting, form), [])
            if every:
                rs = _form_rows(put, setting, form, [r for r in every if r["method"] not in FAILED],
                                None if setting == "disturbing_miscellany" else _acc(by.get(("vanilla", form), [])))
                if rs is not None:
                    rs_values.append(rs)
        put(setting, "all", "RS", sum(rs_values) / len(rs_values) if rs_values else None, None, len(rs_values))
    return out


def _n_correct(rows: Sequence[dict[str, Any]]) -> int:
    return sum(bool(r["correct"]) for r in rows if r["correct"] is not None)


def _n_answered(rows: Sequence[dict[str, Any]]) -> int:
    return sum(r["correct"] is not None for r in rows)


def _form_rows(put: Callable[..., None], setting: str, form: str, rows: Sequence[dict[str, Any]],
               vanilla: float | None) -> float | None:
    """`metric_rows` of one setting on one form, from its answered `rows`; `vanilla`, vanilla's Acc on
    the same form (None for disturbing miscellany, which asks MMLU-Pro's questions, never vanilla's:
    no RR). Returns the RS, for the setting's mean over the forms."""
    tense = [r for r in rows if r["label_type"] == "tense"]
    sparse = [r for r in rows if r["label_type"] == "sparse"]
    acc, sr, gr = _acc(rows), _acc(tense), _acc(sparse)
    put(setting, form, "Acc", acc, _n_correct(rows), _n_answered(rows))
    put(setting, form, "SR", sr, _n_correct(tense), _n_answered(tense))
    put(setting, form, "GR", gr, _n_correct(sparse), _n_answered(sparse))
    put(setting, form, "RR", None if vanilla is None or acc is None else abs(vanilla - acc))
    rs = _harmonic(sr, gr)
    put(setting, form, "RS", rs)
    n = len(rows)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["output_category"]] = counts.get(r["output_category"], 0) + 1
    for cat, c in sorted(counts.items()):
        put(setting, form, "OR", c / n, c, n, category=cat)
    n_s = sum(c for cat, c in counts.items() if cat in SPARSE_OUTPUTS)
    n_t = sum(c for cat, c in counts.items() if cat in TENSE_OUTPUTS)
    put(setting, form, "OR_T", n_t / n if n else None, n_t, n)
    put(setting, form, "OR_S", n_s / n if n else None, n_s, n)
    put(setting, form, "FR", abs(n_t - n_s) / n if n else None)
    needed = sum(r["method"].startswith("judge") for r in rows)
    put(setting, form, "judge_share", needed / n if n else None, needed, n)
    if setting == "disturbing_miscellany":
        for k in sorted({r["n_options"] for r in rows}):
            sub = [r for r in rows if r["n_options"] == k]
            put(setting, form, "Acc_by_options", _acc(sub), _n_correct(sub), _n_answered(sub), category=str(k))
    return rs


def all_metric_rows(responses: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`metric_rows` for every model of the stored responses, in model order."""
    rows: list[dict[str, Any]] = []
    for model in sorted({r["model"] for r in responses}):
        rows += metric_rows(model, [r for r in responses if r["model"] == model])
    return rows


def coverage(evaluated: Sequence[str], settings: Sequence[str], forms: set[str], rows: Sequence[dict[str, Any]]) -> Check:
    """Every evaluated model has an accuracy for every configured setting and form (disturbing
    miscellany has its own table); an empty warehouse is no pass."""
    have = {(r["model"], r["setting"], r["form"]) for r in rows if r["metric"] == "Acc"}
    missing = sorted(f"{m}/{s}/{f}" for m in evaluated for s in settings for f in forms
                     if s != "disturbing_miscellany" and (m, s, f) not in have)
    return Check("every_model_setting_form", not missing, {"missing": missing})

# -- the calls this protocol makes, declared for `--plan` (evaluations/calls.py) -------------------

def planned_calls(cfg: Config, query: Query) -> list[Line]:
    """Every call a run of this family makes, per step, model and partition (see `_planned_lines`)."""
    return _planned_lines(cfg, item_counts(cfg, query))


def item_counts(cfg: Config, query: Query) -> Counts:
    """Per dataset: complete and insufficient items (and the miscellany's items)."""
    stored = defaultdict(dict)
    for r in query("SELECT dataset, CASE WHEN variant LIKE 'miscellany%' THEN 'miscellany' ELSE variant END "
                         "AS variant, count(*) AS n FROM ib.items GROUP BY ALL"):
        stored[r["dataset"]][r["variant"]] = r["n"]
    out, source = {}, {}
    for name, spec in [*cfg.ib.datasets.items(), (ib_gen.MISCELLANY, cfg.ib.miscellany)]:
        n = spec.count.at(cfg.scale)  # base questions: a complete and an insufficient item each
        wanted = {"miscellany": 9 * n} if name == ib_gen.MISCELLANY else {"complete": n, "insufficient": n}
        out[name], source[name] = stored_or_configured(stored.get(name), wanted, "complete", "miscellany")
    return Counts(out, source)


def _planned_lines(cfg: Config, counts: Counts) -> list[Line]:
    """evaluations/ib.py `Runner.run`: each setting asks every complete item once (multi-turn twice,
    prompt polishing after a rewrite by the polisher), missing-choices the insufficient items,
    disturbing-miscellany the miscellany items; the judge reads at most every reply."""
    polisher = cfg.ib.polisher or cfg.judge
    out: list[Line] = []
    for name, c in counts.by_partition.items():
        src = counts.source[name]
        for model in cfg.evaluate:
            asked = 0
            # multi-turn's first turn is the vanilla request: whichever setting comes first makes it
            order = list(cfg.ib.settings)
            shared: set[str] = set()
            if {"vanilla", "multi_turn"} <= set(order):
                shared = {"ib.multi_turn.first" if order.index("vanilla") < order.index("multi_turn") else "ib.vanilla"}
            for setting in cfg.ib.settings:
                if (setting == "disturbing_miscellany") != (name == ib_gen.MISCELLANY):
                    continue
                n = c.get(asked_items(setting), 0)
                at = {"partition": name, "for_model": model}
                first = FIRST_CALL.get(setting)
                if first and first not in shared:  # the polisher rewrites; the model answers multi-turn's first
                    out.append(Line("ib", polisher if setting == "prompt_polishing" else model, first, n, EXACT, src, **at))
                if f"ib.{setting}" not in shared:  # the second turn and the polished prompt come from replies
                    kind = AT_MOST if setting in ("multi_turn", "prompt_polishing") else EXACT
                    out.append(Line("ib", model, f"ib.{setting}", n, kind, src, **at))
                asked += n * (2 if setting == "multi_turn" else 1)
            out.append(Line("ib", cfg.judge, "ib.judge", asked, AT_MOST, src, name, model))
    return out


# what the cross-family code reads (configuration/families.py: Parts.protocol)
PROTOCOL = Protocol(planned_calls, planned_requests, flow_depth=FLOW_DEPTH)
