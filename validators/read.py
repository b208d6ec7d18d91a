"""Reading model replies: the one place where a reply becomes an answer, for every family.

A reply is read the way a careful human grader reads it:

1. **Reasoning is not the answer.** A `<think>...</think>` block (or any other
   end-of-thinking marker, or a server's separate reasoning field) is set
   aside; only the text after the last marker is read. A reply cut inside its
   thinking has no answer (`unfinished_thinking`).
2. **An explicit final answer wins.** The last "Final answer:", "Answer:",
   "答案：", "\\boxed{..}" or "Verdict:" statement that reads as an answer
   decides (`final_answer`), whatever words came earlier, even on the same line.
3. **A reply that is only an answer** ("True", "(B)", "1, 3") is that answer
   (`strict`).
4. **The last concluding statement** ("therefore", "so", "in summary", "因此",
   "所以") decides by the words after its last cue (`conclusion`): "I said False
   before, so it is True" is True.
5. Labels only: **exactly one label** left once echoed label lists ("True,
   False, or Unknown") are removed (`scan`).

Anything else is `needs_judge`: no exact reading, so the caller may ask a
judge model (`validators.judge`), whose reading is recorded as `judge`. A
failed call is `call_failed`; an empty reply `empty`. None of these is ever
turned into an answer: undecided is not Unknown, not "no correct option", not
wrong.

Kinds read here (each a function; `python -m validators.read KIND` reads stdin):
`label` (True / False / Unknown, or a numbered label), `choice` / `choices`
(option numbers, or "none"), `number`. A family's own kinds are beside it and run
the same ladder: MuSoBench's solution sets (`subsetsum`, `timetabling`),
`confidence` and `recheck` in `validators/muso_read.py`; S1-Bench's exact answer
checks and response format types in `validators/s1_read.py`. The command reads
every kind.
"""

from __future__ import annotations

import argparse
import bisect
import functools
import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from validators.muso_read import ParsedAnswer, read_confidence, read_subsets, read_timetables  # MuSoBench's own
from validators.outcomes import NEEDS_JUDGE
from validators.reply_text import INT_MAX, NONE, UNKNOWN, Reading, plain, text_to_read

# -- explicit answers and concluding statements -------------------------------------------------

_BOXED = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")
# A cue must be followed by ':' or a copula, so "the conclusion is proved" (an echoed option
# meaning) is not a cue but "Conclusion: True" is.
_CUE = re.compile(
    r"(?:(?<![a-z])(?:final\s+answer|correct\s+(?:answer|options?)|the\s+answer|my\s+answer|answer|final\s+label|"
    r"label|verdict|prediction)(?:\s*\([^)]{0,20}\))?\s*(?:[:：=]|\s+(?:is|are|would\s+be|should\s+be|will\s+be)\b\s*:?)"
    r"|(?<![a-z])conclusion\s*[:：]"
    r"|最终答案\s*(?:是|为)?\s*[:：]?|答案\s*(?:是|为)?\s*[:：]?|结论\s*(?:是|为)?\s*[:：]?|选项\s*(?:是|为)\s*[:：]?)",
    re.I,
)
_CONCLUDING = re.compile(
    r"(?:(?<![a-z])(?:therefore|thus|hence|so|consequently|in\s+conclusion|in\s+summary|to\s+summarize|"
    r"as\s+a\s+result|overall|accordingly)(?![a-z])|所以|因此|综上所述|综上|故)",
    re.I,
)
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n+")


_ANSWER_HEADING_LINE = re.compile(r"^\W*(?:final\s+answer|answer|最终答案|答案)\W*$", re.I)


# A cue that ends its line with ':' or a copula announces the answer on the line after it.
_OPENS_A_STATEMENT = re.compile(r"(?:[:：]|\b(?:is|are|be))\s*[:：]?\s*$", re.I)

# Every answer cue and answer heading holds one of these words: a line without any of them holds
# neither, so only the lines this finds (one scan of the whole reply) are matched line by line.
_CUE_WORD = re.compile(r"answer|option|label|verdict|prediction|conclusion|答案|结论|选项", re.I)


def explicit_answers(text: str) -> list[str]:
    """Texts stated as the answer, in reply order: each `\\boxed{}`, the rest of the line after
    each answer cue (up to the next cue on that line), and the line after an answer heading
    ("## Final Answer")."""
    return list(_explicit_answers(text))


