"""The one judge helper: a judge model reads what exact reading could not, through the ledger.

Every family asks the judge only for replies that `validators.read` left undecided
(`needs_judge`), and says only what kind of answer it expects. The judge has its
own token for "the reply gives no answer" (NO_ANSWER), so a reply without an
answer is never read as "no correct option" or Unknown. Outcomes, as the
returned reading's `method`:

- `judge`: the judge's reply read as an answer of the expected kind;
- `judge_no_answer`: the judge says the reply gives no answer (undecided);
- `judge_unreadable`: the judge's own reply could not be read (undecided);
- `judge_failed`: the judge call failed (retries spent); a failed judgement,
  never an answer, and retried on the next run (the ledger does not cache failures).

`grade` is S1-Bench's table-18 grading (JSON verdicts, with rewrite retries);
`decide` asks yes/no questions about items (WakenLLM's Unknown verification).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_calls import CallRequest
from validators.outcomes import JUDGE_FAILED
from validators.read import read_label, read_options
from validators.reply_text import NONE, Reading

if TYPE_CHECKING:  # annotations only: importing the ledger loads the HTTP client
    from llm_calls import Ledger

NO_ANSWER = "NO_ANSWER"

READ_LABEL = ("Here is a reply to a question whose answer is True, False or Unknown.\n\nReply:\n{reply}\n\n"
              "Which of True, False or Unknown does the reply give as its final answer? Output only one word: "
              f"True, False, Unknown, or {NO_ANSWER} if the reply gives no answer.")
READ_OPTIONS = ("A model answered a question with {numbering} options.\n\nOptions:\n{options}\n\nIts reply:\n{reply}\n\n"
                "Which option {what} does the reply give as its final answer? Output only {how}{unknown}, "
                f"or {NO_ANSWER} if the reply gives no answer.")
GRADE = (
    "**Question:**\n{question}\n\n**Model Answer:**\n{answer}\n\n**Ground Truth:**\n{ground_truth}\n\n"
    "Your task is to evaluate whether the model's answer is correct.\n"
    "An answer is considered correct as long as it contains the ground truth (regardless of how complex or "
    "detailed the description is).\n"
    "If there are parenthetical notes after the ground truth, then there may be multiple correct answers. In this "
    "case, the given answer is just one example, and any answer that meets the requirements specified in the notes "
    "can be considered correct.\n"
    "Additionally, some reasonably uncertain supplementary information is also considered appropriate, including "
    "more details, possibilities, and expanded discussion. You should focus more on whether the reply contains the "
    "correct answer.\n"
    'You need to output a standard JSON, providing your explanation of the evaluation in the "explain" field, and '
    'giving the evaluation result in the "result" field, where 1 means the answer is correct and 0 means it is '
    "incorrect.\n"
    'Your action should follow the given format: {{"explain": "", "result": 0/1}}'
)
GRADE_REWRITE = ('Your evaluation could not be read as JSON. Output only a JSON object of the form '
                 '{"explain": "...", "result": 0} or {"explain": "...", "result": 1}.')


@dataclass(frozen=True)
class OptionsCase:
    """A reply to a question with options: numbered 1..n (Instruction Boundary) or lettered (A)..
    (WakenLLM ScienceQA, where `unknown` also allows the answer Unknown)."""

    reply: str
    options: Sequence[str]
    lettered: bool = False
    unknown: bool = False
    multiple: bool = False


def parse_judgement(text: str | None) -> tuple[int | None, str | None]:
    """(result 0/1, explanation) from a table-18 judge reply; (None, why) when it is not readable."""
    if not text or not text.strip():
        return None, "empty reply"
    for m in re.finditer(r"\{[^{}]*\}", text, re.S):
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and obj.get("result") in (0, 1, "0", "1"):
            return int(obj["result"]), str(obj.get("explain", ""))
    # the paper's brace-less form: "explain": "...", "result": 1 (straight or curly quotes)
    m = re.search(r"[\"“”']result[\"“”']\s*:\s*[\"“”']?([01])\b", text)
    if m:
        e = re.search(r"[\"“”']explain[\"“”']\s*:\s*[\"“”'](.*?)[\"“”']\s*,", text, re.S)
        return int(m.group(1)), e.group(1) if e else None
    return None, "no JSON with a 0/1 result"


def options_prompt(c: OptionsCase) -> str:
    """The judge's question for one reply to a question with options."""
    if c.lettered:
        listing = "\n".join(f"({chr(65 + k)}) {o}" for k, o in enumerate(c.options))
        how = "the option letter"
    else:
        listing = "\n".join(f"{k}. {o}" for k, o in enumerate(c.options, start=1))
        how = "the option numbers separated by commas" if c.multiple else "the option number"
    unknown = (", or Unknown if it says the answer cannot be determined" if c.unknown
               else ", or NONE if it says no option is correct")
    return READ_OPTIONS.format(numbering="lettered" if c.lettered else "numbered", options=listing, reply=c.reply,
                               what="letter" if c.lettered else "number(s)", how=how, unknown=unknown)


