"""Reading numbered-option answers (Instruction Boundary, paper 003 appendix E) and checking them.

`parse_options(reply, n)` finds the option numbers a reply commits to, in the
formats models produce: "1, 3", "1,3", "1 and 3", "1 3", a single "2",
"Option 2", "(2)", and letters ("Answer: B" is option 2, read by position,
never by a substring test). An explicit no-answer phrase ("no correct answer",
"none of the options", "uncertain", "unclear") is the answer `NONE`, but an
uncertainty word inside the reasoning does not by itself make an answer
"none" (a pitfall of the authors' code), and a digit that is not an option
number is not an answer. Steps, recorded as `method`: a final-answer line
first, then a reply that is only an answer, then the last concluding
sentence; anything else is `unparsed` (for the judge model).

`is_correct(selected, gold)` is strict set equality, independent of order:
partial answers and extra options are wrong (appendix E.1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NONE = "none"  # the answer "no option is correct"

_NO_ANSWER = re.compile(
    r"\b(?:no correct (?:answer|option)s?|none of (?:the|these|them|above)(?: options| answers)?(?: (?:is|are) correct)?|"
    r"no (?:option|answer) is correct|there is no correct|not (?:any|one) of the options|uncertain|unclear|"
    r"cannot (?:be )?determined?|can't determine)\b", re.I)
_FINAL = re.compile(r"(?:final\s+answer|answer|correct options?|the answer is|my answer|选项|答案)\s*(?:is|are)?\s*[:：]?\s*(.+)",
                    re.I)
_BOXED = re.compile(r"\\boxed\{([^{}]+)\}")
_CONCLUDING = re.compile(r"(?:therefore|thus|hence|so\b|consequently|in conclusion|overall)", re.I)
_MARKDOWN = re.compile(r"[*_`#>]+")
_SEP = r"(?:\s*(?:,|;|/|&|\band\b|\bor\b|和|、)\s*|\s+)"
_TOKEN = r"(?:option\s*|choice\s*|\()?\s*(?:\d{1,2}|(?<![A-Za-z])[A-Ja-j](?![a-zA-Z]))\s*\)?"
_LIST = re.compile(rf"^\s*(?:(?:options?|choices?)\s*)?({_TOKEN}(?:{_SEP}{_TOKEN})*)\s*[.。!]?\s*$", re.I)
_ONE = re.compile(r"(\d{1,2}|(?<![A-Za-z])[A-Ja-j](?![a-zA-Z]))")


@dataclass(frozen=True)
class OptionAnswer:
    selected: frozenset[int] | str | None  # option numbers (1-based), NONE, or None when undecided
    method: str  # final_answer, strict, conclusion, unparsed, empty, call_failed, judge
    evidence: str | None = None


def _options_in(text: str, n: int) -> frozenset[int] | str | None:
    """The answer a short answer text states: option numbers (letters by position), or NONE."""
    t = _MARKDOWN.sub("", text).strip().rstrip(".。!")
    t = re.sub(r"^(?:is|are)\s+", "", t, flags=re.I)
    if _NO_ANSWER.search(t) and not re.search(r"\d", t):
        return NONE
    m = _LIST.match(t)
    if not m:
        return None
    picked = set()
    for tok in _ONE.findall(m.group(1)):
        k = int(tok) if tok.isdigit() else ord(tok.upper()) - ord("A") + 1
        if not 1 <= k <= n:
            return None  # names an option that does not exist: not an answer
        picked.add(k)
    return frozenset(picked) if picked else None


def parse_options(reply: str | None, n_options: int) -> OptionAnswer:
    """The options a reply selects (see the module docstring)."""
    if reply is None or not reply.strip():
        return OptionAnswer(None, "empty")
    text = _MARKDOWN.sub("", reply)
    candidates = [m.group(1) for m in _BOXED.finditer(text)]
    for line in text.splitlines():
        m = _FINAL.search(line)
        if m:
            candidates.append(m.group(1))
    for cand in reversed(candidates):
        got = _options_in(cand, n_options)
        if got is not None:
            return OptionAnswer(got, "final_answer", cand.strip()[:200])
    got = _options_in(text, n_options)
    if got is not None:
        return OptionAnswer(got, "strict", text.strip()[:200])
    sentences = [s for s in re.split(r"(?<=[.!?。！？])\s+|\n+", text) if s.strip()]
    for s in reversed(sentences):
        if _CONCLUDING.search(s):
            tail = re.split(_CONCLUDING, s)[-1]
            tail = re.sub(r"^[\s,]*(?:the )?(?:answer|correct options?)?\s*(?:is|are)?\s*", "", tail, flags=re.I)
            got = _options_in(tail, n_options)
            if got is not None:
                return OptionAnswer(got, "conclusion", s.strip()[:200])
    return OptionAnswer(None, "unparsed")


def is_correct(selected: frozenset[int] | str | None, gold: frozenset[int] | str) -> bool:
    """Exact match: the same set of options (any order), or NONE for NONE."""
    if selected is None:
        return False
    return selected == gold
