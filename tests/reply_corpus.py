"""The reply corpus (tests/replies/*.yaml): written replies with the reading a careful grader makes.

Each kind's file is a list of cases; `reading(kind, case)` reads a case exactly as the pipeline
does and `expected(kind, case)` gives what the case says, in the same shape, so the test compares
them and `agreement()` counts them per kind (printed at the end of every test run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from llm_calls import reply_with_reasoning
from validators.muso_read import read_subsets, read_timetables
from validators.read import read_label, read_options
from validators.s1_read import check_answer, format_type

CORPUS = Path(__file__).with_name("replies")
KINDS = ("label", "choice", "choices", "subsetsum", "timetabling", "s1_format", "s1_exact")
CHOICE_OPTIONS = ["Paris", "London", "Berlin", "Madrid"]
SUBSETSUM_VALUES = [2, 3, 5, 6, 7, 8, 9, 11, 12, 14]
TIMETABLING = {"courses": [{"times": [3, 4], "rooms": [8], "teacher": 2},
                           {"times": [0, 4], "rooms": [3], "teacher": 2},
                           {"times": [3, 4], "rooms": [0], "teacher": 1}]}


def cases(kind: str) -> list[dict[str, Any]]:
    return yaml.safe_load((CORPUS / f"{kind}.yaml").read_text(encoding="utf-8"))


def _reply(case: dict[str, Any]) -> str | None:
    """The reply as the ledger hands it to readers (a separate reasoning field put back inline)."""
    return reply_with_reasoning(case["reply"], case.get("reasoning"), case.get("finish", "stop"))


def _options(answer: Any) -> Any:
    return sorted(answer) if isinstance(answer, frozenset) else answer


def reading(kind: str, case: dict[str, Any]) -> Any:
    reply = _reply(case)
    if kind == "label":
        return read_label(reply, options=case.get("options")).answer
    if kind == "choice":
        got = _options(read_options(reply, case.get("options", CHOICE_OPTIONS), unknown=case.get("unknown", False),
                                   single=True).answer)
        return got[0] if isinstance(got, list) and len(got) == 1 else got
    if kind == "choices":
        return _options(read_options(reply, case.get("options", 4)).answer)
    if kind in ("subsetsum", "timetabling"):
        parsed = (read_subsets(reply, {"values": case.get("values", SUBSETSUM_VALUES)}) if kind == "subsetsum"
                  else read_timetables(reply, TIMETABLING))
        valid = sorted(a for a in parsed.answers if a[0] != "invalid")
        out = {"answers": [[list(x) if isinstance(x, tuple) else x for x in a] for a in valid],
               "invalid": len(parsed.answers) - len(valid)}
        if "total" in case:
            out["total"] = parsed.claimed_total
        return out
    if kind == "s1_format":
        return format_type(reply, case.get("finish", "stop"))[0]
    if kind == "s1_exact":
        return check_answer(reply, case["check"], case["question"])
    raise ValueError(kind)


def expected(kind: str, case: dict[str, Any]) -> Any:
    if kind in ("subsetsum", "timetabling"):
        out = {"answers": sorted(case["expect"]), "invalid": case.get("invalid", 0)}
        if "total" in case:
            out["total"] = case["total"]
        return out
    return case["expect"]


def agreement() -> dict[str, tuple[int, int]]:
    """Per kind: (cases read as expected, cases)."""
    out = {}
    for kind in KINDS:
        cs = cases(kind)
        out[kind] = (sum(reading(kind, c) == expected(kind, c) for c in cs), len(cs))
    return out
