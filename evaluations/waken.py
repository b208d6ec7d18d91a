"""The WakenLLM pipeline (paper 000, sections 3-5, appendix M) through the ledger.

Steps, each one ledger batch, each answer read by `validators.read`
(keywords first; the judge model only for replies no keyword decides):

- `direct`: every item once (Acc(Direct), section 5.5);
- `diagnosis`: Unknown items answered Unknown are asked to self-diagnose
  their explanation ("Output only True or False"); those judged False join
  the Vague Perception set with the solvable items answered Unknown (3.1);
- `stage1`: D_VP under stimulation, detailed for fact-based and concise for
  story-based datasets (section 4.1); outcomes TC / FC / UC (3.2);
- `stage2`: the stage-1 False Converting items (D_VP^2 = FC^1), told their
  stage-1 answer was wrong (algorithm 1);
- `rtg_label`: stage 1 and stage 2 again, each with its own stimulation kept
  and an assigned label added after a reminder of the earlier mistake, for each
  misguiding rate M (the share of assigned labels that are wrong; appendix H),
  so the only change against the vanilla stages is the label;
- `rtg_rp`: stage 1 re-run with the stage-1 reasoning shown (RPC, algorithm
  3) and stage 2 with the stage-1 reasoning shown (CGR) (section 3.3);
- `ablation`: the stage-1 Unknown Converting items through stage 1 again at
  the ablation temperature (section 5.3);
- `baseline`: CoT, few-shot, Tree-of-Thought (prompted), Plan-and-Solve and
  Self-Reflection over every item (section 5.5, table 6);
- `cause`: the judge model classifies each Vague Perception item's direct
  reasoning as Fact Understanding, Reasoning Gap or Excessive Caution (5.6).

Paper-to-code choices, written down once: the paper's prompt templates
(its appendix N) are not in the text we have, so the prompts below are ours,
built on the paper's descriptions; the vanilla stage 2 shows the stage-1 label
but not its reasoning (algorithm 1), and the `rtg_rp` stage 2 adds the
reasoning (algorithm 2), which is what CGR compares. A reply no keyword and no
judge decides is `undecided`, and a failed call is `call_failed`: neither is
ever read as Unknown, and both are left out of the converting classes (so the
stage denominators count decided items only; the counts are stored).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from configuration import Config, derived_seed
from evaluations.calls import AT_LEAST, AT_MOST, EXACT, Counts, Line, Query, stored_or_configured
from llm_calls import CallRequest, CallResult, Ledger
from validators import outcomes
from validators.judge import Judge, OptionsCase
from validators.outcomes import CALL_FAILED, JUDGE_FAILED, NEEDS_JUDGE, UNDECIDED
from validators.read import LABELS, UNKNOWN, Reading, answer_part, read_label, read_options

ANSWER_FORMAT = ('Explain your reasoning briefly, then finish with one line: "Final answer: True", '
                 '"Final answer: False" or "Final answer: Unknown".')
TASK = ("Read the facts and decide whether the hypothesis is True, False, or Unknown (Unknown: the facts "
        "neither prove nor disprove it).\n\nFacts:\n{context}\n\nHypothesis: {question}\n\n")
CHOICE_TASK = ("Read the context and answer the question with one of the options. If the context does not give "
               "enough information to choose exactly one option, answer Unknown.\n\nContext:\n{context}\n\n"
               "Question: {question}\nOptions:\n{options}\n\n")
CHOICE_FORMAT = ('Explain your reasoning briefly, then finish with one line: "Final answer: (letter)" or '
                 '"Final answer: Unknown".')
CHOICE_EXAMPLE = ("Example:\nContext: Ice melts when it is warmed.\nQuestion: What happens to ice in the sun?\n"
                  "Options:\n(A) it melts\n(B) it grows\nFinal answer: (A)\n\n")
DIAGNOSIS = ("{task}You answered Unknown and explained:\n{reasoning}\n\nDoes this explanation correctly show which "
             "information is missing, so that the facts can neither prove nor disprove the hypothesis? "
             "Output only True or False.")
DIAGNOSIS_CHOICE = ("{task}You answered Unknown and explained:\n{reasoning}\n\nDoes this explanation correctly show "
                    "which information is missing, so that no single option can be chosen from the context? "
                    "Output only True or False.")
STIMULATION = {
    "concise": "Your answer Unknown may be wrong: the facts may be enough to decide. Think again.\n\n",
    "detailed": ("Your answer Unknown may be wrong: the facts may be enough to decide. Work through it again:\n"
                 "1. List every fact that mentions the things in the hypothesis.\n"
                 "2. Apply each rule whose conditions are met, one step at a time, writing each new fact.\n"
                 "3. Stop when you reach the hypothesis or its negation.\n"
                 "4. Answer Unknown only if neither can be reached.\n\n"),
}
STAGE2 = "You answered {previous} to this problem before, and that answer was wrong. Reconsider carefully.\n\n"
REMIND_GUIDE = ("You answered this problem incorrectly before. A suggested label for it is: {assigned}. "
                "Decide for yourself.\n\n")
SHOW_REASONING = "Your earlier reasoning, which may contain flaws:\n{reasoning}\n\n"
BASELINE_PREFIX = {
    "cot": "",
    "few_shot": ("Examples:\nFacts: the cup is hot. if the cup is hot, then the cup is steaming.\n"
                 "Hypothesis: the cup is steaming\nFinal answer: True\n\n"
                 "Facts: the stone is heavy. everything that is heavy is not floating.\n"
                 "Hypothesis: the stone is floating\nFinal answer: False\n\n"
                 "Facts: the bell is loud.\nHypothesis: the bell is old\nFinal answer: Unknown\n\n"),
    "tree_of_thought": ("Imagine three careful reasoners working on this. Each writes one step of their reasoning "
                        "and shares it; any reasoner who finds a mistake in their path drops out. Continue until "
                        "they agree.\n\n"),
    "plan_and_solve": ("First understand the problem and devise a plan to solve it. Then carry out the plan step "
                       "by step.\n\n"),
    "self_reflection": "",
}
COT_SUFFIX = " Let's think step by step."
REFLECT = ("Review your answer above for mistakes in reading the facts or in the reasoning. Correct any you find. "
           + ANSWER_FORMAT)
_CAUSE_CHOICES = ("A) Fact Understanding: it misread or ignored facts. "
                  "B) Reasoning Gap: it understood the facts but failed to chain them to the hypothesis. "
                  "C) Excessive Caution: its reasoning was adequate but it declined to commit. Output only A, B or C.")
CAUSE = ("A model was asked whether a hypothesis is True, False or Unknown given some facts, and answered Unknown. "
         "The correct label is {label}.\n\n{task}The model's reasoning:\n{reasoning}\n\n"
         "What mainly caused the wrong Unknown? " + _CAUSE_CHOICES)
# An unsolvable item in the vague-perception set answered Unknown, which is right, with an explanation
# that does not hold (paper 000, section 3.1): the cause is that of the failing explanation.
CAUSE_UNKNOWN = ("A model was asked whether a hypothesis is True, False or Unknown given some facts, and answered "
                 "Unknown, which is the correct label, but its explanation of why the facts do not decide it does "
                 "not hold.\n\n{task}The model's reasoning:\n{reasoning}\n\n"
                 "What mainly caused the failing explanation? " + _CAUSE_CHOICES)
CAUSES = {"A": "fact_understanding", "B": "reasoning_gap", "C": "excessive_caution"}


@dataclass(frozen=True)
class Item:
    item_id: str
    form: str  # 'fact' or 'story'
    label: str  # True / False / Unknown, or for multiple choice the correct option's text / Unknown
    context: str
    question: str
    choices: tuple[str, ...] | None = None  # multiple choice (ScienceQA); None for True/False/Unknown

    @property
    def sample_type(self) -> str:
        return "u" if self.label == "Unknown" else "s"

    @property
    def label_space(self) -> tuple[str, ...]:
        return (*self.choices, "Unknown") if self.choices else LABELS


def options_text(choices: Sequence[str]) -> str:
    return "\n".join(f"({chr(65 + k)}) {c}" for k, c in enumerate(choices))


def task_text(item: Item) -> str:
    if item.choices:
        return CHOICE_TASK.format(context=item.context or "(none)", question=item.question,
                                  options=options_text(item.choices))
    return TASK.format(context=item.context, question=item.question)


def answer_format(item: Item) -> str:
    return CHOICE_FORMAT if item.choices else ANSWER_FORMAT


def extract(item: Item, reply: str | None) -> Reading:
    """The item's answer in a reply: True / False / Unknown, or for multiple choice the chosen
    option's text or Unknown (`validators.read`)."""
    if not item.choices:
        return read_label(reply)
    got = read_options(reply, item.choices, unknown=True)
    return Reading(_choice_text(item, got.answer), got.method, got.evidence)