@functools.lru_cache(maxsize=64)  # a judging reply without a label is read again for its options
def _explicit_answers(text: str) -> tuple[str, ...]:
    found: list[tuple[int, str]] = [(m.start(), m.group(1)) for m in _BOXED.finditer(text)]
    lines = _lines_with_offsets(text)
    starts = [start for start, _ in lines]
    fast = text.isascii()
    low = text.lower() if fast else text
    cue, cue_words = (_FAST_CUE, _FAST_CUE_WORD) if fast else (_CUE, _CUE_WORD)
    candidates = sorted({bisect.bisect_right(starts, m.start()) - 1 for m in cue_words.finditer(low)})
    for k in candidates:
        line_start, line = lines[k]
        if _ANSWER_HEADING_LINE.match(line):
            following = next((ln for _, ln in lines[k + 1:] if ln.strip()), None)
            if following:
                found.append((line_start, following.strip()))
            continue
        cues = list(cue.finditer(low, line_start, line_start + len(line)))
        for j, m in enumerate(cues):
            end = cues[j + 1].start() if j + 1 < len(cues) else line_start + len(line)
            body = text[m.end():end].strip()
            if not body and j + 1 == len(cues) and _OPENS_A_STATEMENT.search(text, line_start, m.end()):
                # "Therefore, the correct answer is:" then the answer on the next line
                body = next((ln.strip() for _, ln in lines[k + 1:] if ln.strip()), "")
            if body:
                found.append((m.start(), body))
    return tuple(body for _, body in sorted(found, key=lambda x: x[0]))


def _lines_with_offsets(text: str) -> list[tuple[int, str]]:
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, line))
        pos += len(line) + 1
    return out


def concluding_tails(text: str) -> list[tuple[str, str]]:
    """(sentence, its words after the last concluding cue), last sentence first."""
    return list(_concluding_tails(text))


@functools.lru_cache(maxsize=64)
def _concluding_tails(text: str) -> tuple[tuple[str, str], ...]:
    if text.isascii():
        low = text.lower()
        if _FAST_CONCLUDING.search(low) is None:  # a cue in a sentence is one in the whole text
            return ()
        pieces = zip(_FAST_SENTENCE_END.split(text), _FAST_SENTENCE_END.split(low))
        cue = _FAST_CONCLUDING
    else:
        pieces = ((s, s) for s in _SENTENCE_END.split(text))
        cue = _CONCLUDING
    out = []
    for s, lowered in reversed([(s, lowered) for s, lowered in pieces if s and s.strip()]):
        cues = list(cue.finditer(lowered))
        if cues:
            out.append((s, s[cues[-1].end():]))
    return tuple(out)


def _read_steps(text: str, read_one, strict_one) -> Reading | None:
    """Steps 2-4 of the module docstring: `read_one(stated text)` reads an explicit answer or a
    concluding statement, `strict_one(whole reply)` a reply that is only an answer."""
    for cand in reversed(explicit_answers(text)):
        got = read_one(cand)
        if got is not None:
            return Reading(got, "final_answer", cand.strip()[:200])
    bare = text.strip()
    got = strict_one(bare)
    if got is not None:
        return Reading(got, "strict", bare[:200])
    for sentence, tail in concluding_tails(text):
        got = read_one(tail)
        if got is not None:
            return Reading(got, "conclusion", sentence.strip()[:200])
    return None


# -- labels: True / False / Unknown --------------------------------------------------------------

_W = r"(?<![a-z]){}(?![a-z])"
_LABEL_FORMS = {
    "True": [r"true", r"proved", r"proven", r"正确", r"真"],
    "False": [r"false", r"disproved", r"disproven", r"错误", r"假"],
    "Unknown": [r"unknown", r"uncertain", r"undetermined", r"undeterminable", r"indeterminate", r"cannot be determined",
                r"can ?not be determined", r"can't be determined", r"not determinable",
                r"neither (?:true|proved|proven) nor (?:false|disproved|disproven)",
                r"cannot be (?:proved|proven) or (?:disproved|disproven)",
                r"can ?not be (?:proved|proven) or (?:disproved|disproven)",
                r"can't be (?:proved|proven) or (?:disproved|disproven)",
                r"未知", r"不确定", r"无法确定", r"无法判断"],
}
# Weak cues of Unknown: only in an explicit answer or a concluding statement.
_WEAK_UNKNOWN = [r"insufficient", r"not enough information", r"cannot be (?:concluded|inferred|decided)",
                 r"can ?not be (?:concluded|inferred|decided)", r"can't be (?:concluded|inferred|decided)"]
# "not proved" / "cannot be proved": not True, but False or Unknown? Only a judge can say.
_NOT_PROVED = re.compile(r"(?<![a-z])(?:(?:is|was|be|been)\s+not|isn't|wasn't|not|(?:cannot|can ?not|can't)\s+be|"
                         r"(?:could|would|can)\s+not\s+be)\s+(?:proved|proven)(?![a-z])(?!\s+or\s+disprov)", re.I)
