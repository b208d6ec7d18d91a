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


def study_parts(record: SourceRecord, with_lecture: bool = False) -> tuple[str, str, str]:
    """(the item's own context, the lecture, the question as asked) of a ScienceQA row. The own
    context is the hint when there is one; Arts rows (figurative language, writing strategies) mostly
    carry their passage inside `question`, after its first line, and then that passage is the own
    context and the first line the question. With `with_lecture`, the row's lecture (the release's
    background text for the skill, the same for every row of a skill) is returned too; else "". The
    solution is never shown: it states the answer."""
    lecture = str(record.extra.get("lecture") or "").strip() if with_lecture else ""
    if record.context.strip():
        return record.context.strip(), lecture, record.question.strip()
    head, newline, rest = record.question.strip().partition("\n")
    if newline and rest.strip():
        return rest.strip(), lecture, head.strip()
    return "", lecture, record.question.strip()


def study_text(record: SourceRecord, with_lecture: bool = False) -> tuple[str, str]:
    """(supporting text, question as asked) of a ScienceQA row: its own context (`study_parts`), then
    with `with_lecture` its lecture, the facts a Physics or Biology question rests on, which most of
    those rows have no hint for. Solvable and Unknown items are shown the same way."""
    own, lecture, question = study_parts(record, with_lecture)
    return " ".join(x for x in (own, lecture) if x), question


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


NO_OWN_CONTEXT = "no context of its own (no hint or passage): its question and options alone decide the answer"


def deletion(context: str, question: str, answer: str, lecture: str = "") -> tuple[str, list[str]] | str:
    """An Unknown draft (paper appendix C: two supporting sentences deleted "from the given facts",
    then verified to leave no unique answer): the item's own `context` (its hint or passage, what the
    answer rests on) with its two most supporting sentences deleted (all of it when it has one or
    two), then the `lecture` if one is shown; and the deleted sentences. Or, when no Unknown item can
    be made so, why: a row with no context of its own is answered by its question and options (a
    lecture is general background on the skill, and deleting from it leaves the item answerable as
    shown), a deletion must leave some text, and must not leave the correct option's text verbatim."""
    sentences = _sentences(context)
    if not sentences:
        return NO_OWN_CONTEXT
    keep = len(sentences) - 2 if len(sentences) >= 3 else 0
    drop = set(supporting_sentences(context, question, answer)[:len(sentences) - keep])
    remaining = " ".join([*(s for i, s in enumerate(sentences) if i not in drop), *([lecture] if lecture else [])])
    if not remaining.strip():
        return (f"the supporting text has {len(sentences)} sentence{'s' * (len(sentences) != 1)}: "
                "deleting two leaves no context")
    if _contains(remaining, answer):
        return f"the answer {answer!r} is still in the text after deleting two sentences"
    return remaining, [sentences[i] for i in sorted(drop)]


def without_support(context: str, question: str, answer: str, lecture: str = "") -> tuple[str, list[str]] | None:
    """`deletion`, None when it cannot make an Unknown item."""
    made = deletion(context, question, answer, lecture)
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
    own, lecture, question = study_parts(r, spec.lecture)
    context = " ".join(x for x in (own, lecture) if x)
    answer = (r.choices or [])[r.answer_index or 0]
    extra = {"choices": r.choices, "answer_index": r.answer_index, "topic": r.topic, "source_id": r.source_id}
    if not unknown:
        return _row(name, spec, f"{name}-{r.source_id}", answer, context, question, r.origin, answer, extra, dseed)
    remaining, deleted = deletion(own, question, answer, lecture)  # type: ignore[misc]  # eligible rows only
    return _row(name, spec, f"{name}-{r.source_id}-unknown", "Unknown", remaining, question, r.origin, answer,
                {**extra, "original_context": context, "deleted_sentences": deleted}, dseed)


