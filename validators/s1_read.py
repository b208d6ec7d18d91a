"""S1-Bench's readers (paper 002): exact answer checks, discriminator verdicts and response formats.

The answer part of a reply is found by `validators/read.py`'s `answer_part`; this module checks
it against an item's exact check and sorts the reply into the paper's format types (table 9).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from validators.reply_text import END_OF_THINKING, OPEN_THINKING, answer_part, plain

_HAN = re.compile(r"[\u4e00-\u9fff]")
_NEGATION_ZH = "不没非未否别"
_YES = {"en": re.compile(r"(?<![a-z])(yes|no|not)(?![a-z])", re.I), "zh": re.compile(r"(不是|不对|不|否|没有|是|对)")}


_CLAUSE_END = re.compile(r"[.;:!?。；：！？，,\n]")
_CONTRAST = re.compile(r"\b(?:but|rather|instead)\b|而是|但是|却是", re.I)
_NEGATED_EN = re.compile(r"(?:\bnot|n't|\bnever|\bno)\W*(?:\w+\W+){0,2}$", re.I)
_NEGATED_ZH = re.compile(r"(?:不|没|非|未|否|别|并非|不是)[^不没非未否别]{0,2}$")


def _affirmed(text: str, start: int) -> bool:
    """Whether the answer found at `start` is stated, not denied: no negation among the few words
    before it in its clause ("It is not 120; it is 180." denies 120 and states 180; "它不是动物"
    denies 动物). Paper 002's exact checks score the answer the model gives, not one it rules out."""
    clause = _CLAUSE_END.split(text[:start])[-1]
    clause = _CONTRAST.split(clause)[-1]  # "not 120 but 12": the contrast states 12
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


# The end-of-thinking markers that count as standard (table 9's "marker (standard)"), in the order the
# authors' split tries them (WYRipple/S1_Bench, split_think_answer.py): the first one a reply holds is
# its marker. A model entry may name its own (`models.<name>.end_of_thinking`, e.g. s1.1's
# "<|im_start|>answer"); these are the default, so every model of the paper's list is read as the
# authors read it.
STANDARD_MARKERS = ("</think>", "</reason>", "</ reason>", "<|im_start|>answer", "</thought>")
STANDARD_MARKER = STANDARD_MARKERS[0]
# "Unmatched" markers (table 9, formats 204-206): misspelt or stand-in closings the authors look for
# when no standard marker is there, and the other end-of-thinking markers the reader knows.
UNMATCHED_MARKERS = ("**答案**", "**Final Answer**", "</th think>", "</ think>", "\nanswer\n")
FORMAT_TYPES = (100, 101, 200, 201, 202, 203, 204, 205, 206, 207, 300, 301)
STRICT_FORMATS = {100, 101}
UNREADABLE_FORMATS = {300, 301}
# Not one of table 9's twelve: the provider counted reasoning tokens but returned only the answer
# (o4-mini, Claude, Gemini and Hunyuan-T1 through their APIs). Table 3 prints their f-acc as 100.00:
# such a reply is well formatted (its answer is the whole visible reply) and scored on its answer.
HIDDEN_REASONING = 102


def _unmatched(standard: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m for m in UNMATCHED_MARKERS + END_OF_THINKING if m not in standard))


def format_type(reply: str | None, finish_reason: str | None,
                markers: tuple[str, ...] | list[str] = STANDARD_MARKERS) -> tuple[int, str, str]:
    """S1-Bench table 9: (format id, thinking part, final-answer part), the markers left out of both
    parts. `markers` are the model's standard end-of-thinking markers (the first one the reply holds
    is its marker); any other known marker is "unmatched". 100/101 standard; 200-207 readable but
    malformed; 300 markers with neither part; 301 no marker and cut at the token limit (endless)."""
    text = reply or ""
    standard = tuple(markers) or STANDARD_MARKERS
    marker = next((m for m in standard if m in text), None)
    if marker is None:
        others = [m for m in _unmatched(standard) if m in text]
        if not others:
            if finish_reason == "length":
                return 301, "", text
            return 207, "", text.strip()
        last = max(others, key=text.rfind)
        cut = text.rfind(last)
        thinking, answer = _strip_markers(text[:cut], others), _strip_markers(text[cut + len(last):], others)
        if thinking and answer:
            return 204, thinking, answer
        if thinking:
            return 205, thinking, answer
        return (206 if answer else 300), thinking, answer
    parts = text.split(marker)
    every = (marker, *_unmatched(standard))  # a stray marker in either part is neither thinking nor answer
    thinking = " ".join(p for p in (_strip_markers(x, every) for x in parts[:-1]) if p)
    answer = _strip_markers(parts[-1], every)
    has_t, has_a = bool(thinking), bool(answer)
    if len(parts) == 2:
        if has_t and has_a:
            return 100, thinking, answer
        if has_a:
            return 101, thinking, answer
        return (200 if has_t else 300), thinking, answer
    if has_t:
        return (201 if has_a else 202), thinking, answer
    return (203 if has_a else 300), thinking, answer


def _strip_markers(text: str, markers: list[str] | tuple[str, ...]) -> str:
    """A part of a reply without its opening marker ("<think>", s1.1's "<|im_start|>think") and the
    given closing markers."""
    text = OPEN_THINKING.sub(" ", text)
    for m in markers:
        text = text.replace(m, " ")
    return text.strip()