def _choice_text(item: Item, answer: object) -> str | None:
    if answer == UNKNOWN:
        return "Unknown"
    if isinstance(answer, frozenset) and len(answer) == 1:
        return item.choices[next(iter(answer)) - 1]
    return None  # several options, or none: not an answer to a single-choice question


def _outcome(item: Item, a: Answer) -> str:
    """correct / wrong / undecided, or the failure (call_failed, judge_failed)."""
    if a.failed:
        return a.extraction.method
    return UNDECIDED if a.label is None else "correct" if a.label == item.label else "wrong"


def converting_class(gold: str, prediction: str | None) -> str:
    """TC, FC or UC (section 3.2); `undecided` without a prediction."""
    if prediction is None:
        return UNDECIDED
    if prediction == gold:
        return "TC"
    if prediction == "Unknown":
        return "UC"
    return "FC"


def assigned_labels(items: Sequence[Item], rate: float, seed: int) -> dict[str, str]:
    """Remind-then-Guide labels: round(rate * n) items, chosen by a seeded hash order, get a wrong
    label (one of the other two); the rest get the gold label. Lower rates make a subset wrong."""
    order = sorted(items, key=lambda it: derived_seed(seed, it.item_id))
    n_wrong = round(rate * len(order))
    out = {}
    for k, it in enumerate(order):
        if k < n_wrong:
            others = [x for x in it.label_space if x != it.label]
            pick = derived_seed(seed, it.item_id, "w") % len(others)
            out[it.item_id] = others[pick]
        else:
            out[it.item_id] = it.label
    return out