def sample_choice_items(name: str, spec: WakenDataset, records: Sequence[SourceRecord], count: int,
                        rng: random.Random, dseed: int, verify: Verifier | None,
                        drafts_log: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """ScienceQA items (paper appendix C), per topic quota (`topic_quotas`). The pool is the
    topic's rows whose own context allows a deletion (`deletion`), so solvable and Unknown items
    come from one pool and context is no label cue. Half the chosen rows stay solvable (the correct
    option is the label); the rest lose their two most supporting sentences of their own context and
    become Unknown when `verify` accepts them (no unique answer with the cut context, and none from
    the question and options alone); a rejected or unverified draft is replaced from the topic's
    pool, at most MAX_DRAFTS_PER_ITEM drafts per Unknown item. Every verdict goes to `drafts_log`.

    Where the release cannot supply a topic's quota honestly (too few rows with a context of their
    own, or too many drafts still answerable), the topic is built smaller and stays 1:1: as many
    solvable items as Unknown ones were verified (`item_checks`' `paper_counts_reached` states the
    counts). Nothing is padded. ItemsError when nothing can be built, or when the judge decided
    none of the first batch (more drafts would only cost calls), saying how many drafts were
    rejected, unverified and failed."""
    topics = list(spec.topics or [])
    quotas = topic_quotas(topics, count)
    pools = _deletable_pools(name, spec, records, topics)
    solvable: dict[str, list[SourceRecord]] = {}
    waiting: dict[str, list[SourceRecord]] = {}
    need: dict[str, int] = {}
    for t in topics:
        rng.shuffle(pools[t])
        n_solvable, n_unknown = quotas[t]
        if len(pools[t]) < n_solvable + n_unknown:  # a short pool: half each, as far as it goes
            n_solvable = n_unknown = len(pools[t]) // 2
        solvable[t], waiting[t], need[t] = pools[t][:n_solvable], pools[t][n_solvable:], n_unknown
    n_unknown = sum(need.values())
    tally = {"accepted": 0, "rejected": 0, "unverified": 0, "failed": 0}
    examples: dict[str, str] = {}
    unknown = _verified_unknowns(name, spec, topics, waiting, need, dseed, verify, MAX_DRAFTS_PER_ITEM * n_unknown,
                                 tally, examples, drafts_log)
    if not tally["accepted"]:
        decided = tally["accepted"] + tally["rejected"]
        said = " ".join(f"{k}: {v!r}." for k, v in examples.items() if k != "accepted")
        cause = ("the judge could not decide (it said neither yes nor no)" if not decided and tally["unverified"]
                 else "the judge's calls failed" if not decided and tally["failed"]
                 else "every draft still had a unique answer, or the pool ran out")
        raise ItemsError(f"{name}: no Unknown item verified of {n_unknown} wanted; of {sum(tally.values())} drafts "
                         f"{tally['rejected']} rejected (a unique answer remains), {tally['unverified']} unverified, "
                         f"{tally['failed']} judge calls failed: {cause}. {said}")
    rows: list[dict[str, Any]] = []
    for t in topics:
        keep = solvable[t] if not need[t] else solvable[t][:len(unknown[t])]  # a short topic stays 1:1
        rows += [_choice_row(name, spec, r, dseed, unknown=False) for r in keep]
    made = [row for t in topics for row in unknown[t]]
    for row in made:
        row["extra"]["rejected_before"] = tally["rejected"] + tally["unverified"] + tally["failed"]
    return rows + made


def _deletable_pools(name: str, spec: WakenDataset, records: Sequence[SourceRecord], topics: Sequence[str]
                     ) -> dict[str, list[SourceRecord]]:
    """Per topic, the rows whose own context allows a deletion (`deletion`), in source-id order;
    ItemsError, counting the rows passed over by reason, when no topic has two."""
    pools: dict[str, list[SourceRecord]] = {t: [] for t in topics}
    ineligible: dict[str, int] = {}
    for r in sorted(records, key=lambda r: r.source_id):
        if r.topic not in pools or not r.choices:
            continue
        own, lecture, question = study_parts(r, spec.lecture)
        made = deletion(own, question, r.choices[r.answer_index or 0], lecture)
        if isinstance(made, str):
            why = (NO_OWN_CONTEXT if made == NO_OWN_CONTEXT else "deleting two sentences leaves no context"
                   if "no context" in made else "the answer stays verbatim")
            ineligible[why] = ineligible.get(why, 0) + 1
            continue
        pools[r.topic].append(r)
    if not any(len(pools[t]) >= 2 for t in topics):
        raise ItemsError(f"{name}: no topic has two rows that allow an Unknown draft (rows passed over: "
                         f"{ineligible or 'none'})")
    return pools


def _verified_unknowns(name: str, spec: WakenDataset, topics: Sequence[str], waiting: dict[str, list[SourceRecord]],
                       need: dict[str, int], dseed: int, verify: Verifier | None, budget: int,
                       tally: dict[str, int], examples: dict[str, str],
                       drafts_log: list[dict[str, Any]] | None) -> dict[str, list[dict[str, Any]]]:
    """Per topic, the Unknown drafts `verify` accepted: batches of drafts from the `waiting` rows
    until each topic's `need` is met, the rows or the `budget` of drafts run out, or the judge
    decided none of the first batch. Counts each verdict in `tally` (one example of each in
    `examples`), logs every draft to `drafts_log`, and lowers `need` as drafts are accepted."""
    unknown: dict[str, list[dict[str, Any]]] = {t: [] for t in topics}
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
                unknown[draft["extra"]["topic"]].append(draft)
        if first and tally["accepted"] + tally["rejected"] == 0:
            break  # the judge decided none of a whole batch: more drafts would only cost calls
        first = False
    return unknown


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

def counts_reached(stored: Sequence[dict[str, Any]], wanted: int, topics: Sequence[str] | None) -> Check:
    """Whether the dataset has the items its configuration asks for (a warning): per ScienceQA topic,
    the solvable and Unknown items wanted (`topic_quotas`) against those built. A ScienceQA release
    may not hold enough rows whose own context can be cut to leave no unique answer; the build then
    makes fewer and this check says how many (paper 000 asks 400 per topic)."""
    built = Counter(r["sample_type"] for r in stored)
    meta: dict[str, Any] = {"wanted": wanted, "built": len(stored), "solvable": built["solvable"],
                            "unknown": built["unsolvable"]}
    if topics:
        per_topic: dict[str, dict[str, int]] = {}
        for t, (s, u) in topic_quotas(list(topics), wanted).items():
            have = Counter(r["sample_type"] for r in stored if _topic(r) == t)
            per_topic[t] = {"solvable_wanted": s, "solvable_built": have["solvable"],
                            "unknown_wanted": u, "unknown_built": have["unsolvable"]}
        meta["per_topic"] = per_topic
    return Check("paper_counts_reached", len(stored) >= wanted, meta,
                 f"{len(stored)} of {wanted} items built", warn=True)


def _topic(row: dict[str, Any]) -> str | None:
    extra = row.get("extra")
    if isinstance(extra, str):
        extra = json.loads(extra)
    return (extra or {}).get("topic")


def item_checks(stored: Sequence[dict[str, Any]], fol: Sequence[dict[str, Any]], kind: str) -> list[Check]:
    """The checks of one dataset's stored items (rows with sample_type, label, item_id,
    verified_label) and, for FOLIO, of its source rows' FOL readings (`fol_checks`): half and half,
    no id twice, gold labels the prover contradicts (a warning), every FOL read (a warning).
    `counts_reached` is the asset's fifth check."""
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

