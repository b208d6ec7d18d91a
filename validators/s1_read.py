"""S1-Bench's readers (paper 002): exact answer checks, discriminator verdicts and response formats.

The answer part of a reply is found by `validators/read.py`'s `answer_part`; this module checks
it against an item's exact check and sorts the reply into the paper's format types (table 9).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from validators.read import END_OF_THINKING, OPEN_THINKING, answer_part, plain

_HAN = re.compile(r"[\u4e00-\u9fff]")
_NEGATION_ZH = "不没非未否别"
_YES = {"en": re.compile(r"(?<![a-z])(yes|no|not)(?![a-z])", re.I), "zh": re.compile(r"(不是|不对|不|否|没有|是|对)")}


_CLAUSE_END = re.compile(r"[.;:!?。；：！？，,\n]")
_NEGATED_EN = re.compile(r"(?:\bnot|n't|\bnever|\bno)\W*(?:\w+\W+){0,2}$", re.I)
_NEGATED_ZH = re.compile(r"(?:不|没|非|未|否|别|并非|不是)[^不没非未否别]{0,2}$")


def _affirmed(text: str, start: int) -> bool:
    """Whether the answer found at `start` is stated, not denied: no negation among the few words
    before it in its clause ("It is not 120; it is 180." denies 120 and states 180; "它不是动物"
    denies 动物). Paper 002's exact checks score the answer the model gives, not one it rules out."""
    clause = _CLAUSE_END.split(text[:start])[-1]
    return not (_NEGATED_EN.search(clause) or _NEGATED_ZH.search(clause))


def check_answer(reply: str | None, check: Mapping[str, Any], question: str = "") -> bool:
    """Whether a reply's answer part passes a programmatic candidate's exact `check`:

    - `exact`: one of `answers` as a whole token (a number next to Chinese characters counts:
      "答案是180"; a Chinese answer must not follow a negation: "不是" is not "是"); case
      matters only when `case_sensitive` (a capitalisation task: "pepper" is not PEPPER);
    - `yes_no`: the first yes / no word of the answer ("是" / "不是", "Yes" / "No") is `answer`;
    - `symbol`: a chemical symbol standing alone, not inside a formula ("H2O" is not H);
    - `pattern`: `regex` matches a number in the reply that is not one of the question's own
      numbers (echoing "begins with 7" does not answer it).
    """
    _, text, _ = answer_part(reply)
    if not text:
        return False
    text = plain(text)
    kind = check["type"]
    if kind == "exact":
        flags = 0 if check.get("case_sensitive") else re.I
        for ans in check["answers"]:
            if _HAN.search(ans):
                pattern, where = rf"(?<![{_NEGATION_ZH}]){re.escape(ans)}", text
            elif re.fullmatch(r"-?\d+(?:\.\d+)?", ans):
                pattern, where = rf"(?<![\d.]){re.escape(ans)}(?!\.?\d)", text.replace(",", "")
            else:
                pattern, where = rf"(?<![^\W_]){re.escape(ans)}(?![^\W_])", text
            if any(_affirmed(where, m.start()) for m in re.finditer(pattern, where, flags)):
                return True
        return False
    if kind == "yes_no":
        lang = "zh" if check["answer"] in ("是", "否") else "en"
        m = _YES[lang].search(text)
        if not m:
            return False
        said = m.group(1).lower()
        polarity = "yes" if said in ("yes", "是", "对") else "no"
        return polarity == ("yes" if check["answer"] in ("yes", "是") else "no")
    if kind == "symbol":
        return re.search(rf"(?<![A-Za-z0-9]){re.escape(check['symbol'])}(?![A-Za-z0-9])", text) is not None
    if kind == "pattern":
        echoed = set(re.findall(r"\d+", question))
        return any(m.group(0) not in echoed for m in re.finditer(check["regex"], text))
    raise ValueError(f"unknown check type {kind!r}; expected exact, yes_no, symbol or pattern")


def read_verdict(reply: str | None) -> tuple[str, str]:
    """An S1-Bench discriminator's decision: 'retain', 'modify' or 'discard' from the last "Verdict:"
    line of the answer part (the discrimination prompt asks for one), else 'unparsed'; and the
    reasons (its analysis)."""
    _, text, _ = answer_part(reply)
    if not text:
        return "unparsed", ""
    found = re.findall(r"verdict\s*[:：]\s*\**\s*(retain|keep|modify|revise|discard|reject)", text, re.I)
    if not found:
        return "unparsed", text.strip()[:1000]
    word = found[-1].lower()
    decision = {"keep": "retain", "revise": "modify", "reject": "discard"}.get(word, word)
    return decision, text.strip()[:1000]


STANDARD_MARKER = "</think>"
OTHER_MARKERS = tuple(m for m in END_OF_THINKING if m != STANDARD_MARKER)
FORMAT_TYPES = (100, 101, 200, 201, 202, 203, 204, 205, 206, 207, 300, 301)
STRICT_FORMATS = {100, 101}
UNREADABLE_FORMATS = {300, 301}
# Not one of table 9's twelve: the provider counted reasoning tokens but returned only the answer
# (o4-mini, Claude and Gemini through their APIs). The paper scores such models on their answers and
# prints their f-acc as "–" (table 3); their replies have no visible format to rate.
HIDDEN_REASONING = 102


def format_type(reply: str | None, finish_reason: str | None) -> tuple[int, str, str]:
    """S1-Bench table 9: (format id, thinking part, final-answer part). 100/101 standard;
    200-207 readable but malformed; 300 markers with neither part; 301 no closing marker and cut
    at the token limit (endless)."""
    text = reply or ""
    n_std = text.count(STANDARD_MARKER)
    n_other = sum(text.count(m) for m in OTHER_MARKERS)
    if n_std == 0 and n_other == 0:
        if finish_reason == "length":
            return 301, "", text
        return 207, "", text.strip()
    marker = STANDARD_MARKER if n_std else next(m for m in OTHER_MARKERS if m in text)
    head, _, tail = text.rpartition(marker)
    thinking = OPEN_THINKING.sub("", head)
    for m in END_OF_THINKING:
        thinking, tail = thinking.replace(m, " "), tail.replace(m, " ")
    thinking, answer = thinking.strip(), tail.strip()
    has_t, has_a = bool(thinking), bool(answer)
    if n_std and n_other:
        return (300, thinking, answer) if not (has_t or has_a) else (201 if has_a else 202, thinking, answer)
    if n_std == 1:
        if has_t and has_a:
            return 100, thinking, answer
        if has_a:
            return 101, thinking, answer
        return (200 if has_t else 300), thinking, answer
    if n_std > 1:
        if has_t:
            return (201 if has_a else 202), thinking, answer
        return (203 if has_a else 300), thinking, answer
    if has_t:
        return (204 if has_a else 205), thinking, answer
    return (206 if has_a else 300), thinking, answer