_NEGATED = re.compile(r"(?<![a-z])(?:not|isn't|is\s+not)\s+(true|false)(?![a-z])", re.I)
_NEGATED_ZH = re.compile(r"不是(真|假|正确|错误)")


def _alternation(forms: Sequence[str]) -> str:
    return "|".join(_W.format(f) if re.match(r"[a-z(]", f) else f for f in forms)


_LABEL_RE = {label: re.compile(_alternation(forms), re.I) for label, forms in _LABEL_FORMS.items()}
_WEAK_RE = re.compile(_alternation(_WEAK_UNKNOWN), re.I)
_ANY_LABEL = "|".join(f"(?:{_alternation(f)})" for f in _LABEL_FORMS.values())
_ECHO_LIST = re.compile(  # "True, False, or Unknown", "True/False/Unknown", "(A) True (B) False", "PROVED | DISPROVED"
    rf"(?:\(?[a-c1-3][).]\s*)?(?:{_ANY_LABEL})"
    rf"(?:(?:\s*[,/|;、或]\s*(?:(?:or|and)\s+)?|\s+(?:or|and)\s+|\s+)(?:\(?[a-c1-3][).]\s*)?(?:{_ANY_LABEL}))+",
    re.I,
)


# -- the same patterns, faster on ASCII text -----------------------------------------------------
# Every pattern above ignores case and starts each alternative with a look-behind ("no letter
# before"), so `re` tries the whole alternation at every character of a reply: 0.4-0.5 ms for an
# ordinary reply, the largest part of an Instruction Boundary run's own CPU (its replies read as they
# come, and again by every rerun). On ASCII text, ignoring case is the same as lowercasing it first,
# and an alternative that starts with its first letter, the look-behind moved after that letter
# (`t(?<![a-z]t)rue` for `(?<![a-z])true`), matches the same spans, while `re` can now skip to the
# characters that start an alternative. The fast forms below are built from the same forms (the CJK
# ones left out: ASCII text holds none); they are used on ASCII text only, the patterns above on any
# other, and `tests/test_read.py` holds both to the same readings on every reply of the fixtures and
# on generated texts.


def _letter_first(form: str, bounded: bool = True) -> str:
    """A lowercase form starting with a letter, the no-letter-before look-behind after that letter,
    and (`bounded`) the no-letter-after look-ahead at its end, as `_W` has them."""
    assert re.match(r"[a-z][^?*+{]", form), form
    return f"{form[0]}(?<![a-z]{form[0]}){form[1:]}" + ("(?![a-z])" if bounded else "")


def _fast(forms: Sequence[str]) -> str:
    return "|".join(_letter_first(f) for f in forms if f.isascii())


_FAST_LABEL = {label: re.compile(_fast(forms)) for label, forms in _LABEL_FORMS.items()}
_FAST_WEAK = re.compile(_fast(_WEAK_UNKNOWN))
_FAST_ANY = "|".join(f"(?:{_fast(f)})" for f in _LABEL_FORMS.values())
# `_ECHO_LIST` without its optional opening "(a) " (which `_fast_echo_removed` finds backwards)
_FAST_ECHO_CORE = re.compile(
    rf"(?:{_FAST_ANY})"
    rf"(?:(?:\s*[,/|;]\s*(?:(?:or|and)\s+)?|\s+(?:or|and)\s+|\s+)(?:\(?[a-c1-3][).]\s*)?(?:{_FAST_ANY}))+")
_FAST_NOT_PROVED = re.compile(
    "(?:" + "|".join(_letter_first(f, bounded=False) for f in (
        r"is\s+not", r"was\s+not", r"be\s+not", r"been\s+not", r"isn't", r"wasn't", r"not", r"cannot\s+be",
        r"can ?not\s+be", r"can't\s+be", r"could\s+not\s+be", r"would\s+not\s+be", r"can\s+not\s+be"))
    + r")\s+(?:proved|proven)(?![a-z])(?!\s+or\s+disprov)")
_FAST_NEGATED = re.compile("|".join(_letter_first(f) for f in (r"not\s+(true|false)", r"isn't\s+(true|false)",
                                                                  r"is\s+not\s+(true|false)")))
_FAST_CUE_WORD = re.compile(r"answer|option|label|verdict|prediction|conclusion")
_FAST_CONCLUDING = re.compile("|".join(_letter_first(f) for f in (
    "therefore", "thus", "hence", "so", "consequently", r"in\s+conclusion", r"in\s+summary", r"to\s+summarize",
    r"as\s+a\s+result", "overall", "accordingly")))


