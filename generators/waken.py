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
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from configuration import WakenDataset, derived_seed
from generators.fld import generate_problem
from generators.sources import SourceRecord, load_configured
from solvers.fol import Verdict, verify
from validators.checks import Check

ITEMS_VERSION = "waken-2"


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
        "dataset": name, "item_id": item_id, "kind": spec.kind, "form": spec.context_form,
        "sample_type": "unsolvable" if label == "Unknown" else "solvable",
        "label": label, "original_label": original_label, "context": context, "question": question,
        "origin": origin, "extra": extra, "dataset_seed": seed, "items_version": ITEMS_VERSION,
        "verified_label": None,
    }


def load_records(spec: WakenDataset) -> list[SourceRecord]:
    """The dataset's source records ([] for the offline generator)."""
    if spec.source is None:
        return []
    return load_configured(spec.kind, spec.source, spec.topics)


_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[a-z]+")
_STOP = {"the", "a", "an", "of", "to", "and", "is", "are", "in", "on", "which", "what", "this", "that", "it", "its"}


def study_text(record: SourceRecord, with_lecture: bool = False) -> tuple[str, str]:
    """(supporting text, question as asked) of a ScienceQA row. The supporting text is the hint
    when there is one; Arts rows (figurative language, writing strategies) mostly carry their
    passage inside `question`, after its first line, and then that passage is the supporting text
    and the first line the question. With `with_lecture`, the row's lecture (the release's
    background text for the skill) follows it: the facts a Physics or Biology question rests on,
    which most of those rows have no hint for. The solution is never shown: it states the answer.
    Solvable and Unknown items are shown the same way."""
    lecture = str(record.extra.get("lecture") or "").strip() if with_lecture else ""
    if record.context.strip():
        context, question = record.context.strip(), record.question.strip()
    else:
        head, newline, rest = record.question.strip().partition("\n")
        context, question = (rest.strip(), head.strip()) if newline and rest.strip() else ("", record.question.strip())
    return " ".join(x for x in (context, lecture) if x), question


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(text.strip()) if s]


def _contains(text: str, phrase: str) -> bool:
    phrase = phrase.strip().lower()
    return bool(phrase) and re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text.lower()) is not None


def supporting_sentences(context: str, question: str, answer: str) -> list[int]:
    """Indexes of the context's sentences, most supporting first: those holding the correct option
    verbatim, then by how many content words they share with the question and the correct option
    (ties: earlier first)."""
    target = {w for w in _WORD.findall(f"{question} {answer}".lower()) if w not in _STOP}
    sentences = _sentences(context)
    score = [(_contains(s, answer), len(target & set(_WORD.findall(s.lower())))) for s in sentences]
    return sorted(range(len(sentences)), key=lambda i: (not score[i][0], -score[i][1], i))


def deletion(context: str, question: str, answer: str) -> tuple[str, list[str]] | str:
    """The context with its two most supporting sentences deleted (paper appendix C) and those
    sentences; or, when the result could not be an Unknown item, why: a deletion must leave some
    context, and must not leave the correct option's text verbatim."""
    sentences = _sentences(context)
    if len(sentences) < 3:
        return (f"the supporting text has {len(sentences)} sentence{'s' * (len(sentences) != 1)}: "
                "deleting two leaves no context")
    drop = set(supporting_sentences(context, question, answer)[:2])
    remaining = " ".join(s for i, s in enumerate(sentences) if i not in drop)
    if _contains(remaining, answer):
        return f"the answer {answer!r} is still in the text after deleting two sentences"
    return remaining, [sentences[i] for i in sorted(drop)]


def without_support(context: str, question: str, answer: str) -> tuple[str, list[str]] | None:
    """`deletion`, None when it cannot make an Unknown item."""
    made = deletion(context, question, answer)
    return None if isinstance(made, str) else made


# verify(drafts) -> for each draft: (verdict, evidence); verdict "accepted" (no unique answer remains),
# "rejected" (the judge still sees one), "unverified" (the judge said neither), "failed" (the call failed)
Verifier = Callable[[list[dict[str, Any]]], list[tuple[str, str]]]
MAX_DRAFTS_PER_ITEM = 3  # Unknown drafts tried per Unknown item wanted before the build gives up


