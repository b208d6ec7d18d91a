"""MuSoBench's readers (paper 001): solution sets from the final answer block, confidence, recheck.

They run the generic reading ladder of `validators/read.py` (its docstring) on MuSoBench's
answers: a timetable per solution, or a subset of the instance's numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from validators.reply_text import INT_MAX, Reading, answer_part, plain, text_to_read

Answer = tuple[Any, ...]  # a canonical solution, or ("invalid", description)


@dataclass
class ParsedAnswer:
    """A MuSoBench reply's solutions: de-duplicated, in order; invalid ones kept as ("invalid", text)
    so over-generation lowers precision instead of being dropped (a pitfall of the authors' code)."""

    answers: list[Answer] = field(default_factory=list)
    invalid_reasons: list[str] = field(default_factory=list)
    claimed_total: int | None = None
    error: str | None = None  # why nothing could be read
    method: str = "final_block"

    @property
    def answer_set(self) -> set[Answer]:
        return set(self.answers)

    def add(self, answer: Answer, seen: set[Answer], reason: str | None = None) -> None:
        if answer in seen:
            return
        seen.add(answer)
        self.answers.append(answer)
        if reason:
            self.invalid_reasons.append(reason)


_TOTAL = re.compile(r"total\W{0,3}(\d+)\W{0,3}(?:feasible\s+)?(?:solutions|schedules|subsets)", re.I)
_ANSWER_HEADING = re.compile(r"^\W*(?:final\s+answer|answer|final\s+solutions?|all\s+(?:feasible\s+)?(?:solutions|"
                             r"subsets|schedules))\W*(?:[:：].*)?$", re.I)


def _claimed_total(text: str) -> tuple[int | None, str | None]:
    m = _TOTAL.findall(text)
    if not m:
        return None, None
    value = int(m[-1])
    return (value, None) if value <= INT_MAX else (None, f"claimed total {m[-1]} is out of range")


def _muso_text(reply: str | None) -> tuple[str | None, ParsedAnswer | None]:
    if reply is None or not reply.strip():
        return None, ParsedAnswer(error="empty reply", method="empty")
    _, answer, finished = answer_part(reply)
    if not answer:
        return None, ParsedAnswer(error="reply ended inside its thinking" if not finished else "empty answer",
                                  method="unfinished_thinking" if not finished else "empty")
    text = plain(answer)
    lines = text.splitlines()
    heads = [k for k, line in enumerate(lines) if _ANSWER_HEADING.match(line)]
    if heads:  # an explicit answer heading: what follows the last one is the answer
        return "\n".join(lines[heads[-1]:]), None
    return text, None


_SOLUTION_HEADER = re.compile(r"^\W*(?:solution|schedule|subset|option)\s*#?\s*(\d+)\b|^\s*(\d+)[.)]\s*$", re.I)
_CELL = r"\s*{prefix}\s*(\d+)\s*"
_ROW = re.compile(
    r"^\s*\|?" + _CELL.format(prefix=r"course\s*_?") + r"\|"
    + _CELL.format(prefix=r"(?:t|time)?\s*_?") + r"\|"
    + _CELL.format(prefix=r"(?:r|room)?\s*_?")
    + r"(?:\|" + _CELL.format(prefix=r"(?:p|teacher)?\s*_?") + r")?\|?\s*$",
    re.I,
)
_HEADER_ROW = re.compile(r"^\s*\|?\s*course\s*\|\s*time", re.I)


def read_timetables(reply: str | None, problem: Mapping[str, Any]) -> ParsedAnswer:
    """Schedules in the reply's answer (thinking set aside; after the last answer heading when
    there is one; from the last "Solution 1" on), canonical as ((time, room), ...) in course order.
    Tables with or without outer pipes, bold or numbered headers, `Course 0` / `T 2`, teacher
    cells spelled `P2`, `2` or `Teacher 2`, no teacher column."""
    text, done = _muso_text(reply)
    if done:
        return done
    courses = problem["courses"]
    total, why = _claimed_total(text)
    parsed = ParsedAnswer(claimed_total=total)
    seen: set[Answer] = set()
    current: dict[int, tuple[int, int, int | None]] = {}
    blocks: list[dict[int, tuple[int, int, int | None]]] = []

    def flush() -> None:
        if current:
            blocks.append(dict(current))
            current.clear()

    for line in text.splitlines():
        header = _SOLUTION_HEADER.match(line)
        if header or _HEADER_ROW.match(line):
            flush()
            if header and int(header.group(1) or header.group(2)) == 1:
                blocks.clear()  # a new "Solution 1": the answer starts again (earlier tables were drafts)
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
        parsed.error = why or "no timetable rows found"
        return parsed
    for block in blocks:
        cells = sorted(block.items())
        raw = "; ".join(f"Course{c}: T{t} R{r} P{'?' if p is None else p}" for c, (t, r, p) in cells)
        if set(block) != set(range(len(courses))):
            parsed.add(("invalid", raw), seen, f"courses {sorted(block)} instead of 0..{len(courses) - 1}")
            continue
        wrong_teacher = [c for c, (_, _, p) in cells if p is not None and p != courses[c]["teacher"]]
        if wrong_teacher:
            parsed.add(("invalid", raw), seen, f"teacher differs from the instance for courses {wrong_teacher}")
            continue
        parsed.add(tuple((t, r) for _, (t, r, _) in cells), seen)
    return parsed


# a group of numbers: "14, 48", "14; 48", "14 and 48", "14, 27 and 48", "14 & 48"
_GROUP = r"(-?\d+(?:\s*(?:[,;&]\s*(?:and\s+)?|and\s+)\s*-?\d+)*)"
_PLUS = r"(-?\d+(?:\s*\+\s*-?\d+)+)"  # "14 + 48"
_BRACKETED = rf"[\[{{(]\s*{_GROUP}\s*[\]}})]"
# what may follow a subset on its line: its stated sum ("= 62", "sums to 62"), a note in brackets,
# a check mark ("✓"); group 1 is the stated sum
_SUM_TAIL = (r"\s*(?:(?:=|→|->|sums?(?:\s+to)?|totals?)\s*[=:]?\s*(-?\d+))?\s*(?:\(.{0,40}\))?\s*[.,;]?"
             r"\s*(?:[✓✔✅☑]\ufe0f?\s*)?$")
# "Solution 2: {1, 3}", "Subset 2: 1, 3", "2. {1, 3}", "Solution 1: 14 + 48 = 62": a numbered
# solution, anywhere on its line
_LABELLED = re.compile(
    rf"(?:(?<![a-z])(?:solution|subset)\s*#?\s*(\d+)\s*[:：.)=-]?\s*|^\s*(\d+)[.)]\s+)"
    rf"(?:{_BRACKETED}|{_PLUS}|{_GROUP}(?=\s*(?:[=(✓✔✅☑]|$))){_SUM_TAIL}", re.I | re.M)
# an unnumbered subset line: "{1, 3}", "- [1, 3]", "1 + 3 = 4", or several groups "{1, 3}, {2, 2}"
_BARE = re.compile(rf"^\s*(?:[-•*]\s*)?(?:{_BRACKETED}|{_PLUS}){_SUM_TAIL}", re.I)
_GROUPS_LINE = re.compile(rf"^\s*(?:{_BRACKETED}\s*(?:[,;]|and)?\s*){{2,}}$", re.I)
# "The subsets are {1, 3} and {2, 2}.": an answer stated in a sentence
_STATED = re.compile(r"^\W*(?:so,?\s+|therefore,?\s+|thus,?\s+)?(?:the\s+)?(?:(?:feasible|valid|possible)\s+)?"
                     r"(?:subsets?|solutions?|answers?)(?:\s+(?:list|set))?\s*(?:are|is|[:：])", re.I)
_FILLER = re.compile(r"^\s*(?:(?:solution|subset)\s*#?\s*\d+\s*[:：]?|total\b.*|[-=|]*|\.{3}|…)\s*$", re.I)


_TABLE_ROW = re.compile(r"^\s*\|(.*)\|\s*$")
_SUBSET_COLUMN = re.compile(r"subset|elements?|numbers|members|set\b|chosen|selected", re.I)


_CELL = re.compile(rf"(?:{_BRACKETED}|{_PLUS}|{_GROUP})")


def _cell_group(cell: str) -> str | None:
    """The number group a whole table cell holds ("{14, 48}", "14 + 48", "14, 48"), else None."""
    g = _CELL.fullmatch(cell)
    return (g.group(1) or (g.group(2) or "").replace("+", ",") or g.group(3)) if g else None


def _table_subsets(lines: list[str], target: int | None) -> list[str]:
    """The subsets of a Markdown table, one per row: the cells of the column whose header names
    subsets ("Subset", "Elements", "Numbers"), else each row's one cell that holds a bracketed group or
    several numbers. A row whose sum column states another sum than `target` is a check, not a
    solution; a row with no such cell names none."""
    header: list[str] | None = None
    column: int | None = None
    sum_column: int | None = None
    out: list[str] = []
    for line in lines:
        m = _TABLE_ROW.match(line)
        if not m:
            continue
        cells = [c.strip() for c in m.group(1).split("|")]
        if all(re.fullmatch(r":?-{2,}:?|", c) for c in cells):
            continue
        if header is None and not any(re.search(r"\d", c) for c in cells):
            header = cells
            column = next((k for k, c in enumerate(cells) if _SUBSET_COLUMN.search(c)), None)
            sum_column = next((k for k, c in enumerate(cells) if re.search(r"\bsum\b|total", c, re.I)), None)
            continue
        group = None
        if column is not None and column < len(cells):
            group = _cell_group(cells[column])
        elif column is None:  # no subset column: the row's one cell with a bracketed group or several numbers
            found = [g for c in cells if (g := _cell_group(c)) and (c.lstrip()[:1] in "[{(" or len(re.findall(r"\d+", c)) > 1)]
            group = found[0] if len(found) == 1 else None
        if not group:
            continue
        if target is not None and sum_column is not None and sum_column < len(cells):
            stated = re.fullmatch(r"\s*(-?\d+)\s*", cells[sum_column])
            if stated and int(stated.group(1)) != target:
                continue
        out.append(group)
    return out


def _subset_block(text: str, target: int | None = None) -> list[str]:
    """The number groups of the final answer: the last numbered sequence of solutions (a new
    "Solution 1" starts a new one), else the last run of unnumbered subset lines. An unnumbered
    line that states a sum other than `target` ("45 + 16 = 61" in a list of checks) is a check the
    model made, not a solution it claims; a numbered one is claimed, whatever its sum."""
    numbered: list[str] = []
    last_run: list[str] = []
    run: list[str] = []
    table = _table_subsets(text.splitlines(), target)
    for line in text.splitlines() + ["<end>"]:
        if _TABLE_ROW.match(line):
            continue  # a table's rows are read as a whole (`_table_subsets`)
        labelled = list(_LABELLED.finditer(line))
        if labelled:
            for m in labelled:
                if int(m.group(1) or m.group(2)) == 1:
                    numbered = []
                numbered.append(m.group(3) or (m.group(4) or "").replace("+", ",") or m.group(5))
            continue
        bare = _BARE.match(line)
        if bare:
            stated = bare.group(3)
            if target is None or stated is None or int(stated) == target:
                run.append(bare.group(1) or bare.group(2).replace("+", ","))
        elif _GROUPS_LINE.match(line) or (_STATED.match(line) and re.search(_BRACKETED, line)):
            run += [m.group(1) for m in re.finditer(_BRACKETED, line)]
        elif not (_FILLER.match(line) and line != "<end>"):
            if run:
                last_run = run
            run = []
    return numbered or table or last_run


def read_subsets(reply: str | None, problem: Mapping[str, Any]) -> ParsedAnswer:
    """Subsets from the reply's final answer: thinking set aside; after the last answer heading
    when there is one; then the last numbered sequence of solutions ("Solution k: {..}"), or if
    the reply numbers none, the last run of subset lines (blank lines and the "Total" line may sit
    between them). Scratch arithmetic, drafts and restated inputs are reasoning, not answers.
    Canonical as sorted tuples."""
    text, done = _muso_text(reply)
    if done:
        return done
    values = set(problem["values"])
    total, why = _claimed_total(text)
    parsed = ParsedAnswer(claimed_total=total)
    block = _subset_block(text, problem.get("target"))
    if not block:
        parsed.error = why or "no subsets found"
        return parsed
    seen: set[Answer] = set()
    for g in block:
        nums = [int(x) for x in re.findall(r"-?\d+", g)]
        if len(set(nums)) != len(nums):
            parsed.add(("invalid", str(sorted(nums))), seen, f"{sorted(nums)}: repeated element")
        elif not set(nums) <= values:
            parsed.add(("invalid", str(sorted(nums))), seen, f"{sorted(nums)}: elements outside the set")
        else:
            parsed.add(tuple(sorted(nums)), seen)
    return parsed


_CONF_TAGGED = re.compile(r"\[\[\s*confidence\s*:?\s*\\?boxed\{\s*(\d+(?:\.\d+)?)\s*%?\s*\}\s*\]\]", re.I)
_CONF_BOXED = re.compile(r"\\boxed\{\s*(\d+(?:\.\d+)?)\s*%?\s*\}")
# "Confidence: 40/100", "my confidence level is about 90%": the number right after the word and a few
# linking words only ("Confidence is high since all 3 subsets were checked" states no number)
_CONF_KEYWORD = re.compile(
    r"confidence(?:\s+(?:level|score|rating))?\s*(?:is|of|would be|[:=：-])?\s*(?:about|around|approximately|roughly|"
    r"~|≈)?\s*(?:(?:very\s+|fairly\s+)?(?:high|low|medium|moderate)\s*)?[(\[]?\s*\**\s*(\d+(?:\.\d+)?)\s*"
    r"(%|/\s*100|out of 100|\s*percent\b|\s*per\s*cent\b)?", re.I)
# "I am 95% confident", "95% sure", "with 80% certainty", "90 percent sure", "85 per cent certain that"
_PERCENT = r"(?:%|\s*per\s*cent\b|\s*percent\b)"
_CONF_PERCENT = re.compile(rf"(\d+(?:\.\d+)?){_PERCENT}\s*(?:(?:very\s+)?(?:confident|confidence|sure|certain|certainty)|"
                           r"(?:of\s+)?(?:confidence|certainty))", re.I)
# "85 out of 100", "85/100": a score on the 0-100 scale the confidence turn asks for
_CONF_SCALE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(?:/\s*100|out\s+of\s+(?:a\s+)?(?:hundred|100))(?!\.?\d)", re.I)
_CONF_BARE = re.compile(r"^\W*(\d+(?:\.\d+)?)\s*(%|/\s*100)?\W*$")


def read_confidence(reply: str | None) -> Reading:
    """Confidence 0-100 from the answer part: `tagged` ([[CONFIDENCE: \\boxed{..}]]), `boxed`,
    `keyword` ("Confidence: 85", "90% sure", "90 percent sure"), `scale` ("85 out of 100", "85/100")
    or `bare`; a value outside 0-100 is `out_of_range`."""
    text, done = text_to_read(reply)
    if done:
        return done
    for method, pattern in (("tagged", _CONF_TAGGED), ("boxed", _CONF_BOXED), ("keyword", _CONF_KEYWORD),
                            ("keyword", _CONF_PERCENT), ("scale", _CONF_SCALE), ("bare", _CONF_BARE)):
        m = list(pattern.finditer(text.strip()))
        if m:
            value = float(m[-1].group(1))
            return Reading(value, method) if 0 <= value <= 100 else Reading(None, "out_of_range", m[-1].group(1))
    return Reading(None, "no_confidence")


def read_recheck(reply: str | None) -> str | None:
    """'unchanged' or 'changed' by the last marker in the answer part; None without a marker."""
    _, answer, _ = answer_part(reply)
    marks = [m.group(1).upper() for m in re.finditer(r"\[\[\s*(UNCHANGE|CHANGE)D?\s*\]\]", answer, re.I)]
    if not marks:
        return None
    return "unchanged" if marks[-1] == "UNCHANGE" else "changed"