# `_CUE` for lowercased ASCII text: each cue word letter-first, with the cue's tail (an optional
# short parenthesis, then ':' '=' or a copula); the full-width colon and the CJK cues left out
_CUE_TAIL = r"(?:\s*\([^)]{0,20}\))?\s*(?:[:=]|\s+(?:is|are|would\s+be|should\s+be|will\s+be)\b\s*:?)"
_FAST_CUE = re.compile("|".join(
    [_letter_first(w, bounded=False) + _CUE_TAIL for w in (
        r"final\s+answer", r"correct\s+(?:answer|options?)", r"the\s+answer", r"my\s+answer", "answer",
        r"final\s+label", "label", "verdict", "prediction")]
    + [_letter_first("conclusion", bounded=False) + r"\s*:"]))
# `_SENTENCE_END` for ASCII text: starting with the whitespace it consumes, so `re` skips to it
# (whitespace after . ! or ?, or a run of newlines; the CJK end marks cannot occur)
_FAST_SENTENCE_END = re.compile(r"\s(?:(?<=[.!?]\s)\s*|(?<=\n)\n*)")


def _fast_echo_removed(low: str) -> str:
    """`_ECHO_LIST.sub(" ", text)` for lowercased ASCII text: each match of the list without its
    opening, extended backwards over an opening "(a) ", "1." there (a label never starts inside
    one, so a match with an opening starts 2 or 3 characters before the whitespace before its
    first label, and none further back)."""
    out, pos = [], 0
    while (m := _FAST_ECHO_CORE.search(low, pos)) is not None:
        start = j = m.start()
        while j > pos and low[j - 1].isspace():
            j -= 1
        if j - 2 >= pos and low[j - 1] in ").":
            if low[j - 2] in "abc123":
                start = j - 2
                if j - 3 >= pos and low[j - 3] == "(":
                    start = j - 3
        out += [low[pos:start], " "]
        pos = m.end()
    out.append(low[pos:])
    return "".join(out)

def _label_mentions(text: str, weak: bool) -> set[str]:
    """Labels a text names. Unknown phrases ("neither true nor false") are read first and masked;
    negations flip ("not true" is False); "not proved" names no label but makes the text ambiguous ('?')."""
    if text.isascii():
        return _mentions(text.lower(), weak, _FAST_FORMS)
    return _mentions(text, weak, _FORMS)


@dataclass(frozen=True)
class _Forms:
    """The patterns `_mentions` reads labels with: as written, or the fast forms for ASCII text."""

    unknown: re.Pattern[str]
    not_proved: re.Pattern[str]
    negated: tuple[re.Pattern[str], ...]  # each with the negated label as its one matched group
    true: re.Pattern[str]
    false: re.Pattern[str]
    weak: re.Pattern[str]


_FORMS = _Forms(_LABEL_RE["Unknown"], _NOT_PROVED, (_NEGATED, _NEGATED_ZH), _LABEL_RE["True"], _LABEL_RE["False"],
                _WEAK_RE)
_FAST_FORMS = _Forms(_FAST_LABEL["Unknown"], _FAST_NOT_PROVED, (_FAST_NEGATED,), _FAST_LABEL["True"],
                     _FAST_LABEL["False"], _FAST_WEAK)


def _mentions(text: str, weak: bool, forms: _Forms) -> set[str]:
    """`_label_mentions` with `forms` (the fast ones take lowercased ASCII text)."""
    found: set[str] = set()

    def mask(m: re.Match[str]) -> str:
        return " " * len(m.group(0))

    if forms.unknown.search(text):
        found.add("Unknown")
        text = forms.unknown.sub(mask, text)
    if forms.not_proved.search(text):
        found.add("?")
        text = forms.not_proved.sub(mask, text)
    for pattern in forms.negated:
        negated = list(pattern.finditer(text))
        for m in negated:
            word = next(g for g in m.groups() if g)
            found.add("False" if word.lower() in ("true", "真", "正确") else "True")
        if negated:
            text = pattern.sub(mask, text)
    if forms.true.search(text):
        found.add("True")
    if forms.false.search(text):
        found.add("False")
    if weak and forms.weak.search(text):
        found.add("Unknown")
    return found


def _one_label(text: str, weak: bool, options: Sequence[str] | None = None) -> str | None:
    if text.isascii():  # lowercased once for both steps
        labels = _mentions(_fast_echo_removed(text.lower()), weak, _FAST_FORMS)
    else:
        labels = _mentions(_ECHO_LIST.sub(" ", text), weak, _FORMS)
    if len(labels) == 1 and "?" not in labels:
        return labels.pop()
    if options and not labels:  # a numbered label: "Answer: 2" or "(B)"
        got = _options_in(text, len(options), options)
        if isinstance(got, frozenset) and len(got) == 1:
            return options[next(iter(got)) - 1]
    return None