@dataclass
class Answer:
    result: CallResult
    extraction: Reading

    @property
    def label(self) -> str | None:
        return self.extraction.answer

    @property
    def text(self) -> str:
        """The reply without its thinking: what later prompts quote or continue from (a reasoning
        model's thinking is not fed back)."""
        return answer_part(self.result.text)[1]

    @property
    def failed(self) -> bool:
        return outcomes.failed(self.extraction.method)


def items_from_rows(rows: Sequence[dict[str, Any]]) -> list[Item]:
    """The pipeline's items from stored `waken.items` rows (the choices of multiple choice in `extra`)."""
    return [Item(r["item_id"], r["form"], r["label"], r["context"], r["question"],
                 tuple(json.loads(r["extra"]).get("choices") or ()) or None) for r in rows]


@dataclass(frozen=True)
class Step:
    purpose: str  # the ledger purpose of its calls
    over: str  # "items": one call per item at most; "unknown": per item labelled Unknown
    kind: str  # EXACT: made whatever the replies; AT_MOST: only for the items earlier replies select
    counted: bool = True  # False: the same requests as an earlier step, answered by the ledger from it


def steps(baselines: Sequence[str], misguiding_rates: Sequence[float], ablation_temperature: float) -> list[Step]:
    """Every call `Pipeline.run` makes with the evaluated model, in its order (sections 3.2 and 5,
    appendix H): the run refuses a purpose missing here, and `planned_calls` counts these.
    Self-reflection's first turn is the direct request itself (the ledger answers it from there);
    its reflection, the diagnosis, the stages, Remind-then-Guide and the ablation run only on the
    items the replies before them select."""
    out = [Step("waken.direct", "items", EXACT)]
    out += [Step(f"waken.baseline.{b}", "items", EXACT, counted=b != "self_reflection") for b in baselines]
    out += [Step("waken.baseline.self_reflection.reflect", "items", AT_MOST)] if "self_reflection" in baselines else []
    out += [Step("waken.diagnosis", "unknown", AT_MOST), Step("waken.stage1.vanilla", "items", AT_MOST),
            Step("waken.stage2.vanilla", "items", AT_MOST)]
    for rate in misguiding_rates:
        out += [Step(f"waken.rtg_label_stage1.M={rate:.3f}", "items", AT_MOST),
                Step(f"waken.rtg_label_stage2.M={rate:.3f}", "items", AT_MOST)]
    return out + [Step("waken.rtg_rp_stage1.reasoning", "items", AT_MOST),
                  Step("waken.rtg_rp_stage2.reasoning", "items", AT_MOST),
                  Step(f"waken.ablation.T={ablation_temperature}", "items", AT_MOST)]


