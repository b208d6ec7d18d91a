"""S1-Bench construction loop (paper 002, section 2) through the ledger: it builds the items.

Construction, per round (round 0 = the generated candidates):
1. discrimination: each configured discriminator gives a retain / modify / discard verdict
   (table 17's quality prompt, asked to end with a verdict line); a human decision in
   `s1.annotations` overrides them (retain, discard, or modify with a new question and answer).
   Without a human decision a candidate passes only if every discriminator says retain;
2. near-duplicate removal: cosine similarity to candidates kept before it and to accepted
   items of the same language (threshold configurable): all-MiniLM-L6-v2 for English, character
   bigrams for Chinese (an English-only model reads most Chinese characters as one token);
3. posterior validation: every validator answers `samples_per_temperature` times at each of
   the temperatures (paper: 10 x {0, 0.2, 0.4}); programmatic candidates are checked exactly,
   the others by the judge (table 18, JSON with rewrite retries; an unreadable verdict counts
   as not correct). The temperatures are asked in turn; a candidate with a wrong answer is not
   asked at the next one. Accepted only if every answer of every validator is correct; a failed call
   or a failed judgement leaves the candidate `incomplete` (retried next run), never rejected;
4. difficulty reduction: a rejected candidate goes back through the reduction prompt (a new
   candidate, its parent recorded) and through steps 1-3 again, for at most `max_rounds`
   reductions; then it is dropped.
Every decision is a row of `s1.rounds`, every validation answer a row of `s1.validations`,
so an accepted item's history can be read back to its first candidate.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from configuration import PerScale, derived_seed
from generators.s1 import PROGRAMMATIC, Candidate, Registry, generation_prompt, parse_pairs, reduction_prompt
from llm_calls import CallRequest
from validators import outcomes
from validators.checks import Check
from validators.judge import Judge
from validators.outcomes import CALL_FAILED
from validators.reply_text import Reading, answer_part
from validators.s1 import near_duplicates
from validators.s1_read import check_answer, read_verdict

if TYPE_CHECKING:  # annotations only: importing the ledger loads the HTTP client
    from llm_calls import Ledger

DISCRIMINATION_PROMPT = (
    "Given a question, its answer, and its category, please analyze from the following perspectives as "
    "comprehensively as possible:\n"
    "1. Whether the question belongs to the specified category and meet the Specific Simplicity Criteria.\n"
    "2. Whether the question is easy, clear, unambiguous, and has an absolutely unique answer.\n"
    "3. Whether the answer is absolutely correct; if not, what the correct answer should be.\n"
    "4. Whether the question is similar to other given questions, and if similar, whether more diverse questions "
    "can be generated.\n\n# Category Name and Definition:\n{name}: {definition}\n\n# Specific Simplicity Criteria:\n"
    "{criteria}\n\n# Question and Answer:\n[question]{question}[answer]{answer}\n\n# Other Questions:\n{others}\n\n"
    "Begin your analysis, then end with one line: \"Verdict: retain\", \"Verdict: modify\" or \"Verdict: discard\"."
)


# The construction's calls, one ledger purpose per step (paper section 2); its judge's calls add
# ".judge". `evaluations.s1.planned_calls` counts these same steps.
GENERATE, DISCRIMINATE, VALIDATE, REDUCE = "s1.generate", "s1.discriminate", "s1.validate", "s1.reduce"

@dataclass
class Record:
    cid: str
    candidate: Candidate
    parent: str | None
    round: int


@dataclass(frozen=True)
class Budgets:
    """Token budgets of the construction's calls (configuration: `s1.*_max_tokens` per scale)."""

    generation: int = 1024
    discrimination: int = 512
    validation: int = 48
    reduction: int = 256

    @classmethod
    def at(cls, scale: str, generation: PerScale, discrimination: PerScale, validation: PerScale,
           reduction: PerScale) -> Budgets:
        return cls(generation.at(scale), discrimination.at(scale), validation.at(scale), reduction.at(scale))


