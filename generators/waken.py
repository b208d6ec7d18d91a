"""WakenLLM items (paper 000, section 3.1): seeded 1:1 samples of solvable and Unknown items.

A dataset's items come from the offline FLD-style generator or from a loaded
source (FLD from the hub or files; FOLIO; ScienceQA topics, whose Unknown
items are made by deleting two supporting sentences and verified by a judge,
paper appendix C). Half the items are solvable (True /
False, balanced as far as the pool allows) and half Unknown; the sample is a
function of (seed, dataset name), and the True/False balance is recorded.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from configuration import WakenDataset, derived_seed
from generators.fld import generate_problem
from generators.sources import SourceRecord, SourceSpec, load_source
from solvers.fol import Verdict, verify

ITEMS_VERSION = "waken-1"


class ItemsError(ValueError):
    """A dataset cannot supply the requested items."""


def dataset_seed(seed: int, name: str) -> int:
    return derived_seed(seed, name, ITEMS_VERSION)


def _split(count: int) -> tuple[int, int, int]:
    """(true, false, unknown) counts for `count` items: half Unknown, the rest split T/F."""
    unknown = count // 2
    solvable = count - unknown
    return (solvable + 1) // 2, solvable // 2, unknown


def verified_label(extra: dict[str, Any]) -> str | None:
    """FOLIO: the label z3 proves from `premises-FOL` / `conclusion-FOL` (True, False, Unknown), or
    why none was proved (Inconsistent, Timeout, unparsed: ...); None when the FOL is absent."""
    v = fol_verdict(extra)
    if v is None:
        return None
    return v.label if v.parsed else f"unparsed: {v.reason}"[:300]


def fol_verdict(extra: dict[str, Any]) -> Verdict | None:
    premises, conclusion = extra.get("premises_fol"), extra.get("conclusion_fol")
    if not premises or not conclusion:
        return None
    return verify(list(premises), str(conclusion))


def fol_checks(name: str, records: Sequence[SourceRecord]) -> list[dict[str, Any]]:
    """FOLIO: one row per source row (not only the sampled items) for `waken.fol_checks`: whether its
    FOL was read (and why not), the repairs made, what z3 proved and whether that is the gold label."""
    rows = []
    for r in records:
        v = fol_verdict(r.extra)
        rows.append({
            "dataset": name, "origin": r.origin, "row_number": r.row_number, "source_id": r.source_id,
            "story_id": None if r.extra.get("story_id") is None else str(r.extra["story_id"]), "gold": r.label,
            "parsed": bool(v and v.parsed), "reason": "no premises-FOL or conclusion-FOL" if v is None else v.reason,
            "warnings": json.dumps(list(v.warnings) if v else []), "proved": v.label if v else None,
            "agrees": None if v is None or not v.parsed else v.label == r.label,
        })
    return rows


def fol_summary(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per source file: rows, parsed, agreeing with gold, disagreeing, and rows read with a repair."""
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        s = out.setdefault(r["origin"], {"rows": 0, "parsed": 0, "agree": 0, "disagree": 0, "repaired": 0})
        s["rows"] += 1
        s["parsed"] += r["parsed"]
        s["agree"] += r["agrees"] is True
        s["disagree"] += r["agrees"] is False
        s["repaired"] += r["warnings"] != "[]"
    return out


def _row(name: str, spec: WakenDataset, item_id: str, label: str, context: str, question: str,
         origin: str, original_label: str | None, extra: dict[str, Any], seed: int) -> dict[str, Any]:
    return {
        "dataset": name, "item_id": item_id, "kind": spec.kind, "form": spec.form,
        "sample_type": "unsolvable" if label == "Unknown" else "solvable",
        "label": label, "original_label": original_label, "context": context, "question": question,
        "origin": origin, "extra": extra, "dataset_seed": seed, "items_version": ITEMS_VERSION,
        "verified_label": None,
    }


def load_records(spec: WakenDataset) -> list[SourceRecord]:
    """The dataset's source records ([] for the offline generator)."""
    if spec.source is None:
        return []
    src = spec.source
    topics = tuple(spec.topics) if spec.topics else SourceSpec("scienceqa", path="-").topics
    return load_source(SourceSpec(spec.kind, hub=src.hub, config=src.config, split=src.split, path=src.path,
                                  topics=topics))


_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[a-z]+")
_STOP = {"the", "a", "an", "of", "to", "and", "is", "are", "in", "on", "which", "what", "this", "that", "it", "its"}


def supporting_sentences(context: str, question: str, answer: str) -> list[int]:
    """Indexes of the context's sentences, most supporting first: ranked by how many content
    words they share with the question and the correct option (ties: earlier first)."""
    target = {w for w in _WORD.findall(f"{question} {answer}".lower()) if w not in _STOP}
    sentences = [s for s in _SENTENCE.split(context.strip()) if s]
    score = [len(target & set(_WORD.findall(s.lower()))) for s in sentences]
    return sorted(range(len(sentences)), key=lambda i: (-score[i], i))


def without_support(context: str, question: str, answer: str) -> tuple[str, list[str]] | None:
    """The context with its two most supporting sentences deleted (paper appendix C), and those
    sentences; None when the context has fewer than two sentences."""
    sentences = [s for s in _SENTENCE.split(context.strip()) if s]
    if len(sentences) < 2:
        return None
    drop = set(supporting_sentences(context, question, answer)[:2])
    return " ".join(s for i, s in enumerate(sentences) if i not in drop), [sentences[i] for i in sorted(drop)]