def _options_reading(c: OptionsCase, reading: Reading) -> Reading:
    """The judge's reading of `c` as option(s): its reply read against the options."""
    if reading.method != "judge":
        return reading
    got = read_options(reading.answer, c.options, unknown=c.unknown).answer
    return (Reading(got, "judge", reading.evidence, reading.call_key) if got is not None
            else Reading(None, "judge_unreadable", reading.evidence, reading.call_key))


def _label(text: str) -> Any:
    return read_label(text).answer


def _no_answer(text: str | None) -> bool:
    return bool(re.search(r"\bNO[_ ]ANSWER\b", text or "", re.I))


class Judge:
    """A judge model behind the ledger (temperature 0). One instance per family run."""

    def __init__(self, ledger: Ledger, model: str, *, max_tokens: int = 16, grade_max_tokens: int = 128,
                 grade_retries: int = 2):
        self.ledger, self.model = ledger, model
        self.max_tokens, self.grade_max_tokens, self.grade_retries = max_tokens, grade_max_tokens, grade_retries

    def _request(self, prompt: str, max_tokens: int | None = None) -> CallRequest:
        return CallRequest([{"role": "user", "content": prompt}],
                           {"temperature": 0.0, "max_tokens": max_tokens or self.max_tokens})

    def _ask(self, prompts: Sequence[str], purpose: str, max_tokens: int | None = None) -> list:
        return self.ledger.complete(self.model, [self._request(p, max_tokens) for p in prompts], purpose=purpose)

    @staticmethod
    def _reading(r: Any, read_one: Callable[[str], Any]) -> Reading:
        said = (r.text or "").strip()[:200]
        if not r.ok:
            return Reading(None, JUDGE_FAILED, f"judge call failed: {r.error}", r.key)
        if _no_answer(r.text):
            return Reading(None, "judge_no_answer", said, r.key)
        got = read_one(r.text)
        return Reading(got, "judge", said, r.key) if got is not None else Reading(None, "judge_unreadable", said, r.key)

    def _readings(self, results: list, read_one) -> list[Reading]:
        return [self._reading(r, read_one) for r in results]

    def read_labels(self, replies: Sequence[str], purpose: str) -> list[Reading]:
        """True / False / Unknown as each reply's final answer, in the judge's reading."""
        if not replies:
            return []
        results = self._ask([READ_LABEL.format(reply=r) for r in replies], purpose)
        return self._readings(results, _label)

    async def read_label(self, session: Any, reply: str, purpose: str) -> Reading:
        """`read_labels` of one reply, inside a flow (`llm_calls/flows.py`)."""
        return self._reading(await session.ask(self.model, self._request(READ_LABEL.format(reply=reply)), purpose),
                             _label)

    def read_options(self, cases: Sequence[OptionsCase], purpose: str) -> list[Reading]:
        """The option(s) each reply chose: frozenset of option numbers, NONE, or "Unknown"."""
        if not cases:
            return []
        results = self._ask([options_prompt(c) for c in cases], purpose)
        return [_options_reading(c, self._reading(r, lambda t: t)) for c, r in zip(cases, results)]

    async def read_option(self, session: Any, case: OptionsCase, purpose: str) -> Reading:
        """`read_options` of one case, inside a flow (`llm_calls/flows.py`)."""
        r = await session.ask(self.model, self._request(options_prompt(case)), purpose)
        return _options_reading(case, self._reading(r, lambda t: t))

    def _ask_again(self, convs: list[list[dict[str, str]]], params: dict[str, Any], purpose: str,
                   read_batch: Callable[[list], list[Reading]], again: str, retries: int) -> list[list[Reading]]:
        """Every conversation asked; one whose reading is `judge_unreadable` is asked again in the
        same conversation (its reply, then `again`), up to `retries` times. Each one's readings, in order."""
        history: list[list[Reading]] = [[] for _ in convs]
        todo = list(range(len(convs)))
        for attempt in range(retries + 1):
            if not todo:
                break
            results = self.ledger.complete(self.model, [CallRequest(convs[i], params) for i in todo], purpose=purpose)
            retry = []
            for i, reading, r in zip(todo, read_batch(results), results):
                history[i].append(reading)
                if reading.method == "judge_unreadable" and attempt < retries:
                    convs[i] = convs[i] + [{"role": "assistant", "content": r.text or ""}, {"role": "user", "content": again}]
                    retry.append(i)
            todo = retry
        return history

    def decide(self, prompts: Sequence[str], purpose: str, max_tokens: int = 8,
               read: Callable[[str], bool | None] | None = None, retries: int = 0) -> list[Reading]:
        """Yes / No questions: answer True for yes, False for no, read by `read` (default: the
        first yes or no word). A reply that cannot be read is asked again, `retries` times, in
        the same conversation: "Answer with one word: Yes or No."; the evidence keeps every reply."""
        if not prompts:
            return []
        history = self._ask_again([[{"role": "user", "content": p}] for p in prompts],
                                  {"temperature": 0.0, "max_tokens": max_tokens}, purpose,
                                  lambda results: self._readings(results, read or read_yes_no), YES_NO_AGAIN, retries)
        return [Reading(h[-1].answer, h[-1].method, " / then: ".join(str(r.evidence) for r in h), h[-1].call_key)
                if len(h) > 1 else h[0] for h in history]

    def pick(self, prompts: Sequence[str], letters: Sequence[str], purpose: str, max_tokens: int = 8) -> list[Reading]:
        """Classification questions answered by a letter (WakenLLM's causes): the first of `letters`
        standing alone in the judge's reply."""
        if not prompts:
            return []
        return self._readings(self._ask(prompts, purpose, max_tokens), _letter_reader(letters))

    async def pick_one(self, session: Any, prompt: str, letters: Sequence[str], purpose: str,
                       max_tokens: int = 8) -> Reading:
        """`pick` of one question, inside a flow (`llm_calls/flows.py`)."""
        r = await session.ask(self.model, self._request(prompt, max_tokens), purpose)
        return self._reading(r, _letter_reader(letters))

    def grade(self, cases: Sequence[tuple[str, str, str]], purpose: str) -> list[Reading]:
        """S1-Bench table 18: per (question, model answer, ground truth), answer True (correct) or
        False; unreadable verdicts are asked to be rewritten up to `grade_retries` times."""
        def read_batch(results: list) -> list[Reading]:
            out = []
            for r in results:
                if not r.ok:
                    out.append(Reading(None, JUDGE_FAILED, f"judge call failed: {r.error}", r.key))
                    continue
                result, why = parse_judgement(r.text)
                out.append(Reading(bool(result), "judge", why or "", r.key) if result is not None
                           else Reading(None, "judge_unreadable", why, r.key))
            return out

        convs = [[{"role": "user", "content": GRADE.format(question=q, answer=a, ground_truth=g)}] for q, a, g in cases]
        history = self._ask_again(convs, {"temperature": 0.0, "max_tokens": self.grade_max_tokens}, f"{purpose}.judge",
                                  read_batch, GRADE_REWRITE, self.grade_retries)
        return [h[-1] for h in history]