def _bare_label(text: str, options: Sequence[str] | None) -> str | None:
    """The reply is a label and nothing else ("True", "**Unknown**", "(C) Unknown", "2")."""
    bare = re.sub(r"^\(?[a-c1-3][).:]\s*(?=\S)", "", text.strip(), flags=re.I)
    bare = re.sub(r"[\s.!。:：()\[\]\"']+", " ", bare).strip()
    for label, pattern in _LABEL_RE.items():
        if pattern.fullmatch(bare):
            return label
    if options and re.fullmatch(r"\d|[A-Ja-j]", bare):
        k = _number_of(bare)
        return options[k - 1] if 1 <= k <= len(options) else None
    return None


def read_label(reply: str | None, *, options: Sequence[str] | None = None, reasoning: str | None = None) -> Reading:
    """True / False / Unknown from a reply. With `options` (labels shown numbered, in order) an
    option number or letter is read as that label."""
    text, done = text_to_read(reply, reasoning)
    if done:
        return done
    got = _read_steps(text, lambda c: _one_label(c, True, options), lambda c: _bare_label(c, options))
    if got:
        return got
    label = _one_label(text, False)
    if label:
        return Reading(label, "scan")
    return Reading(None, NEEDS_JUDGE)


def normalise_gold_label(raw: str) -> str:
    """Upstream gold labels to True / False / Unknown (FLD PROVED/DISPROVED/UNKNOWN; FOLIO
    True/False/Uncertain, its v0.0 train split spells Unknown). Raises ValueError otherwise."""
    key = str(raw).strip().lower()
    table = {"true": "True", "proved": "True", "false": "False", "disproved": "False",
             "unknown": "Unknown", "uncertain": "Unknown"}
    if key not in table:
        raise ValueError(f"unknown label {raw!r}; expected one of PROVED, DISPROVED, UNKNOWN, True, False, Uncertain")
    return table[key]


# -- options: numbered (Instruction Boundary) or lettered (WakenLLM ScienceQA) -------------------

_NO_ANSWER = re.compile(  # appendix E's no-answer indicators, as a stated answer
    r"^(?:there\s+is\s+)?(?:no\s+correct\s+(?:answer|option|choice)s?|none\s+of\s+(?:the|these|them)(?:\s+(?:options|"
    r"answers|choices|above))?(?:\s+(?:is|are)\s+correct)?|none(?:\s+of\s+the\s+above)?|no\s+(?:option|answer|choice)\s+is\s+"
    r"correct|not\s+(?:any|one)\s+of\s+the\s+options|uncertain|unclear|(?:it\s+)?cannot\s+(?:be\s+)?determined?|"
    # "All other options are false" where it is not an option (Instruction Boundary's conformity
    # suggestion on a multiple-choice item); where it is one, its own text selects it first
    r"all\s+(?:other\s+|the\s+)?(?:options|answers|choices)\s+are\s+(?:false|wrong|incorrect)|"
    r"can't\s+(?:be\s+)?determined?|没有正确(?:答案|选项)|都不对|无正确答案)\s*[.。!]?$",
    re.I,
)
_SEP = r"(?:\s*(?:,|;|/|&|\band\b|\bor\b|和|、|，)\s*|\s+)"
_TOKEN = r"(?:(?:option|choice|选项)\s*)?[(\[]?\s*(?:\d{1,2}|(?<![A-Za-z])[A-Ja-j](?![a-zA-Z]))\s*[)\]]?"
_LIST = re.compile(rf"^\s*(?:(?:options?|choices?)\s*)?({_TOKEN}(?:{_SEP}{_TOKEN})*)\s*[.。!]?\s*$", re.I)
_ONE = re.compile(r"(\d{1,2}|(?<![A-Za-z])[A-Ja-j](?![a-zA-Z]))")
_LEAD = re.compile(r"^\s*(?:(?:option|choice)\s*)?[(\[]?\s*(\d{1,2}|[A-Ja-j])\s*[)\].:：]\s*(.+?)\s*[.。!]?\s*$", re.I)
_COPULA = re.compile(r"^(?:is|are|was|would\s+be|should\s+be|will\s+be|是|为)\s*[:：]?\s*", re.I)
# A stated answer that opens with one option's label and goes on with its text or a note: "(B) All
# yellow males.", "(B), 7.15 x 10^-22 g.", "H. (Delegates usually ...)", "D. If the initial model ...".
_LABEL_FIRST = re.compile(r"^\s*(?:(?:option|choice)\s*)?(?:[(\[]\s*(\d{1,2}|[A-Ja-j])\s*[)\]]|(\d{1,2}|[A-J])[.):,](?=\s))"
                          r"\s*[,:：.-]?\s*(.*)$", re.I | re.S)
