"""Parsing MuSoBench replies into solution sets, confidences and recheck decisions.

Built for the formats models really produce, not only the prompt's example:
tables with or without outer pipes, bold or numbered "Solution" headers
(`**Solution 1:**`, `### Solution 2`, `1.`), bold cells, `Course 0` / `T 2`,
missing teacher columns; subsets as `{1, 3}`, `[1, 3]` or `1 + 3 = 4`, with
words around them. Duplicates are removed. An answer that cannot be a
solution of the instance (a course missing, a teacher that really differs
from the course's fixed teacher, an element outside the set) is kept as an
*invalid* answer: it counts in the answer set, so over-generation lowers
precision instead of being dropped (a pitfall of the authors' code).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

Answer = tuple[Any, ...]  # a canonical solution, or ("invalid", description)


@dataclass
class ParsedAnswer:
    answers: list[Answer] = field(default_factory=list)  # de-duplicated, in order of appearance
    invalid_reasons: list[str] = field(default_factory=list)
    claimed_total: int | None = None
    error: str | None = None  # why nothing could be parsed

    @property
    def answer_set(self) -> set[Answer]:
        return set(self.answers)


def _add(parsed: ParsedAnswer, seen: set[Answer], answer: Answer, reason: str | None = None) -> None:
    if answer in seen:
        return
    seen.add(answer)
    parsed.answers.append(answer)
    if reason:
        parsed.invalid_reasons.append(reason)


_TOTAL = re.compile(r"total\W{0,3}(\d+)\W{0,3}(?:feasible\s+)?(?:solutions|schedules|subsets)", re.I)
_SOLUTION_HEADER = re.compile(r"^\W*(?:solution|schedule|subset|option)\s*#?\s*\d+\b|^\s*\d+[.)]\s*$", re.I)
_CELL = r"\s*[*_`]*\s*{prefix}\s*[*_`]*\s*(\d+)\s*[*_`]*\s*"
_ROW = re.compile(
    r"^\s*\|?" + _CELL.format(prefix=r"course\s*_?") + r"\|"
    + _CELL.format(prefix=r"(?:t|time)?\s*_?") + r"\|"
    + _CELL.format(prefix=r"(?:r|room)?\s*_?")
    + r"(?:\|" + _CELL.format(prefix=r"(?:p|teacher)?\s*_?") + r")?\|?\s*$",
    re.I,
)
_HEADER_ROW = re.compile(r"^\s*\|?\s*[*_]*course[*_]*\s*\|\s*[*_]*time", re.I)


def _claimed_total(text: str) -> int | None:
    m = _TOTAL.findall(text)
    return int(m[-1]) if m else None


def parse_timetables(text: str, problem: dict[str, Any]) -> ParsedAnswer:
    """Schedules in `text`, canonical as ((time, room), ...) in course order."""
    courses = problem["courses"]
    parsed = ParsedAnswer(claimed_total=_claimed_total(text))
    seen: set[Answer] = set()
    current: dict[int, tuple[int, int, int | None]] = {}
    blocks: list[dict[int, tuple[int, int, int | None]]] = []

    def flush() -> None:
        if current:
            blocks.append(dict(current))
            current.clear()

    for line in text.splitlines():
        if _HEADER_ROW.match(line) or _SOLUTION_HEADER.match(line):
            flush()
            continue
        m = _ROW.match(line)
        if not m:
            continue
        course, time, room = int(m.group(1)), int(m.group(2)), int(m.group(3))
        teacher = int(m.group(4)) if m.group(4) is not None else None
        if course in current:  # a course repeats: the next schedule started without a header
            flush()
        current[course] = (time, room, teacher)
    flush()

    if not blocks:
        parsed.error = "no timetable rows found"
        return parsed
    for block in blocks:
        cells = sorted(block.items())
        raw = "; ".join(f"Course{c}: T{t} R{r} P{'?' if p is None else p}" for c, (t, r, p) in cells)
        if set(block) != set(range(len(courses))):
            _add(parsed, seen, ("invalid", raw), f"courses {sorted(block)} instead of 0..{len(courses) - 1}")
            continue
        wrong_teacher = [c for c, (_, _, p) in cells if p is not None and p != courses[c]["teacher"]]
        if wrong_teacher:
            _add(parsed, seen, ("invalid", raw), f"teacher differs from the instance for courses {wrong_teacher}")
            continue
        _add(parsed, seen, tuple((t, r) for _, (t, r, _) in cells))
    return parsed


_ECHO = re.compile(r"given the set|set of unique integers|find all subsets|output format|example", re.I)
_BRACKETED = re.compile(r"[\[{]\s*(\d+(?:\s*[,;]\s*\d+)*)\s*[\]}]")
_PLUS = re.compile(r"(\d+(?:\s*\+\s*\d+)+)\s*=\s*\d+")
_BARE_AFTER_HEADER = re.compile(r"^\W*(?:solution|subset)\s*#?\s*\d+\s*[:：]\s*\**\s*(\d+(?:\s*,\s*\d+)+)\s*\**\s*$", re.I)


def parse_subsets(text: str, problem: dict[str, Any]) -> ParsedAnswer:
    """Subsets in `text`, canonical as sorted tuples. Lines echoing the question are skipped."""
    values = set(problem["values"])
    parsed = ParsedAnswer(claimed_total=_claimed_total(text))
    seen: set[Answer] = set()
    found_any = False
    for line in text.splitlines():
        if _ECHO.search(line):
            continue
        groups = [m.group(1) for m in _BRACKETED.finditer(line)]
        groups += [m.group(1).replace("+", ",") for m in _PLUS.finditer(line)]
        if not groups:
            bare = _BARE_AFTER_HEADER.match(line)
            if bare:
                groups = [bare.group(1)]
        for g in groups:
            nums = [int(x) for x in re.split(r"[,;]", g)]
            found_any = True
            if len(set(nums)) != len(nums):
                _add(parsed, seen, ("invalid", str(sorted(nums))), f"{sorted(nums)}: repeated element")
            elif not set(nums) <= values:
                _add(parsed, seen, ("invalid", str(sorted(nums))), f"{sorted(nums)}: elements outside the set")
            else:
                _add(parsed, seen, tuple(sorted(nums)))
    if not found_any:
        parsed.error = "no subsets found"
    return parsed


_CONF_TAGGED = re.compile(r"\[\[\s*confidence\s*:?\s*\\?boxed\{\s*(\d+(?:\.\d+)?)\s*%?\s*\}\s*\]\]", re.I)
_CONF_BOXED = re.compile(r"\\boxed\{\s*(\d+(?:\.\d+)?)\s*%?\s*\}")
_CONF_KEYWORD = re.compile(r"confidence[^0-9\n]{0,40}?(\d+(?:\.\d+)?)\s*(%|/\s*100|out of 100)?", re.I)
_CONF_BARE = re.compile(r"^\W*(\d+(?:\.\d+)?)\s*(%|/\s*100)?\W*$")


def parse_confidence(text: str) -> tuple[float | None, str]:
    """Confidence 0-100 from a reply, and how it was found ('tagged', 'boxed', 'keyword',
    'bare', or why none was)."""
    for method, pattern in (("tagged", _CONF_TAGGED), ("boxed", _CONF_BOXED), ("keyword", _CONF_KEYWORD),
                            ("bare", _CONF_BARE)):
        m = pattern.search(text.strip())
        if m:
            value = float(m.group(1))
            if 0 <= value <= 100:
                return value, method
            return None, f"out of range: {value}"
    return None, "no confidence found"


def parse_recheck(text: str) -> str | None:
    """'unchanged' or 'changed' by the last marker in the reply; None without a marker."""
    marks = [(m.start(), m.group(1).upper()) for m in re.finditer(r"\[\[\s*(UNCHANGE|CHANGE)D?\s*\]\]", text, re.I)]
    if not marks:
        return None
    return "unchanged" if marks[-1][1] == "UNCHANGE" else "changed"