# verify(candidates) -> for each candidate item: (no unique answer remains?, evidence)
Verifier = Callable[[list[dict[str, Any]]], list[tuple[bool, str]]]


def sample_choice_items(name: str, spec: WakenDataset, records: Sequence[SourceRecord], count: int,
                        rng: random.Random, dseed: int, verify: Verifier | None) -> list[dict[str, Any]]:
    """ScienceQA items: half solvable (the correct option is the label), half Unknown: two
    supporting sentences deleted, kept only if `verify` confirms no unique answer remains
    (failures are replaced from the pool)."""
    pool = sorted(records, key=lambda r: r.source_id)
    rng.shuffle(pool)
    n_unknown = count // 2
    n_solvable = count - n_unknown
    if len(pool) < count:
        raise ItemsError(f"{name}: {count} items wanted, the source has {len(pool)} in topics {spec.topics}")
    solvable, rest = pool[:n_solvable], pool[n_solvable:]
    rows = []
    for r in solvable:
        answer = (r.choices or [])[r.answer_index or 0]
        row = _row(name, spec, f"{name}-{r.source_id}", answer, r.context, r.question, r.origin, answer,
                   {"choices": r.choices, "answer_index": r.answer_index, "topic": r.topic, "source_id": r.source_id}, dseed)
        rows.append(row)
    unknown: list[dict[str, Any]] = []
    rejected = 0
    candidates = [r for r in rest if r.choices and without_support(r.context, r.question, r.choices[r.answer_index or 0])]
    while len(unknown) < n_unknown and candidates:
        batch, candidates = candidates[: n_unknown - len(unknown)], candidates[n_unknown - len(unknown):]
        drafts = []
        for r in batch:
            answer = (r.choices or [])[r.answer_index or 0]
            modified, deleted = without_support(r.context, r.question, answer)  # type: ignore[misc]
            drafts.append(_row(name, spec, f"{name}-{r.source_id}-unknown", "Unknown", modified, r.question, r.origin,
                               answer, {"choices": r.choices, "answer_index": r.answer_index, "topic": r.topic,
                                        "source_id": r.source_id, "original_context": r.context,
                                        "deleted_sentences": deleted}, dseed))
        verdicts = verify(drafts) if verify else [(True, "not verified")] * len(drafts)
        for draft, (ok, evidence) in zip(drafts, verdicts):
            draft["extra"]["verification"] = evidence
            if ok:
                unknown.append(draft)
            else:
                rejected += 1
    if len(unknown) < n_unknown:
        raise ItemsError(f"{name}: only {len(unknown)} of {n_unknown} Unknown items passed verification "
                         f"({rejected} rejected); the pool is exhausted")
    for row in unknown:
        row["extra"]["rejected_before"] = rejected
    return rows + unknown


def build_items(name: str, spec: WakenDataset, count: int, seed: int,
                records: Sequence[SourceRecord] | None = None, verify: Verifier | None = None) -> list[dict[str, Any]]:
    """`count` items for dataset `name` (see the module docstring); `records` saves reloading the source."""
    dseed = dataset_seed(seed, name)
    rng = random.Random(dseed)
    n_true, n_false, n_unknown = _split(count)
    if spec.generator is not None:
        rows = []
        wanted = ["True"] * n_true + ["False"] * n_false + ["Unknown"] * n_unknown
        for k, label in enumerate(wanted):
            depth = rng.randint(*spec.generator.depth)
            p = generate_problem(rng, depth, label, spec.generator.max_distractors)
            rows.append(_row(name, spec, f"{name}-gen-{k:04d}", p.label, p.context(), p.hypothesis_text(),
                             "generator:fld", p.verdict, {"depth": p.depth, "distractors": p.distractors}, dseed))
        return rows
    if records is None:
        records = load_records(spec)
    if spec.kind == "scienceqa":
        return sample_choice_items(name, spec, records, count, rng, dseed, verify)
    return sample_records(name, spec, records, (n_true, n_false, n_unknown), rng, dseed)


def sample_records(name: str, spec: WakenDataset, records: Sequence[SourceRecord], counts: tuple[int, int, int],
                   rng: random.Random, dseed: int) -> list[dict[str, Any]]:
    pools: dict[str, list[SourceRecord]] = {"True": [], "False": [], "Unknown": []}
    for r in sorted(records, key=lambda r: r.source_id):
        if r.label in pools:
            pools[r.label].append(r)
    n_true, n_false, n_unknown = counts
    if len(pools["Unknown"]) < n_unknown:
        raise ItemsError(f"{name}: {n_unknown} Unknown items wanted, the source has {len(pools['Unknown'])}")
    solvable = n_true + n_false
    if len(pools["True"]) + len(pools["False"]) < solvable:
        raise ItemsError(f"{name}: {solvable} solvable items wanted, the source has "
                         f"{len(pools['True']) + len(pools['False'])}")
    # balance True/False as far as the pool allows
    take_true = min(n_true + max(0, n_false - len(pools["False"])), len(pools["True"]))
    take_false = solvable - take_true
    chosen = (rng.sample(pools["True"], take_true) + rng.sample(pools["False"], take_false)
              + rng.sample(pools["Unknown"], n_unknown))
    rows = []
    for r in chosen:
        row = _row(name, spec, f"{name}-{r.source_id}", r.label or "", r.context, r.question, r.origin,
                   r.original_label, {**r.extra, "source_id": r.source_id, "row_number": r.row_number}, dseed)
        row["verified_label"] = verified_label(r.extra) if spec.kind == "folio" else None
        rows.append(row)
    return rows