def topic_quotas(topics: Sequence[str], count: int) -> dict[str, tuple[int, int]]:
    """(solvable, Unknown) per topic: the paper's 400 Physics + 400 Biology (appendix C) are
    per-topic quotas, each topic half solvable and half Unknown. Odd remainders go to Unknown in
    the first topics and to solvable in the last, so topics stay equal and the whole stays 1:1."""
    n = len(topics)
    unknown, solvable = count // 2, count - count // 2
    u = [unknown // n + (k < unknown % n) for k in range(n)]
    s = [solvable // n + (n - 1 - k < solvable % n) for k in range(n)]
    return {t: (s[k], u[k]) for k, t in enumerate(topics)}


def _choice_row(name: str, spec: WakenDataset, r: SourceRecord, dseed: int, unknown: bool) -> dict[str, Any]:
    context, question = study_text(r, spec.lecture)
    answer = (r.choices or [])[r.answer_index or 0]
    extra = {"choices": r.choices, "answer_index": r.answer_index, "topic": r.topic, "source_id": r.source_id}
    if not unknown:
        return _row(name, spec, f"{name}-{r.source_id}", answer, context, question, r.origin, answer, extra, dseed)
    remaining, deleted = deletion(context, question, answer)  # type: ignore[misc]  # eligible rows only
    return _row(name, spec, f"{name}-{r.source_id}-unknown", "Unknown", remaining, question, r.origin, answer,
                {**extra, "original_context": context, "deleted_sentences": deleted}, dseed)


def sample_choice_items(name: str, spec: WakenDataset, records: Sequence[SourceRecord], count: int,
                        rng: random.Random, dseed: int, verify: Verifier | None,
                        drafts_log: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """ScienceQA items (paper appendix C), per topic quota (`topic_quotas`). The pool is the
    topic's rows whose supporting text allows a deletion (`deletion`), so solvable and Unknown
    items come from one pool and context is no label cue. Half the chosen rows stay solvable (the
    correct option is the label); the rest lose two supporting sentences and become Unknown when
    `verify` accepts them; a rejected or unverified draft is replaced from the topic's pool. Every
    verdict goes to `drafts_log`. ItemsError when a topic's pool is too small, or when the drafts
    run out (at most MAX_DRAFTS_PER_ITEM per Unknown item; the judge deciding none of the first
    batch stops at once), saying how many were rejected, unverified and failed."""
    topics = list(spec.topics or [])
    quotas = topic_quotas(topics, count)
    pools: dict[str, list[SourceRecord]] = {t: [] for t in topics}
    ineligible: dict[str, int] = {}
    for r in sorted(records, key=lambda r: r.source_id):
        if r.topic not in pools or not r.choices:
            continue
        context, question = study_text(r, spec.lecture)
        made = deletion(context, question, r.choices[r.answer_index or 0])
        if isinstance(made, str):
            why = "deleting two sentences leaves no context" if "no context" in made else "the answer stays verbatim"
            ineligible[why] = ineligible.get(why, 0) + 1
            continue
        pools[r.topic].append(r)
    short = {t: (len(pools[t]), sum(quotas[t])) for t in topics if len(pools[t]) < sum(quotas[t])}
    if short:
        raise ItemsError(f"{name}: too few rows allow a two-sentence deletion: "
                         + "; ".join(f"topic {t}: {have} of {want} wanted" for t, (have, want) in short.items())
                         + f" (rows passed over: {ineligible or 'none'})")
    rows: list[dict[str, Any]] = []
    waiting: dict[str, list[SourceRecord]] = {}
    for t in topics:
        rng.shuffle(pools[t])
        n_solvable, _ = quotas[t]
        rows += [_choice_row(name, spec, r, dseed, unknown=False) for r in pools[t][:n_solvable]]
        waiting[t] = pools[t][n_solvable:]
    need = {t: quotas[t][1] for t in topics}
    n_unknown = sum(need.values())
    budget = MAX_DRAFTS_PER_ITEM * n_unknown
    tally = {"accepted": 0, "rejected": 0, "unverified": 0, "failed": 0}
    examples: dict[str, str] = {}
    unknown: list[dict[str, Any]] = []
    first = True
    while any(need.values()):
        batch = []
        for t in topics:
            take = min(need[t], len(waiting[t]), budget - sum(tally.values()) - len(batch))
            batch += [_choice_row(name, spec, r, dseed, unknown=True) for r in waiting[t][:take]]
            waiting[t] = waiting[t][take:]
        if not batch:
            break
        verdicts = verify(batch) if verify else [("accepted", "not verified: no judge")] * len(batch)
        for draft, (verdict, evidence) in zip(batch, verdicts):
            tally[verdict] += 1
            examples.setdefault(verdict, evidence)
            draft["extra"]["verification"] = evidence
            if drafts_log is not None:
                drafts_log.append({"dataset": name, "item_id": draft["item_id"], "source_id": draft["extra"]["source_id"],
                                   "topic": draft["extra"]["topic"], "verdict": verdict, "evidence": evidence[:500]})
            if verdict == "accepted" and need[draft["extra"]["topic"]]:
                need[draft["extra"]["topic"]] -= 1
                unknown.append(draft)
        if first and tally["accepted"] + tally["rejected"] == 0:
            break  # the judge decided none of a whole batch: more drafts would only cost calls
        first = False
    if any(need.values()):
        missing = "; ".join(f"topic {t}: {need[t]} more" for t in topics if need[t])
        said = " ".join(f"{k}: {v!r}." for k, v in examples.items() if k != "accepted")
        decided = tally["accepted"] + tally["rejected"]
        cause = ("the judge could not decide (it said neither yes nor no)" if not decided and tally["unverified"]
                 else "the judge's calls failed" if not decided and tally["failed"]
                 else "the topic's pool or the draft budget ran out")
        raise ItemsError(f"{name}: only {tally['accepted']} of {n_unknown} Unknown items verified ({missing}); "
                         f"of {sum(tally.values())} drafts {tally['rejected']} rejected (a unique answer remains), "
                         f"{tally['unverified']} unverified, {tally['failed']} judge calls failed: {cause}. {said}")
    for row in unknown:
        row["extra"]["rejected_before"] = tally["rejected"] + tally["unverified"] + tally["failed"]
    return rows + unknown


def build_items(name: str, spec: WakenDataset, count: int, seed: int,
                records: Sequence[SourceRecord] | None = None, verify: Verifier | None = None,
                drafts_log: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """`count` items for dataset `name` (see the module docstring); `records` saves reloading the source;
    ScienceQA's Unknown drafts and their verdicts are appended to `drafts_log`."""
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
        return sample_choice_items(name, spec, records, count, rng, dseed, verify, drafts_log)
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


def stored_rows(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items as `waken.items` holds them: their details as JSON text."""
    return [{**r, "extra": json.dumps(r["extra"], default=str)} for r in items]


# -- a stored dataset's quality checks (the `waken_items` asset reports them) ------------------------

def item_checks(stored: Sequence[dict[str, Any]], fol: Sequence[dict[str, Any]], kind: str) -> list[Check]:
    """The checks of one dataset's stored items (rows with sample_type, label, item_id,
    verified_label) and, for FOLIO, of its source rows' FOL readings (`fol_checks`): half and half,
    no id twice, gold labels the prover contradicts (a warning), every FOL read (a warning)."""
    disagree = [{"item_id": r["item_id"], "gold": r["label"], "proved": r["verified_label"]} for r in stored
                if r["verified_label"] in ("True", "False", "Unknown") and r["verified_label"] != r["label"]]
    unverified = Counter(str(r["verified_label"]).split(":")[0] for r in stored
                         if r["verified_label"] not in (None, "True", "False", "Unknown"))
    types = Counter(r["sample_type"] for r in stored)
    ids = Counter(r["item_id"] for r in stored)
    checks = [
        Check("solvable_unknown_one_to_one", abs(types["solvable"] - types["unsolvable"]) <= 1,
              {"solvable": types["solvable"], "unsolvable": types["unsolvable"]}),
        Check("no_duplicate_items", max(ids.values(), default=1) == 1),
        Check("gold_label_matches_proof", not disagree,
              {"disagreements": disagree, "checked": sum(r["verified_label"] is not None for r in stored),
               "not_decided": dict(unverified)}, warn=True),
    ]
    if kind != "folio":
        return [*checks, Check("folio_fol_read", True, {"checked": f"not a FOLIO dataset ({kind})"})]
    unread = [{"source_id": c["source_id"], "reason": c["reason"]} for c in fol if not c["parsed"]]
    return [*checks, Check("folio_fol_read", not unread, {"per_file": fol_summary(fol), "not_read": unread[:50]},
                           f"{len(fol) - len(unread)} of {len(fol)} rows read; "
                           f"{sum(c['agrees'] is True for c in fol)} agree with gold", warn=True)]

