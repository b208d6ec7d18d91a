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
  stage-1 answer was wrong (algorithm 1); with `style_swap`, stage 1 again
  with the other stimulation style on the same items (section 5.4, table 4);
- `rtg_label`: stage 1 and stage 2 again, each with its own stimulation kept
  and an assigned label added after a reminder of the earlier mistake, for each
  misguiding rate M (the share of assigned labels that are wrong; appendix H),
  so the only change against the vanilla stages is the label;
- `rtg_rp`: stage 1 re-run with the stage-1 reasoning shown (RPC), for
  `rtg_rounds` - 1 rounds each reminded with the round before's reasoning
  (algorithm 3, TCR^(t) per round), and stage 2 with the stage-1 reasoning
  shown (CGR) (section 3.3);
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

import asyncio
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from configuration import Config, derived_seed
from evaluations.calls import AT_LEAST, AT_MOST, EXACT, Counts, Line, Protocol, Query, stored_or_configured
from llm_calls import CallRequest, CallResult
from validators import outcomes
from validators.judge import Judge, OptionsCase
from validators.outcomes import CALL_FAILED, JUDGE_FAILED, NEEDS_JUDGE, UNDECIDED
from validators.read import read_label, read_options
from validators.reply_text import LABELS, UNKNOWN, Reading, answer_part

