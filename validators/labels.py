"""Extracting a True / False / Unknown label from a model's reply: the shared extraction core.

Used by WakenLLM and Instruction Boundary's judging items (REFERENCE-FACTS:
keyword matching first, an LLM judge only when no keyword matches). Steps, in
order, each recorded as the outcome's `method`:

1. `final_answer`: the last "final answer" / "answer:" / "答案" line, or a
   `\\boxed{..}`, naming one label;
2. `strict`: the whole reply (markdown and punctuation aside) is one label;
3. `conclusion`: the last concluding sentence ("therefore", "so", "thus",
   "in conclusion", "the statement is ...") naming exactly one label;
4. `scan`: after deleting lists that echo the label set ("True, False, or
   Unknown", "True/False/Unknown", "(A) True (B) False"), exactly one label
   remains in the text.

Weak cues such as "insufficient" or "not enough information" count as Unknown
only in a concluding sentence or a final-answer line, so a reply that says
"the facts first seem insufficient ... so it is true" is True. Replies where
no step decides are `unparsed` (the caller may ask a judge model); empty
replies are `empty`; failed calls are `call_failed`. None of these is ever
turned into Unknown (a pitfall of the authors' code).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LABELS = ("True", "False", "Unknown")

# Surface forms per label (lower-cased matching). Chinese forms included.
_STRONG = {
    "True": [r"true", r"proved", r"正确", r"真"],
    "False": [r"false", r"disproved", r"错误", r"假"],
    "Unknown": [r"unknown", r"uncertain", r"undetermined", r"undeterminable", r"cannot be determined",
                r"can ?not be determined", r"can't be determined", r"unprovable", r"未知", r"不确定", r"无法确定"],
}
_WEAK_UNKNOWN = [r"insufficient", r"not enough information", r"cannot be (?:concluded|inferred|decided)",
                 r"neither (?:true|proved) nor (?:false|disproved)"]

_WORD = r"(?<![a-z]){}(?![a-z])"


def _alternation(forms: list[str]) -> str:
    return "|".join(_WORD.format(f) if re.match(r"[a-z]", f) else f for f in forms)


_LABEL_RE = {label: re.compile(_alternation(forms), re.I) for label, forms in _STRONG.items()}
_WEAK_RE = re.compile(_alternation(_WEAK_UNKNOWN), re.I)
_ANY_LABEL = "|".join(f"(?:{_alternation(f)})" for f in _STRONG.values())
# "True, False, or Unknown", "True/False/Unknown", "(A) True (B) False (C) Unknown", "PROVED | DISPROVED"
_ECHO_LIST = re.compile(
    rf"(?:\(?[a-c]\)\s*)?(?:{_ANY_LABEL})"
    rf"(?:(?:\s*[,/|;、或]\s*(?:(?:or|and)\s+)?|\s+(?:or|and)\s+|\s+)(?:\(?[a-c]\)\s*)?(?:{_ANY_LABEL}))+",
    re.I,
)
_NEGATED = re.compile(r"\bnot\s+(true|false|proved|disproved)\b", re.I)
_FINAL_LINE = re.compile(
    r"(?:final\s+answer|final\s+label|answer|label|conclusion|verdict|最终答案|答案|结论)\s*(?:is|would be|should be)?\s*[:：]?\s*(.+)",
    re.I,
)
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text\{)?\s*([^{}]+?)\s*\}?\s*\}")
_CONCLUDING = re.compile(
    r"(?:therefore|thus|hence|so\b|consequently|in conclusion|in summary|as a result|overall|"
    r"the (?:statement|hypothesis|conclusion) (?:is|must be|would be)|所以|因此|综上)",
    re.I,
)
_MARKDOWN = re.compile(r"[*_`#>]+")


@dataclass(frozen=True)
class Extraction:
    label: str | None  # 'True', 'False', 'Unknown', or None
    method: str  # final_answer, strict, conclusion, scan, judge, unparsed, empty, call_failed
    evidence: str | None = None

    @property
    def decided(self) -> bool:
        return self.label is not None


def _labels_in(text: str, weak: bool) -> list[tuple[int, str]]:
    """(position, label) of every label mention; negated T/F flip ("not true" = False)."""
    found: list[tuple[int, str]] = []
    negated_spans = []
    for m in _NEGATED.finditer(text):
        word = m.group(1).lower()
        flipped = "False" if word in ("true", "proved") else "True"
        found.append((m.start(), flipped))
        negated_spans.append((m.start(1), m.end(1)))
    for label, pattern in _LABEL_RE.items():
        for m in pattern.finditer(text):
            if not any(a <= m.start() < b for a, b in negated_spans):
                found.append((m.start(), label))
    if weak:
        found += [(m.start(), "Unknown") for m in _WEAK_RE.finditer(text)]
    return sorted(found)


def _single(text: str, weak: bool) -> str | None:
    labels = {label for _, label in _labels_in(text, weak)}
    return labels.pop() if len(labels) == 1 else None


def _strip_echoes(text: str) -> str:
    return _ECHO_LIST.sub(" ", text)


def _final_answer_candidates(text: str) -> list[str]:
    """Texts after "final answer"-style cues and inside \\boxed{}, in the order they appear."""
    candidates = [m.group(1) for m in _BOXED.finditer(text)]
    for line in text.splitlines():
        m = _FINAL_LINE.search(line)
        if m:
            candidates.append(m.group(1))
    return candidates


def _concluding_sentences(text: str) -> list[str]:
    """Sentences with a concluding cue ("therefore", "so", ...), last first."""
    sentences = [s for s in re.split(r"(?<=[.!?。！？])\s+|\n+", text) if s.strip()]
    return [s for s in reversed(sentences) if _CONCLUDING.search(s)]


def extract_label(reply: str | None) -> Extraction:
    """The label a reply commits to, and which step decided it (see the module docstring)."""
    if reply is None or not reply.strip():
        return Extraction(None, "empty")
    text = _MARKDOWN.sub("", reply)

    # 1. final-answer lines and \boxed{}, last one wins
    for candidate in reversed(_final_answer_candidates(text)):
        label = _single(_strip_echoes(candidate), weak=True)
        if label:
            return Extraction(label, "final_answer", candidate.strip()[:200])

    # 2. the reply is just a label
    bare = re.sub(r"[\s.!。:：()\[\]\"']+", " ", text).strip()
    for label, pattern in _LABEL_RE.items():
        if pattern.fullmatch(bare):
            return Extraction(label, "strict", bare)

    # 3. the last concluding sentence naming exactly one label
    for sentence in _concluding_sentences(text):
        label = _single(_strip_echoes(sentence), weak=True)
        if label:
            return Extraction(label, "conclusion", sentence.strip()[:200])

    # 4. exactly one label anywhere, once echoed label lists are removed
    label = _single(_strip_echoes(text), weak=False)
    if label:
        return Extraction(label, "scan")
    return Extraction(None, "unparsed")


def normalise_gold_label(raw: str) -> str:
    """Upstream gold labels to True / False / Unknown (FLD PROVED/DISPROVED/UNKNOWN; FOLIO
    True/False/Uncertain, its v0.0 train split spells Unknown). Raises ValueError otherwise."""
    key = str(raw).strip().lower()
    table = {"true": "True", "proved": "True", "false": "False", "disproved": "False",
             "unknown": "Unknown", "uncertain": "Unknown"}
    if key not in table:
        raise ValueError(f"unknown label {raw!r}; expected one of PROVED, DISPROVED, UNKNOWN, True, False, Uncertain")
    return table[key]


# -- multiple choice with an Unknown option (ScienceQA items in WakenLLM) ------------------------

_LETTER = re.compile(r"^\W*\(?([A-Ha-h])\)?(?:[.):\s]|$)")


def _choice_in(text: str, choices: list[str]) -> str | None:
    """The one option (or Unknown) that `text` names, by letter or by option text."""
    t = _MARKDOWN.sub("", text).strip()
    m = _LETTER.match(t)
    if m and (len(t) <= 3 or t[m.end() - 1:m.end()] in ").:" or t[:1] == "("):
        k = ord(m.group(1).upper()) - ord("A")
        if k < len(choices):
            return choices[k]
    named = {c for c in choices if re.search(rf"(?<!\w){re.escape(c.lower())}(?!\w)", t.lower())}
    unknown = bool(_LABEL_RE["Unknown"].search(t) or _WEAK_RE.search(t))
    if len(named) == 1 and not unknown:
        return named.pop()
    if unknown and not named:
        return "Unknown"
    return None


def extract_choice(reply: str | None, choices: list[str]) -> Extraction:
    """The option a reply commits to (its text), or 'Unknown', with the deciding step:
    `final_answer`, `strict` (the reply is a letter, an option or Unknown), `conclusion`;
    otherwise `unparsed` (for the judge). Options are lettered (A), (B), ... in prompts."""
    if reply is None or not reply.strip():
        return Extraction(None, "empty")
    text = _MARKDOWN.sub("", reply)
    for candidate in reversed(_final_answer_candidates(text)):
        choice = _choice_in(candidate, choices)
        if choice:
            return Extraction(choice, "final_answer", candidate.strip()[:200])
    bare = text.strip().rstrip(".!。")
    if len(bare) <= max(len(c) for c in choices) + 6:
        choice = _choice_in(bare, choices)
        if choice:
            return Extraction(choice, "strict", bare)
    for sentence in _concluding_sentences(text):
        choice = _choice_in(sentence, choices)
        if choice:
            return Extraction(choice, "conclusion", sentence.strip()[:200])
    return Extraction(None, "unparsed")