def _letter_reader(letters: Sequence[str]) -> Callable[[str], str | None]:
    pattern = re.compile(rf"(?<![A-Za-z])({'|'.join(map(re.escape, letters))})(?![A-Za-z])")

    def letter(text: str) -> str | None:
        m = pattern.search(text or "")
        return m.group(1) if m else None

    return letter



NO_UNIQUE_ANSWER = (
    "Here is a context, a question and its options.\n\nContext:\n{context}\n\nQuestion: {question}\nOptions:\n"
    "{options}\n\nDoes the context give enough information to choose exactly one option? "
    "Answer with one word: Yes or No."
)
ALONE_UNIQUE_ANSWER = (
    "Here is a question and its options, with no context.\n\nQuestion: {question}\nOptions:\n{options}\n\n"
    "Do the question and options alone, with general knowledge, give enough information to choose exactly one "
    "option? Answer with one word: Yes or No."
)
YES_NO_AGAIN = "Answer with one word: Yes or No."
_YES_NO = re.compile(r"(?<![a-z])(yes|no)(?![a-z])", re.I)
_LEAD = re.compile(r"^[\s*_#>\"'`(\[]*(?:(?:final\s+)?answer\s*[:\-]\s*[*_\"']*)?(yes|no)(?![a-z])", re.I)
# "The context does not provide enough information ...", "there isn't sufficient information", "cannot be determined"
_NOT_ENOUGH = re.compile(
    r"(?:\b(?:not|no|never)\b|n[’']t\b)[^.?!\n]{0,40}?\b(?:enough|sufficient|adequate)\b[^.?!\n]{0,20}?"
    r"\b(?:information|context|detail|details|evidence|facts)\b"
    r"|\binsufficient\s+(?:information|context|evidence)\b"
    r"|\b(?:cannot|can[’']t|can\s+not|impossible\s+to)\s+(?:be\s+)?(?:determined?|decided?|chosen|choose|tell)\b", re.I)