if TYPE_CHECKING:  # annotations only: importing the ledger loads the HTTP client
    from llm_calls import Ledger, Session

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
# Stage 1's stimulation (section 4.1: concise, "basic error notifications without correction guidance",
# and detailed, "with structural and step-by-step guidance"; the paper's own texts, its appendix N, are not
# in the text we have). Every Vague Perception item gets the same notice: a solvable item answered Unknown
# (wrong) and an Unknown item answered Unknown with a failing explanation (the label right, the reasoning
# not). A notice that its Unknown "may be wrong" would push the Unknown items away from their correct label
# and lower TCR_u; one that told the two kinds apart would give the gold label away. So it names neither.
STIMULATION = {
    "concise": "Your earlier answer to this problem, or the reasoning behind it, may be wrong. Think again.\n\n",
    "detailed": ("Your earlier answer to this problem, or the reasoning behind it, may be wrong. Work through it "
                 "again:\n"
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
                  "B) Reasoning Gap: it understood the facts but failed to chain them to the {target}. "
                  "C) Excessive Caution: its reasoning was adequate but it declined to commit. Output only A, B or C.")
_ASKED = {"judging": "whether a hypothesis is True, False or Unknown given some facts",
          "choice": "to choose one option of a question given a context, or Unknown when the context does not decide"}
CAUSE = ("A model was asked {asked}, and answered Unknown. The correct label is {label}.\n\n{task}"
         "The model's reasoning:\n{reasoning}\n\nWhat mainly caused the wrong Unknown? " + _CAUSE_CHOICES)
# An unsolvable item in the vague-perception set answered Unknown, which is right, with an explanation
# that does not hold (paper 000, section 3.1): the cause is that of the failing explanation.
CAUSE_UNKNOWN = ("A model was asked {asked}, and answered Unknown, which is the correct label, but its explanation "
                 "of why {undecided} does not hold.\n\n{task}The model's reasoning:\n{reasoning}\n\n"
                 "What mainly caused the failing explanation? " + _CAUSE_CHOICES)


def cause_prompt(item: Item, reasoning: str) -> str:
    """Section 5.6's question to the judge, worded for the item's kind: a hypothesis (FLD, FOLIO) or
    a question with options (ScienceQA)."""
    kind = "choice" if item.choices else "judging"
    words = {"asked": _ASKED[kind], "task": task_text(item), "reasoning": reasoning, "label": item.label,
             "target": "answer" if item.choices else "hypothesis",
             "undecided": "the context does not decide one option" if item.choices
             else "the facts do not decide it"}
    return (CAUSE_UNKNOWN if item.label == "Unknown" else CAUSE).format(**words)


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
    got = read_options(reply, item.choices, unknown=True, single=True)
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


def reasoning_setting(t: int) -> str:
    """The setting of algorithm 3's round t (t >= 2): `reasoning` for the first re-run, as before."""
    return "reasoning" if t == 2 else f"reasoning:t={t}"


SWAPPED = "swapped"  # stage 1's setting with the other stimulation style (section 5.4, table 4)


def steps(baselines: Sequence[str], misguiding_rates: Sequence[float], ablation_temperature: float,
          rounds: int = 2, style_swap: bool = False) -> list[Step]:
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
    out += [Step(f"waken.stage1.{SWAPPED}", "items", AT_MOST)] if style_swap else []
    for rate in misguiding_rates:
        out += [Step(f"waken.rtg_label_stage1.M={rate:.3f}", "items", AT_MOST),
                Step(f"waken.rtg_label_stage2.M={rate:.3f}", "items", AT_MOST)]
    out += [Step(f"waken.rtg_rp_stage1.{reasoning_setting(t)}", "items", AT_MOST) for t in range(2, rounds + 1)]
    return out + [Step("waken.rtg_rp_stage2.reasoning", "items", AT_MOST),
                  Step(f"waken.ablation.T={ablation_temperature}", "items", AT_MOST)]


# The longest chain of dependent calls one item's flow makes (`reporting/plan.py` times it): the
# direct answer, the diagnosis, Remind-then-Guide's stage 1 and stage 2, each read by the judge.
FLOW_DEPTH = 8


class Pipeline:
    """One model on one dataset's items; `run` returns rows for `waken.outcomes`.

    Each item is one flow (`llm_calls/flows.py`) through algorithm 1: its direct answer, the
    diagnosis where that was Unknown, and for a Vague Perception item the stages, Remind-then-Guide,
    the ablation and the cause, each call as soon as the one it depends on is read. Each baseline of
    an item is a flow of its own. The one wait across items: Remind-then-Guide's assigned labels
    are drawn over the whole Vague Perception set (`assigned_labels`), so those stages start once
    every item's membership is known; the rest of the work keeps the endpoint busy meanwhile."""

    def __init__(self, ledger: Ledger, model: str, judge: str, items: Sequence[Item], temperature: float,
                 ablation_temperature: float, max_tokens: int, seed: int, rounds: int = 2,
                 style_swap: bool = False):
        self.ledger, self.model = ledger, model
        self.judge = Judge(ledger, judge, max_tokens=8)
        self.items = list(items)
        self.params = {"temperature": temperature, "max_tokens": max_tokens}  # `pipeline_params` in a run
        self.ablation_params = {"temperature": ablation_temperature, "max_tokens": max_tokens}
        self.seed = seed
        self.rounds = rounds  # T of algorithm 3
        self.style_swap = style_swap  # stage 1 with the other style too (table 4)
        self.declared: set[str] | None = None  # during `run`: the purposes `steps` declares

    # -- asking -----------------------------------------------------------------------

    async def ask(self, s: Session, conv: list[dict[str, str]], purpose: str, params: dict[str, Any] | None = None,
                  labels_only: bool = False, item: Item | None = None) -> Answer:
        """One call; its answer extracted (as True/False for `labels_only` questions, else by the
        item's answer format), the judge asked only when no keyword decided it."""
        if self.declared is not None and f"waken.{purpose}" not in self.declared:
            raise RuntimeError(f"waken.{purpose}: a call `steps` does not declare (the plan would not count it)")
        r = await s.ask(self.model, CallRequest(conv, params or self.params), f"waken.{purpose}")
        kind = None if labels_only else item
        a = Answer(r, (extract(kind, r.reply) if kind else read_label(r.reply)) if r.ok
                   else Reading(None, CALL_FAILED, r.error))
        if a.extraction.method == NEEDS_JUDGE:
            if kind is not None and kind.choices:
                v = await self.judge.read_option(s, OptionsCase(a.text, kind.choices, lettered=True, unknown=True),
                                                 "waken.judge")
                a.extraction = Reading(_choice_text(kind, v.answer), v.method, v.evidence) if v.answer is not None else v
            else:
                a.extraction = await self.judge.read_label(s, a.text, "waken.judge")
        if labels_only and a.label == "Unknown":
            a.extraction = Reading(None, NEEDS_JUDGE, "Unknown where only True/False was asked")
        return a

    def row(self, step: str, setting: str, item: Item, answer: Answer, outcome: str) -> dict[str, Any]:
        return {
            "model": self.model, "item_id": item.item_id, "sample_type": item.sample_type, "gold": item.label,
            "step": step, "setting": setting, "prediction": answer.label, "method": answer.extraction.method,
            "outcome": outcome, "reply": answer.result.reply, "call_key": answer.result.key,
            "error": answer.result.error or (answer.extraction.evidence if answer.failed else None),
        }

    @staticmethod
    def user(text: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": text}]

    # -- the protocol -------------------------------------------------------------------

    def run(self, misguiding_rates: Sequence[float], baselines: Sequence[str]) -> list[dict[str, Any]]:
        self.declared = {s.purpose for s in steps(baselines, misguiding_rates, self.ablation_params["temperature"],
                                                  self.rounds, self.style_swap)}
        vp = _Membership(self.items)

        def flows(s: Session) -> list:
            return ([self._item(s, it, vp, misguiding_rates) for it in self.items]
                    + [self.baseline(s, name, it) for name in baselines for it in self.items])

        return [r for rows in self.ledger.run_flows(flows) for r in rows]

    async def _item(self, s: Session, it: Item, vp: _Membership, rates: Sequence[float]) -> list[dict[str, Any]]:
        """Algorithm 1 for one item: direct, then (section 3.1) the item is in the Vague
        Perception set if it is solvable and answered Unknown, or unsolvable, answered Unknown, and
        its explanation fails the self-diagnosis; a member goes through the stages (3.2-3.3)."""
        try:
            direct = await self.ask(s, self.user(direct_prompt(it)), "direct", item=it)
            rows = [self.row("direct", "vanilla", it, direct, _outcome(it, direct))]
            member = it.sample_type == "s" and direct.label == "Unknown"
            if it.sample_type == "u" and direct.label == "Unknown":
                v = await self.ask(s, self.user((DIAGNOSIS_CHOICE if it.choices else DIAGNOSIS).format(
                    task=task_text(it), reasoning=direct.text)), "diagnosis", labels_only=True)
                fails = v.label == "False"
                rows.append(self.row("diagnosis", "vanilla", it, v, "explanation_fails" if fails else
                                     "explanation_holds" if v.label == "True" else
                                     v.extraction.method if v.failed else UNDECIDED))
                member = fails
        except BaseException as exc:
            vp.fail(exc)  # no member's Remind-then-Guide labels may be drawn without this item
            raise
        vp.decided(it, member)
        if member:
            rows += await self._member(s, it, direct, vp, rates)
        return rows

    async def _member(self, s: Session, it: Item, direct: Answer, vp: _Membership, rates: Sequence[float]
                      ) -> list[dict[str, Any]]:
        style = STIMULATION["detailed" if it.form == "fact" else "concise"]
        s1, s1_row = await self.stage(s, "stage1", "vanilla", it, style)
        told = STAGE2.format(previous=s1.label)
        # algorithm 3: stage 1 re-run with the reasoning stage 1 produced, T - 1 rounds; stage 2 likewise (CGR)
        stages = [self._reminded_rounds(s, it, style, s1)]
        if self.style_swap:  # section 5.4: the same item under the other style
            other = STIMULATION["concise" if it.form == "fact" else "detailed"]
            stages.append(self.stage(s, "stage1", SWAPPED, it, other))
        if converting_class(it.label, s1.label) == "FC":
            stages += [self.stage(s, "stage2", "vanilla", it, told),
                       self.stage(s, "rtg_rp_stage2", "reasoning", it, told + SHOW_REASONING.format(reasoning=s1.text))]
        if converting_class(it.label, s1.label) == "UC":
            stages.append(self.stage(s, "ablation", f"T={self.ablation_params['temperature']}", it, style,
                                     self.ablation_params))
        staged, guided, cause = await asyncio.gather(
            asyncio.gather(*stages), asyncio.gather(*(self._rtg_label(s, it, style, vp, rate) for rate in rates)),
            self.cause(s, it, direct))
        staged_rows = [row for x in staged for row in (x if isinstance(x, list) else [x[1]])]
        return [s1_row, *staged_rows, *(row for rows in guided for row in rows), cause]

    async def _reminded_rounds(self, s: Session, it: Item, style: str, s1: Answer) -> list[dict[str, Any]]:
        """Algorithm 3 (paper 000, appendix M): for t = 2..T, stage 1's prompt again with the previous
        round's reasoning shown, the stored reasoning updated each round; round 2 is RPC's re-run. A
        round whose call failed, or whose answer says nothing, ends the item's rounds (there is no
        reasoning to remind the next one with)."""
        rows, previous = [], s1
        for t in range(2, self.rounds + 1):
            a, row = await self.stage(s, "rtg_rp_stage1", reasoning_setting(t), it,
                                      style + SHOW_REASONING.format(reasoning=previous.text))
            rows.append(row)
            if a.failed or not a.text.strip():
                break
            previous = a
        return rows

    async def _rtg_label(self, s: Session, it: Item, style: str, vp: _Membership, rate: float
                         ) -> list[dict[str, Any]]:
        """Remind-then-Guide at misguiding rate M (appendix H): stage 1 with the assigned label, and
        stage 2 for the items it turned False."""
        setting = f"M={rate:.3f}"
        guide = REMIND_GUIDE.format(assigned=(await vp.labels(rate, self.seed))[it.item_id])
        g1, row = await self.stage(s, "rtg_label_stage1", setting, it, style + guide)
        if converting_class(it.label, g1.label) != "FC":
            return [row]
        return [row, (await self.stage(s, "rtg_label_stage2", setting, it, STAGE2.format(previous=g1.label) + guide))[1]]

    async def stage(self, s: Session, step: str, setting: str, it: Item, prefix: str,
                    params: dict[str, Any] | None = None) -> tuple[Answer, dict[str, Any]]:
        """One stage's call for an item: its answer and its `waken.outcomes` row (TC / FC / UC)."""
        a = await self.ask(s, self.user(prefix + task_text(it) + answer_format(it)), f"{step}.{setting}", params,
                           item=it)
        outcome = a.extraction.method if a.failed else converting_class(it.label, a.label)
        return a, self.row(step, setting, it, a, outcome)

    async def baseline(self, s: Session, name: str, it: Item) -> list[dict[str, Any]]:
        suffix = COT_SUFFIX if name == "cot" else ""
        prefix = CHOICE_EXAMPLE if name == "few_shot" and it.choices else BASELINE_PREFIX[name]
        conv = self.user(prefix + task_text(it) + answer_format(it) + suffix)
        a = await self.ask(s, conv, f"baseline.{name}", item=it)
        if name == "self_reflection" and a.result.ok:  # a second turn only where the first call was answered
            second = conv + [{"role": "assistant", "content": a.text},
                             {"role": "user", "content": REFLECT.replace(ANSWER_FORMAT, answer_format(it))}]
            a = await self.ask(s, second, "baseline.self_reflection.reflect", item=it)
        return [self.row("baseline", name, it, a, _outcome(it, a))]

    async def cause(self, s: Session, it: Item, direct: Answer) -> dict[str, Any]:
        """Section 5.6: the judge classifies the direct reasoning's cause."""
        r = await self.judge.pick_one(s, cause_prompt(it, direct.text), tuple(CAUSES), "waken.cause")
        cause = CAUSES[r.answer] if r.answer else (UNDECIDED if r.method != JUDGE_FAILED else r.method)
        return {
            "model": self.model, "item_id": it.item_id, "sample_type": it.sample_type, "gold": it.label,
            "step": "cause", "setting": "judge", "prediction": None, "method": r.method,
            "outcome": cause, "reply": r.evidence if r.method != JUDGE_FAILED else None,
            "call_key": r.call_key, "error": r.evidence if r.method == JUDGE_FAILED else None,
        }


class _Membership:
    """The Vague Perception set as the items' flows decide it: `labels(rate)` waits until every
    item is decided, then draws the assigned labels over the whole set (once per rate)."""

    def __init__(self, items: Sequence[Item]):
        self.items, self.left = list(items), len(items)
        self.members: set[str] = set()
        self.failed: BaseException | None = None
        self.ready = asyncio.Event()
        self._labels: dict[float, dict[str, str]] = {}
        if not self.left:
            self.ready.set()

    def decided(self, it: Item, member: bool) -> None:
        if member:
            self.members.add(it.item_id)
        self.left -= 1
        if self.left == 0:
            self.ready.set()

    def fail(self, exc: BaseException) -> None:
        self.failed = exc
        self.ready.set()

    async def labels(self, rate: float, seed: int) -> dict[str, str]:
        await self.ready.wait()
        if self.failed is not None:
            raise self.failed
        if rate not in self._labels:
            self._labels[rate] = assigned_labels([it for it in self.items if it.item_id in self.members], rate, seed)
        return self._labels[rate]


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
    items need two judge verifications per Unknown draft (more when drafts are rejected)."""
    w = cfg.waken
    declared = [s for s in steps(w.baselines, w.misguiding_rates, w.ablation_temperature, w.rtg_rounds, w.style_swap)
                if s.counted]
    out: list[Line] = []
    for name, c in counts.by_partition.items():
        src = counts.source[name]
        if c["scienceqa"] and counts.source[name].startswith("configuration"):
            # two questions per draft: with the cut context, and from the question and options alone
            out.append(Line("waken", cfg.judge, "waken.unknown_verification", 2 * c["drafts"], AT_LEAST, src, name))
        over = {"items": c["items"], "unknown": c["unknown"]}
        for model in cfg.evaluate:
            out += [Line("waken", model, s.purpose, over[s.over], s.kind, src, name, model) for s in declared]
            out.append(Line("waken", cfg.judge, "waken.cause", c["items"], AT_MOST, src, name, model))
            out.append(Line("waken", cfg.judge, "waken.judge", sum(over[s.over] for s in declared), AT_MOST, src,
                            name, model))
    return out


# what the cross-family code reads (configuration/families.py: Parts.protocol)
PROTOCOL = Protocol(planned_calls, planned_requests, flow_depth=FLOW_DEPTH)