# ... unless what follows names another option as an alternative: "(I) or (H)"
_ALTERNATIVE = re.compile(r"^(?:or|oder|或者?)\s*(?:option\s*)?[(\[]?\s*(?:\d{1,2}|[A-Ja-j])\b", re.I)
ALTERNATIVES = "alternatives"  # the answer names options as alternatives, so none is chosen
# A single-choice hedge read as its first option, as MMLU-Pro's and lm-eval's extraction (first match) reads it.
FIRST_OF_ALTERNATIVES = "first_of_alternatives"


class _Alternatives(str):
    """A stated answer that offers options as alternatives ("(I) or (H)"): no answer, not a set."""


def _number_of(tok: str) -> int:
    return int(tok) if tok.isdigit() else ord(tok.upper()) - ord("A") + 1


def _options_in(text: str, n: int, texts: Sequence[str] | None = None, unknown: bool = False) -> Any:
    """The answer a short stated text gives: frozenset of option numbers (letters by position),
    NONE, UNKNOWN (when `unknown` is allowed), or None."""
    t = plain(text).strip().strip("*").strip()
    # Exactly an option's own text wins (appendix E.1): "Options 1 and 3 are all true" is option 5.
    # Not when the text is only option labels: "3" is option 3, even where another option's text is "3".
    if texts and not _labels_in_range(t, n):
        exact = [k for k, o in enumerate(texts, start=1) if _same_text(t, o)]
        if len(exact) == 1:
            return frozenset(exact)
    t = _COPULA.sub("", t).strip()
    t = re.sub(r"^(?:the\s+)?(?:correct\s+)?(?:answer|options?)\s*(?:is|are)?\s*[:：]?\s*", "", t, flags=re.I)
    t = re.sub(r"\s+(?:is|are)\s+(?:both\s+|all\s+)?(?:true|correct|right)\s*[.。!]?$", "", t, flags=re.I)
    if not t:
        return None
    if unknown and _LABEL_RE["Unknown"].fullmatch(t.rstrip(".。!").strip()):
        return UNKNOWN
    if _NO_ANSWER.match(t):
        return UNKNOWN if unknown else NONE
    m = _LIST.match(t)
    if m:
        picked = {_number_of(tok) for tok in _ONE.findall(m.group(1))}
        if len(picked) > 1 and re.search(r"\bor\b|或", m.group(1), re.I):
            return _Alternatives(m.group(1))  # "(I) or (H)": no single answer, and no set either
        return frozenset(picked) if picked and all(1 <= k <= n for k in picked) else None
    m = _LEAD.match(t)  # "(B) magnetism", "2. The second option"
    if m and texts:
        k = _number_of(m.group(1))
        if 1 <= k <= n and _same_text(m.group(2), texts[k - 1]):
            return frozenset({k})
    m = _LABEL_FIRST.match(t)  # the label first, then its text or a note
    if m and _label_then_note(m.group(1) or m.group(2), m.group(3)):
        k = _number_of(m.group(1) or m.group(2))
        if 1 <= k <= n:
            return frozenset({k})
    if texts:  # the option's own text
        named = [k for k, o in enumerate(texts, start=1) if _same_text(t, o)]
        if len(named) == 1:
            return frozenset(named)
    return None


def _labels_in_range(text: str, n: int) -> bool:
    """Whether a text is only option labels, each of one of the `n` options ("3", "(B)", "1 and 3")."""
    m = _LIST.match(text)
    return bool(m) and all(1 <= _number_of(tok) <= n for tok in _ONE.findall(m.group(1)))


def _label_then_note(label: str, rest: str) -> bool:
    """Whether an opening label is the answer, with its text or a note after it. Not when the rest
    offers another option as an alternative ("(I) or (H)"), labels other options of the same kind
    ("(A) friction (B) magnetism" restates the options; the "(a)", "(b)" parts of an option "F." do
    not), or goes on as a list on later lines ("1. A standard cost is ...\n2. ..." is a list, not
    option 1)."""
    if _ALTERNATIVE.match(rest.strip()):
        return False
    kind = r"\d{1,2}" if label.isdigit() else ("[A-J]" if label.isupper() else "[a-j]")
    if re.search(rf"[(\[]\s*{kind}\s*[)\]]", rest):
        return False
    return not re.search(rf"\n\s*[(\[]?\s*{kind}\s*[.)\]:]", rest)