_ENOUGH = re.compile(
    r"\b(?:gives|give|provides|provide|contains|contain|has|have|offers)\s+(?:enough|sufficient)\s+"
    r"(?:information|context|detail|details|evidence)\b", re.I)

_NEGATION = re.compile(r"\b(?:not|no|never)\b|n[’']t\b", re.I)


def read_yes_no(text: str | None) -> bool | None:
    """A yes / no verdict: the first yes or no word (True for yes)."""
    m = _YES_NO.search(text or "")
    return None if m is None else m.group(1).lower() == "yes"


def read_sufficiency(text: str | None) -> bool | None:
    """The verdict on "does the context give enough information to choose one option?", read as a
    careful grader would: a reply that opens with Yes or No (after markup, or "Answer:") says so;
    otherwise a reply that states the context does not give enough information (or that the
    answer cannot be determined) says No, and one that states it does says Yes; otherwise the
    first yes or no word. Both statements at once, or none, is unreadable (None)."""
    text = text or ""
    lead = _LEAD.match(text)
    if lead:
        return lead.group(1).lower() == "yes"
    negative = bool(_NOT_ENOUGH.search(text))
    positive = any(not _NEGATION.search(text[max(0, m.start() - 20):m.start()]) for m in _ENOUGH.finditer(text))
    if negative != positive:
        return positive
    if negative and positive:
        return None
    return read_yes_no(text)


def unknown_verifier(judge: Judge, retries: int = 1) -> Callable[[list[dict[str, Any]]], list[tuple[str, str]]]:
    """A verifier for WakenLLM's relabelled ScienceQA items (paper appendix C; the paper verified by
    hand): the judge is asked whether the modified context still determines one option, and whether
    the question and options alone do; each verdict read by `read_sufficiency`, and asked once more
    for one word when it cannot be read. Each draft gets (verdict, evidence): "accepted" (No to
    both: no unique answer remains), "rejected" (Yes to either),
    "unverified" (the judge's reply says neither; what it said is the evidence), or "failed" (the
    call failed, retries spent)."""

    def verify(drafts: list[dict[str, Any]]) -> list[tuple[str, str]]:
        prompts = []
        for d in drafts:
            options = "\n".join(f"({chr(65 + k)}) {c}" for k, c in enumerate(d["extra"]["choices"]))
            prompts.append(NO_UNIQUE_ANSWER.format(context=d["context"] or "(none)", question=d["question"],
                                                   options=options))
            prompts.append(ALONE_UNIQUE_ANSWER.format(question=d["question"], options=options))
        readings = judge.decide(prompts, "waken.unknown_verification", max_tokens=24, read=read_sufficiency,
                                retries=retries)
        return [_verdict(readings[k], readings[k + 1]) for k in range(0, len(readings), 2)]

    return verify


def _verdict(cut: Reading, alone: Reading) -> tuple[str, str]:
    """A draft's verdict from the judge's two readings: with the cut context, and from the question
    and options alone. Accepted only when neither gives a unique answer: an item whose question and
    options decide the answer is never Unknown, whatever was deleted."""
    def said(r: Reading) -> str:
        return f"judge {(r.call_key or '')[:12]}: {r.evidence!r}"

    if JUDGE_FAILED in (cut.method, alone.method):
        return "failed", next(r.evidence for r in (cut, alone) if r.method == JUDGE_FAILED) or "judge call failed"
    if alone.answer:
        return "rejected", f"the question and options alone decide the answer: {said(alone)}"
    if cut.answer:
        return "rejected", said(cut)
    if cut.answer is None or alone.answer is None:
        r = cut if cut.answer is None else alone
        return "unverified", f"the judge said neither yes nor no: {said(r)}"
    return "accepted", f"{said(cut)}; without context: {said(alone)}"



__all__ = ["Judge", "OptionsCase", "NO_ANSWER", "NONE", "parse_judgement", "read_sufficiency", "read_yes_no",
           "unknown_verifier"]