def programmatic_candidates(seed: int, sub: str, languages: Sequence[str], per: int) -> list[tuple[str, int, Candidate]]:
    """(language, index, candidate): up to `per` distinct questions per language from the
    subcategory's exact-answer generator (none if it has none), seeded by (seed, subcategory)."""
    if sub not in PROGRAMMATIC:
        return []
    rng = random.Random(derived_seed(seed, "s1", sub))
    out = []
    for lang in languages:
        seen: set[str] = set()
        for _ in range(per * 5):
            if len(seen) >= per:
                break
            c = PROGRAMMATIC[sub](rng, lang)
            if c.question not in seen:
                seen.add(c.question)
                out.append((lang, len(seen) - 1, c))
    return out


class Construction:
    def __init__(self, ledger: Ledger, registry: Registry, judge: Judge, seed: int, *, generators: Sequence[str],
                 discriminators: Sequence[str], validators: Sequence[str], reducer: str, temperatures: Sequence[float],
                 samples_per_temperature: int, max_rounds: int, dedup_threshold: float, budgets: Budgets = Budgets(),
                 chunk: int = 200, sink: Callable[[str, list[dict[str, Any]]], Any] | None = None,
                 annotations: dict[str, dict[str, Any]] | None = None):
        self.ledger, self.reg, self.judge, self.seed = ledger, registry, judge, seed
        self.generators, self.discriminators, self.validators = list(generators), list(discriminators), list(validators)
        self.reducer, self.temperatures, self.k = reducer, list(temperatures), samples_per_temperature
        self.max_rounds, self.threshold, self.budgets = max_rounds, dedup_threshold, budgets
        # where validation rows go as they are made (the asset appends them to a staging table);
        # by default they are kept in `self.validations`
        self.chunk = chunk
        self.sink = sink or (lambda table, rows: self.validations.extend(rows))
        self.annotations = annotations or {}
        self.candidates: list[dict[str, Any]] = []
        self.rounds: list[dict[str, Any]] = []
        self.validations: list[dict[str, Any]] = []
        self.items: list[dict[str, Any]] = []
        self.parents: dict[str, str | None] = {}

    # -- candidates ---------------------------------------------------------------------------

    def initial(self, subcategories: Sequence[str], languages: Sequence[str], per: int, programmatic: bool) -> list[Record]:
        records: list[Record] = []
        if programmatic:
            for sub in subcategories:
                slug = sub.replace(" ", "_")
                for lang, k, c in programmatic_candidates(self.seed, sub, languages, per):
                    records.append(Record(f"{slug}-{lang}-p{k:03d}", c, None, 0))
        for model in self.generators:  # one batch per generator: every subcategory's call at once
            prompts = [generation_prompt(self.reg, sub, per) for sub in subcategories]
            results = self.ledger.complete(model, [CallRequest([{"role": "user", "content": p}],
                                                               {"temperature": 0.7, "max_tokens": self.budgets.generation})
                                                   for p in prompts], purpose=GENERATE)
            for sub, r in zip(subcategories, results):
                slug = sub.replace(" ", "_")
                pairs = parse_pairs(answer_part(r.text)[1]) if r.ok else []
                self.rounds.append({"candidate_id": f"{slug}-gen-{model}", "round": 0, "stage": "generation",
                                    "actor": model, "decision": CALL_FAILED if not r.ok else f"{len(pairs)} pairs",
                                    "detail": r.error if not r.ok else (r.text or "")[:500]})
                for j, (lang, q, a) in enumerate(p for p in pairs if p[0] in languages):
                    records.append(Record(f"{slug}-{lang}-{model}-{j:03d}", Candidate(sub, lang, q, a, None, f"llm:{model}"),
                                          None, 0))
        return records

    def _store(self, rec: Record) -> None:
        self.parents[rec.cid] = rec.parent
        c = rec.candidate
        self.candidates.append({
            "candidate_id": rec.cid, "parent_id": rec.parent, "round": rec.round, "subcategory": c.subcategory,
            "category": self.reg.subcategories[c.subcategory].category, "language": c.language,
            "question": c.question, "answer": c.answer, "check_spec": json.dumps(c.check), "origin": c.origin,
        })

    def _decide(self, rec: Record, stage: str, actor: str, decision: str, detail: Any = "") -> None:
        self.rounds.append({"candidate_id": rec.cid, "round": rec.round, "stage": stage, "actor": actor,
                            "decision": decision, "detail": detail if isinstance(detail, str) else json.dumps(detail)})

    # -- the loop -------------------------------------------------------------------------------

    def run(self, subcategories: Sequence[str], languages: Sequence[str], per: int, programmatic: bool) -> None:
        current = self.initial(subcategories, languages, per, programmatic)
        accepted_questions: dict[str, list[str]] = {lang: [] for lang in languages}
        while current:
            for rec in current:
                self._store(rec)
            passed = self._discriminate(current)
            passed = self._dedup(passed, accepted_questions)
            verdicts = self._validate(passed)
            to_reduce: list[Record] = []
            for rec in passed:
                status = verdicts[rec.cid]
                if status == "accepted":
                    self._decide(rec, "decision", "rule", "accepted")
                    accepted_questions[rec.candidate.language].append(rec.candidate.question)
                    self._accept(rec)
                elif status == "incomplete":
                    self._decide(rec, "decision", "rule", "incomplete", "a validation call failed; retried next run")
                elif rec.round >= self.max_rounds:
                    self._decide(rec, "decision", "rule", "dropped", f"still failing after {rec.round} reductions")
                else:
                    to_reduce.append(rec)
            current = self._reduce(to_reduce)

    def _discriminate(self, records: list[Record]) -> list[Record]:
        out = []
        verdicts: dict[str, list[str]] = {r.cid: [] for r in records}
        for model in self.discriminators:
            prompts = []
            for r in records:
                c = r.candidate
                others = "\n".join(o.candidate.question for o in records if o is not r and o.candidate.subcategory == c.subcategory)[:2000]
                sub = self.reg.subcategories[c.subcategory]
                prompts.append(DISCRIMINATION_PROMPT.format(name=c.subcategory, definition=sub.definition[c.language],
                                                            criteria=self.reg.criteria(c.subcategory, c.language),
                                                            question=c.question, answer=c.answer, others=others or "(none)"))
            sampling = {"temperature": 0.0, "max_tokens": self.budgets.discrimination}
            results = self.ledger.complete(model, [CallRequest([{"role": "user", "content": p}], sampling) for p in prompts],
                                           purpose=DISCRIMINATE)
            for r, res in zip(records, results):
                decision, reasons = read_verdict(res.reply) if res.ok else (CALL_FAILED, res.error or "")
                verdicts[r.cid].append(decision)
                self._decide(r, "discrimination", model, decision, reasons)
        for r in records:
            human = self.annotations.get(r.cid)
            if human:
                self._decide(r, "annotation", human.get("annotator") or "human", human["decision"], human.get("note") or "")
                if human["decision"] == "retain":
                    out.append(r)
                elif human["decision"] == "modify" and human.get("question") and human.get("answer"):
                    c = r.candidate
                    fixed = Record(f"{r.cid}-h", Candidate(c.subcategory, c.language, human["question"], human["answer"],
                                                          None, "human"), r.cid, r.round)
                    self._store(fixed)
                    self._decide(fixed, "annotation", human.get("annotator") or "human", "modified version")
                    out.append(fixed)
                continue
            if all(v == "retain" for v in verdicts[r.cid]):
                out.append(r)
            else:
                self._decide(r, "decision", "rule", "dropped", f"discriminators: {verdicts[r.cid]}")
        return out

    def _dedup(self, records: list[Record], accepted: dict[str, list[str]]) -> list[Record]:
        out = []
        for lang in {r.candidate.language for r in records}:
            group = [r for r in records if r.candidate.language == lang]
            earlier = accepted.get(lang, [])
            combined = [*earlier, *(r.candidate.question for r in group)]
            dup = near_duplicates(combined[len(earlier):], self.threshold, earlier, language=lang)
            for k, r in enumerate(group):
                if k in dup:
                    j, sim = dup[k]
                    match = combined[j]
                    actor = "character bigrams" if lang == "zh" else "all-MiniLM-L6-v2"
                    self._decide(r, "dedup", actor, "dropped", {"similarity": round(sim, 4), "match": match})
                else:
                    out.append(r)
        order = {r.cid: i for i, r in enumerate(records)}
        return sorted(out, key=lambda r: order[r.cid])

    def _validate(self, records: list[Record]) -> dict[str, str]:
        """Posterior validation, `chunk` candidates at a time: memory holds one chunk's requests and
        replies, and each chunk's validation rows go to `sink` as they are made."""
        status = {r.cid: "accepted" for r in records}
        tally: dict[str, tuple[int, int]] = {}  # candidate -> (correct answers, answers)
        for start in range(0, len(records), self.chunk):
            for model in self.validators:
                self._validate_chunk(model, records[start:start + self.chunk], status, tally)
        for r in records:
            right, answers = tally.get(r.cid, (0, 0))
            self._decide(r, "validation", ",".join(self.validators), status[r.cid], {"correct": right, "answers": answers})
        return status

    def _validate_chunk(self, model: str, records: list[Record], status: dict[str, str],
                        tally: dict[str, tuple[int, int]]) -> None:
        """`model` answers each candidate `k` times at each temperature, one temperature at a time:
        a candidate with a wrong answer (or a failed call) is not asked at the next temperature,
        since it is already rejected (or retried next run). An accepted candidate has every answer
        at every temperature correct, as before; a rejected one costs fewer calls."""
        alive = list(records)
        rows = []
        for t in self.temperatures:
            index = [(r, t, s) for r in alive for s in range(self.k)]
            if not index:
                break
            requests = [CallRequest([{"role": "user", "content": r.candidate.question}],
                                    {"temperature": t, "max_tokens": self.budgets.validation}, s) for r, t, s in index]
            results = self.ledger.complete(model, requests, purpose=VALIDATE)
            verdicts = self._judge_until_wrong(index, results)
            for k, ((rec, t, s), res) in enumerate(zip(index, results)):
                if not res.ok:
                    correct, method, explain = None, CALL_FAILED, res.error
                elif rec.candidate.check is not None:
                    correct = check_answer(res.reply, rec.candidate.check, rec.candidate.question)
                    method, explain = "exact", None
                elif k not in verdicts:
                    correct, method, explain = None, "not_judged", "an earlier answer already failed"
                else:
                    v = verdicts[k]
                    correct, method, explain = v.answer, v.method, v.evidence
                right, answers = tally.get(rec.cid, (0, 0))
                tally[rec.cid] = (right + bool(correct), answers + 1)
                rows.append({"candidate_id": rec.cid, "round": rec.round, "validator": model, "temperature": t,
                             "sample_index": s, "reply": res.reply, "correct": correct, "method": method,
                             "detail": explain, "call_key": res.key})
                if outcomes.failed(method):  # no verdict yet: retried next run
                    if status[rec.cid] != "rejected":
                        status[rec.cid] = "incomplete"
                elif method != "not_judged" and not correct:
                    status[rec.cid] = "rejected"
            alive = [r for r in alive if status[r.cid] == "accepted"]
        self.sink("s1.validations", rows)

    def _judge_until_wrong(self, index: list[tuple[Record, float, int]], results: list[Any]) -> dict[int, Reading]:
        """Judge verdicts for answers to candidates without an exact check, one temperature at a time:
        once an answer of a candidate is judged wrong (or unreadable, or the judgement failed) the rest
        are not judged, since it is then rejected or retried. Answer index -> the judge's reading."""
        verdicts: dict[int, Reading] = {}
        failed: set[str] = set()
        for t in self.temperatures:
            batch = [k for k, ((rec, tt, _), res) in enumerate(zip(index, results))
                     if tt == t and res.ok and rec.candidate.check is None and rec.cid not in failed]
            if not batch:
                continue
            judged = self.judge.grade([(index[k][0].candidate.question, results[k].text or "", index[k][0].candidate.answer)
                                       for k in batch], VALIDATE)
            for k, v in zip(batch, judged):
                verdicts[k] = v
                if v.answer is not True:
                    failed.add(index[k][0].cid)
        return verdicts

    def _reduce(self, records: list[Record]) -> list[Record]:
        """The difficulty-reduced children of `records`, all asked in one batch (concurrently)."""
        results = self.ledger.complete(self.reducer, [
            CallRequest([{"role": "user", "content": reduction_prompt(self.reg, rec.candidate)}],
                        {"temperature": 0.0, "max_tokens": self.budgets.reduction}) for rec in records],
            purpose=REDUCE)
        children = []
        for rec, r in zip(records, results):
            pairs = parse_pairs(answer_part(r.text)[1]) if r.ok else []
            if not pairs:
                self._decide(rec, "reduction", self.reducer, "dropped",
                             "reduction call failed" if not r.ok else f"no [question]/[answer] pair in: {(r.text or '')[:300]}")
                continue
            _, q, a = pairs[0]
            c = rec.candidate
            # the version suffix is replaced, never split on: a model name may contain "-r" (deepseek-r1)
            base = re.sub(r"-r\d+$", "", rec.cid)
            child = Record(f"{base}-r{rec.round + 1}", Candidate(c.subcategory, c.language, q, a, None,
                                                                 f"reduced:{self.reducer}"), rec.cid, rec.round + 1)
            self._decide(rec, "reduction", self.reducer, "reduced", {"child": child.cid})
            children.append(child)
        return children

    def _accept(self, rec: Record) -> None:
        root = rec.cid
        while self.parents.get(root):
            root = self.parents[root]
        c = rec.candidate
        self.items.append({"item_id": rec.cid, "root_candidate": root, "rounds_taken": rec.round,
                           "subcategory": c.subcategory, "category": self.reg.subcategories[c.subcategory].category,
                           "language": c.language, "question": c.question, "answer": c.answer,
                           "check_spec": json.dumps(c.check), "origin": c.origin})