_PUNCTUATION_RUN = re.compile(r"[\s.。!,;:]+")


@functools.lru_cache(maxsize=4096)  # an item's option texts are compared with every stated answer
def _normalised(text: str) -> str:
    return _PUNCTUATION_RUN.sub(" ", text.lower()).strip()


def _same_text(said: str, option: str) -> bool:
    a = _normalised(said)
    return bool(a) and a == _normalised(option)


def _options_in_sentence(tail: str, n: int, texts: Sequence[str] | None, unknown: bool) -> Any:
    """A concluding tail: the stated answer may follow filler ("the answer is", "it is", "option")."""
    t = plain(tail).strip(" ,，:：")
    got = _options_in(t, n, texts, unknown)
    if got is not None:
        return got
    m = re.search(r"(?:the\s+(?:correct\s+)?(?:answer|option|choice)s?\s+(?:is|are)|it\s+is|it's|choose|pick|select)\s+(.+)$",
                  t, re.I)
    if m:
        return _options_in(m.group(1), n, texts, unknown)
    if texts:  # "so the force is friction": exactly one option text named, no Unknown cue
        low = t.lower()
        named = {k for k, o in enumerate(texts, start=1) if names_text(low, o.lower())}
        says_unknown = unknown and bool(_LABEL_RE["Unknown"].search(t) or _WEAK_RE.search(t))
        if len(named) == 1 and not says_unknown:
            return frozenset(named)
        if says_unknown and not named:
            return UNKNOWN
    return None


def read_options(reply: str | None, options: int | Sequence[str], *, unknown: bool = False,
                 reasoning: str | None = None, single: bool = False) -> Reading:
    r"""The options a reply selects: a frozenset of 1-based option numbers (letters are read by
    position, never as substrings), NONE for a stated "no correct answer" / "uncertain" / "unclear"
    (appendix E's no-answer indicators; as the final answer only, never from words in the
    reasoning), or with `unknown` UNKNOWN for "Unknown" / "cannot be determined". `options` is
    the number of options, or their texts (then an option's own text is read too).

    A stated answer that offers options as alternatives ("The answer is (I) or (H).") is no set.
    Where the item takes one option (`single`) it reads as the first one named, with the method
    `first_of_alternatives` so an analysis can drop such replies: that is how MMLU-Pro's own
    extraction (`answer is \(?([A-J])\)?`, first match) and lm-eval's take-first filter score a
    hedge, and the real-reply benchmark (`benchmarks/real_data.py`) measures agreement with it.
    Otherwise it reads as no answer (method `alternatives`)."""
    texts = None if isinstance(options, int) else list(options)
    n = options if isinstance(options, int) else len(options)
    text, done = text_to_read(reply, reasoning)
    if done:
        return done
    got = _read_steps(text, lambda c: _options_in_sentence(c, n, texts, unknown), lambda c: _options_in(c, n, texts, unknown))
    if got and isinstance(got.answer, _Alternatives):
        first = _number_of(_ONE.findall(got.answer)[0])
        if single and 1 <= first <= n:
            return Reading(frozenset({first}), FIRST_OF_ALTERNATIVES, got.evidence)
        return Reading(None, ALTERNATIVES, got.evidence)  # undecided: the judge would only pick one for it
    if got:
        return got
    if unknown and _LABEL_RE["Unknown"].search(text) and not _names_an_option(text, n, texts):
        return Reading(UNKNOWN, "scan")  # says it cannot be determined, and names no option
    return Reading(None, NEEDS_JUDGE)


def _names_an_option(text: str, n: int, texts: Sequence[str] | None) -> bool:
    if re.search(r"(?<![A-Za-z])\(?[A-J]\)|(?:option|choice)\s*\(?[A-J1-9]", text, re.I):
        return True
    low = text.lower()
    return any(names_text(low, o.lower()) for o in texts or [])


def names_text(text: str, phrase: str) -> bool:
    r"""`re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text)`: `phrase` in `text` with no word
    character (`str.isalnum()` or "_", as `\w` is on str) either side, found without building,
    escaping and looking up a pattern for each option text: 0.25 us a search against 1.7 us (the
    31,350 searches of an IB paper partition's stored replies; 0.15 s of a rerun of IB's whole
    selection from the cache), and no compile where a run holds more option texts than `re`'s
    cache (512)."""
    at = text.find(phrase)
    while at >= 0:
        end = at + len(phrase)
        if not (at and _word_char(text[at - 1])) and not (end < len(text) and _word_char(text[end])):
            return True
        at = text.find(phrase, at + 1)
    return False


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def is_correct(selected: Any, gold: Any) -> bool:
    """Exact match (appendix E.1): the same set of options in any order, or NONE for NONE;
    partial and extra options are wrong; no answer is not correct."""
    return selected is not None and selected == gold