class Pipeline:
    """One model on one dataset's items; every step returns rows for `waken.outcomes`."""

    def __init__(self, ledger: Ledger, model: str, judge: str, items: Sequence[Item], temperature: float,
                 ablation_temperature: float, max_tokens: int, seed: int):
        self.ledger, self.model = ledger, model
        self.judge = Judge(ledger, judge, max_tokens=8)
        self.items = list(items)
        self.params = {"temperature": temperature, "max_tokens": max_tokens}  # `pipeline_params` in a run
        self.ablation_params = {"temperature": ablation_temperature, "max_tokens": max_tokens}
        self.seed = seed
        self.rows: list[dict[str, Any]] = []
        self.declared: set[str] | None = None  # during `run`: the purposes `steps` declares

    # -- asking -----------------------------------------------------------------------

    def ask(self, convs: list[list[dict[str, str]]], purpose: str, params: dict[str, Any] | None = None,
            labels_only: bool = False, items: Sequence[Item] | None = None) -> list[Answer]:
        """One batch; each reply's answer extracted (as True/False for `labels_only` questions, else by
        the item's answer format), the judge asked only for replies no keyword decided."""
        if self.declared is not None and f"waken.{purpose}" not in self.declared:
            raise RuntimeError(f"waken.{purpose}: a call `steps` does not declare (the plan would not count it)")
        results = self.ledger.complete(self.model, [CallRequest(c, params or self.params) for c in convs],
                                       purpose=f"waken.{purpose}")
        kinds: list[Item | None] = list(items) if items is not None and not labels_only else [None] * len(convs)
        answers = [Answer(r, (extract(it, r.reply) if it else read_label(r.reply)) if r.ok
                          else Reading(None, CALL_FAILED, r.error)) for r, it in zip(results, kinds)]
        undecided = [(a, it) for a, it in zip(answers, kinds) if a.extraction.method == NEEDS_JUDGE]
        # the judge reads only what exact reading could not
        choice = [(a, it) for a, it in undecided if it is not None and it.choices]
        plain_ = [(a, it) for a, it in undecided if it is None or not it.choices]
        for (a, it), v in zip(choice, self.judge.read_options(
                [OptionsCase(a.text, it.choices, lettered=True, unknown=True) for a, it in choice], "waken.judge")):
            a.extraction = Reading(_choice_text(it, v.answer), v.method, v.evidence) if v.answer is not None else v
        for (a, _), v in zip(plain_, self.judge.read_labels([a.text for a, _ in plain_], "waken.judge")):
            a.extraction = v
        if labels_only:
            for a in answers:
                if a.label == "Unknown":
                    a.extraction = Reading(None, NEEDS_JUDGE, "Unknown where only True/False was asked")
        return answers

    def record(self, step: str, setting: str, item: Item, answer: Answer, outcome: str,
               extra: dict[str, Any] | None = None) -> None:
        self.rows.append({
            "model": self.model, "item_id": item.item_id, "sample_type": item.sample_type, "gold": item.label,
            "step": step, "setting": setting, "prediction": answer.label, "method": answer.extraction.method,
            "outcome": outcome, "reply": answer.result.reply, "call_key": answer.result.key,
            "error": answer.result.error or (answer.extraction.evidence if answer.failed else None), **(extra or {}),
        })

    @staticmethod
    def user(text: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": text}]

    # -- the steps ----------------------------------------------------------------------

    def direct(self) -> dict[str, Answer]:
        answers = self.ask([self.user(direct_prompt(it)) for it in self.items], "direct", items=self.items)
        for it, a in zip(self.items, answers):
            self.record("direct", "vanilla", it, a, _outcome(it, a))
        return dict(zip((it.item_id for it in self.items), answers))

    def vague_perception(self, direct: dict[str, Answer]) -> list[Item]:
        """Solvable items answered Unknown, and Unknown items answered Unknown whose explanation
        fails the self-diagnosis (algorithm 1, line 4)."""
        vp = [it for it in self.items if it.sample_type == "s" and direct[it.item_id].label == "Unknown"]
        unsure = [it for it in self.items if it.sample_type == "u" and direct[it.item_id].label == "Unknown"]
        verdicts = self.ask([self.user((DIAGNOSIS_CHOICE if it.choices else DIAGNOSIS).format(
            task=task_text(it), reasoning=direct[it.item_id].text)) for it in unsure], "diagnosis", labels_only=True)
        for it, v in zip(unsure, verdicts):
            fails = v.label == "False"
            self.record("diagnosis", "vanilla", it, v, "explanation_fails" if fails else
                        "explanation_holds" if v.label == "True" else v.extraction.method if v.failed else UNDECIDED)
            if fails:
                vp.append(it)
        return vp

    def stage(self, step: str, setting: str, items: Sequence[Item], prefix: dict[str, str],
              params: dict[str, Any] | None = None) -> dict[str, Answer]:
        answers = self.ask([self.user(prefix[it.item_id] + task_text(it) + answer_format(it)) for it in items],
                           f"{step}.{setting}", params, items=items)
        for it, a in zip(items, answers):
            outcome = a.extraction.method if a.failed else converting_class(it.label, a.label)
            self.record(step, setting, it, a, outcome)
        return dict(zip((it.item_id for it in items), answers))

    def run(self, misguiding_rates: Sequence[float], baselines: Sequence[str]) -> list[dict[str, Any]]:
        self.declared = {s.purpose for s in steps(baselines, misguiding_rates, self.ablation_params["temperature"])}
        direct = self.direct()
        vp = self.vague_perception(direct)
        style = {it.item_id: STIMULATION["detailed" if it.form == "fact" else "concise"] for it in vp}

        s1 = self.stage("stage1", "vanilla", vp, style)
        fc1 = [it for it in vp if converting_class(it.label, s1[it.item_id].label) == "FC"]
        told = {it.item_id: STAGE2.format(previous=s1[it.item_id].label) for it in fc1}
        self.stage("stage2", "vanilla", fc1, told)

        for rate in misguiding_rates:
            setting = f"M={rate:.3f}"
            labels = assigned_labels(vp, rate, self.seed)
            guide = {i: REMIND_GUIDE.format(assigned=lab) for i, lab in labels.items()}
            g1 = self.stage("rtg_label_stage1", setting, vp, {i: style[i] + guide[i] for i in guide})
            gfc1 = [it for it in vp if converting_class(it.label, g1[it.item_id].label) == "FC"]
            self.stage("rtg_label_stage2", setting, gfc1,
                       {it.item_id: STAGE2.format(previous=g1[it.item_id].label) + guide[it.item_id] for it in gfc1})

        # algorithm 3: stage 1 re-run with the reasoning stage 1 produced
        self.stage("rtg_rp_stage1", "reasoning", vp,
                   {it.item_id: style[it.item_id] + SHOW_REASONING.format(reasoning=s1[it.item_id].text) for it in vp})
        self.stage("rtg_rp_stage2", "reasoning", fc1,
                   {it.item_id: told[it.item_id] + SHOW_REASONING.format(reasoning=s1[it.item_id].text) for it in fc1})

        uc1 = [it for it in vp if converting_class(it.label, s1[it.item_id].label) == "UC"]
        self.stage("ablation", f"T={self.ablation_params['temperature']}", uc1, style, self.ablation_params)

        for name in baselines:
            self.baseline(name)
        self.causes(vp, direct)
        return self.rows

    def baseline(self, name: str) -> None:
        suffix = COT_SUFFIX if name == "cot" else ""

        def prefix(it: Item) -> str:
            return CHOICE_EXAMPLE if name == "few_shot" and it.choices else BASELINE_PREFIX[name]

        convs = [self.user(prefix(it) + task_text(it) + answer_format(it) + suffix) for it in self.items]
        answers = self.ask(convs, f"baseline.{name}", items=self.items)
        if name == "self_reflection":  # a second turn only where the first call was answered
            ok = [k for k, a in enumerate(answers) if a.result.ok]
            second = [convs[k] + [{"role": "assistant", "content": answers[k].text},
                                  {"role": "user", "content": REFLECT.replace(ANSWER_FORMAT, answer_format(self.items[k]))}]
                      for k in ok]
            reflected = self.ask(second, "baseline.self_reflection.reflect", items=[self.items[k] for k in ok])
            for k, r in zip(ok, reflected):
                answers[k] = r
        for it, a in zip(self.items, answers):
            self.record("baseline", name, it, a, _outcome(it, a))

    def causes(self, vp: Sequence[Item], direct: dict[str, Answer]) -> None:
        readings = self.judge.pick([(CAUSE_UNKNOWN if it.label == "Unknown" else CAUSE).format(
            label=it.label, task=task_text(it), reasoning=direct[it.item_id].text) for it in vp],
            tuple(CAUSES), "waken.cause")
        for it, r in zip(vp, readings):
            cause = CAUSES[r.answer] if r.answer else (UNDECIDED if r.method != JUDGE_FAILED else r.method)
            self.rows.append({
                "model": self.model, "item_id": it.item_id, "sample_type": it.sample_type, "gold": it.label,
                "step": "cause", "setting": "judge", "prediction": None, "method": r.method,
                "outcome": cause, "reply": r.evidence if r.method != JUDGE_FAILED else None,
                "call_key": r.call_key, "error": r.evidence if r.method == JUDGE_FAILED else None,
            })

# -- the calls this protocol makes, declared for `--plan` (evaluations/calls.py) -------------------

def direct_prompt(item: Item) -> str:
    """The direct pass's question (section 3.1): the task and the answer format."""
    return task_text(item) + answer_format(item)


def pipeline_params(cfg: Config) -> dict[str, Any]:
    """The pipeline's sampling (its `params`): the configured temperature and budget."""
    return {"temperature": cfg.waken.temperature, "max_tokens": cfg.waken.max_tokens.at(cfg.scale)}


def planned_requests(cfg: Config, query: Query) -> Iterator[tuple[str, str, CallRequest]]:
    """(model, purpose, request) of the direct pass over the stored items; every later step asks
    the items the replies select, with prompts that carry them. Nothing before the items are built."""
    items = items_from_rows(query("SELECT item_id, form, label, context, question, extra FROM waken.items "
                                  "ORDER BY dataset, item_id"))
    params = pipeline_params(cfg)
    for model in cfg.evaluate:
        for it in items:
            yield model, "waken.direct", CallRequest([{"role": "user", "content": direct_prompt(it)}], params)


def planned_calls(cfg: Config, query: Query) -> list[Line]:
    """Every call a run of this family makes, per step, model and partition (see `_planned_lines`)."""
    return _planned_lines(cfg, item_counts(cfg, query))


def item_counts(cfg: Config, query: Query) -> Counts:
    stored = {r["dataset"]: r for r in query(
        "SELECT dataset, count(*) AS n, count(*) FILTER (WHERE label = 'Unknown') AS u FROM waken.items GROUP BY ALL")}
    out, source = {}, {}
    for name, spec in cfg.waken.datasets.items():
        n = spec.count.at(cfg.scale)
        held = {"items": stored[name]["n"], "unknown": stored[name]["u"]} if name in stored else None
        out[name], source[name] = stored_or_configured(held, {"items": n, "unknown": n // 2, "drafts": n // 2},
                                                        "items")
        out[name]["scienceqa"] = int(spec.kind == "scienceqa")
    return Counts(out, source)


def _planned_lines(cfg: Config, counts: Counts) -> list[Line]:
    """evaluations/waken.py `Pipeline.run`: the direct answers and every baseline over all items
    (self-reflection a second turn each) are fixed; the diagnosis (Unknown items answered
    Unknown), the stages, Remind-then-Guide, the ablation and the cause classification run on the
    items the replies select, at most all of them; the judge reads at most every reply. ScienceQA
    items need one judge verification per Unknown draft (more when drafts are rejected)."""
    w = cfg.waken
    declared = [s for s in steps(w.baselines, w.misguiding_rates, w.ablation_temperature) if s.counted]
    out: list[Line] = []
    for name, c in counts.by_partition.items():
        src = counts.source[name]
        if c["scienceqa"] and counts.source[name].startswith("configuration"):
            out.append(Line("waken", cfg.judge, "waken.unknown_verification", c["drafts"], AT_LEAST, src, name))
        over = {"items": c["items"], "unknown": c["unknown"]}
        for model in cfg.evaluate:
            out += [Line("waken", model, s.purpose, over[s.over], s.kind, src, name, model) for s in declared]
            out.append(Line("waken", cfg.judge, "waken.cause", c["items"], AT_MOST, src, name, model))
            out.append(Line("waken", cfg.judge, "waken.judge", sum(over[s.over] for s in declared), AT_MOST, src,
                            name, model))
    return out