def item_checks(subcategories: Sequence[str], languages: Sequence[str], candidates: Sequence[dict[str, Any]],
                items: Sequence[dict[str, Any]], broken: Sequence[str], not_all_correct: Sequence[str]) -> list[Check]:
    """The construction's checks: every accepted item's lineage complete (`broken`: the ids whose
    parent chain does not end at their root candidate), accepted only if every validation answer
    was correct (`not_all_correct`), and every built subcategory and language with candidates and
    an accepted question (a warning: a weak validator accepts nothing, and the tables say so)."""
    made = Counter((c["subcategory"], c["language"]) for c in candidates)
    accepted = Counter((r["subcategory"], r["language"]) for r in items if not r["origin"].startswith("release:"))
    empty = [f"{sub} [{lang}]: " + ("no candidate made" if not made[(sub, lang)] else
                                    f"none of {made[(sub, lang)]} candidate versions accepted")
             for sub in subcategories for lang in languages if not accepted[(sub, lang)]]
    return [Check("lineage_complete", not broken, {"broken": list(broken)}),
            Check("accepted_only_if_every_answer_correct", not not_all_correct, {"violations": list(not_all_correct)}),
            Check("every_subcategory_accepted", not empty, {"empty": empty},
                  "; ".join(empty)[:1000] or "every subcategory yielded a question", warn=True)]