# -- numbers ----------------------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\d.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d])|(?<![\d.])-?\d+(?:\.\d+)?(?![\d])")


def _number_in(text: str) -> Any:
    nums = _NUMBER.findall(text)
    if len(nums) != 1:
        return None
    raw = nums[0].replace(",", "")
    value = float(raw) if "." in raw else int(raw)
    return value


def read_number(reply: str | None, *, reasoning: str | None = None) -> Reading:
    """The number a reply gives as its answer (int, or float with a decimal point). A number beyond
    32-bit integers reads as `out_of_range` (no answer), never as a crash downstream."""
    text, done = text_to_read(reply, reasoning)
    if done:
        return done
    got = _read_steps(text, _number_in, lambda c: _number_in(c) if _NUMBER.fullmatch(c.strip().rstrip(".。")) else None)
    if got is None:
        value = _number_in(text)
        got = Reading(value, "scan") if value is not None else Reading(None, NEEDS_JUDGE)
    if isinstance(got.answer, (int, float)) and abs(got.answer) > INT_MAX:
        return Reading(None, "out_of_range", str(got.answer))
    return got


# -- the command ------------------------------------------------------------------------------------

KINDS = ("label", "choice", "choices", "subsetsum", "timetabling", "number", "confidence")


def _jsonable(reading: Any) -> dict[str, Any]:
    if isinstance(reading, ParsedAnswer):
        answers = [list(a) if a[0] != "invalid" else {"invalid": a[1]} for a in reading.answers]
        # "final_block" with nothing in it means the reply stated no solution
        method = "no_answer" if not answers and reading.method == "final_block" else reading.method
        return {"answer": answers or None, "method": method,
                "claimed_total": reading.claimed_total, "invalid": reading.invalid_reasons, "error": reading.error}
    answer = reading.answer
    if isinstance(answer, frozenset):
        answer = sorted(answer)
    return {"answer": answer, "method": reading.method, "evidence": reading.evidence}


def read(kind: str, reply: str | None, *, options: int | Sequence[str] | None = None,
         problem: Mapping[str, Any] | None = None) -> Any:
    """One reply read as `kind`, exactly as the pipeline reads it (no judge is asked): a `Reading`,
    or for the MuSoBench kinds a `validators.muso_read.ParsedAnswer`."""
    if kind == "label":
        return read_label(reply, options=options if not isinstance(options, int) else None)
    if kind in ("choice", "choices"):
        got = read_options(reply, options if options is not None else 4, single=kind == "choice")
        if kind == "choice" and isinstance(got.answer, frozenset) and len(got.answer) == 1:
            return Reading(next(iter(got.answer)), got.method, got.evidence)
        return got
    if kind == "subsetsum":
        return read_subsets(reply, problem or {"values": _all_numbers(reply)})
    if kind == "timetabling":
        if problem is None:
            raise ValueError("timetabling needs --problem (the instance JSON: {\"courses\": [...]})")
        return read_timetables(reply, problem)
    if kind == "number":
        return read_number(reply)
    if kind == "confidence":
        return read_confidence(reply)
    raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")


def _all_numbers(reply: str | None) -> list[int]:
    """Without an instance, any integer counts as an element of the set (membership unchecked)."""
    return [int(x) for x in re.findall(r"-?\d+", reply or "")]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m validators.read",
        description="Read one reply (standard input) the way the pipeline does; print one JSON object whose "
                    "`answer` is the reading (null: no answer) and whose `method` says how it was read. No judge "
                    "model is asked: a reply that would need one reads as null with method needs_judge.")
    p.add_argument("kind", choices=KINDS)
    p.add_argument("--options", type=int, help="number of options (choice, choices; label: numbered labels)")
    p.add_argument("--labels", help="comma-separated option texts, e.g. True,False,Unknown (label, choice, choices)")
    p.add_argument("--problem", help="the instance as JSON (subsetsum: {\"values\": [...]}; timetabling: "
                                     "{\"courses\": [...]})")
    args = p.parse_args(argv)
    options: Any = [s.strip() for s in args.labels.split(",")] if args.labels else args.options
    try:
        problem = json.loads(args.problem) if args.problem else None
        reading = read(args.kind, sys.stdin.read(), options=options, problem=problem)
    except (ValueError, json.JSONDecodeError) as exc:
        print(f"validators.read: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(_jsonable(reading), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
