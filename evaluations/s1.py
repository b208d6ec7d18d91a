"""S1-Bench construction loop and evaluation (paper 002, section 2 and 3) through the ledger.

Construction, per round (round 0 = the generated candidates):
1. discrimination: each configured discriminator gives a retain / modify / discard verdict
   (table 17's quality prompt, asked to end with a verdict line); a human decision in
   `s1.annotations` overrides them (retain, discard, or modify with a new question and answer).
   Without a human decision a candidate passes only if every discriminator says retain;
2. near-duplicate removal: all-MiniLM-L6-v2 cosine similarity to candidates kept before it
   and to accepted items of the same language (threshold configurable);
3. posterior validation: every validator answers `samples_per_temperature` times at each of
   the temperatures (paper: 10 x {0, 0.2, 0.4}); programmatic candidates are checked exactly,
   the others by the judge (table 18, JSON with rewrite retries; an unreadable verdict counts
   as not correct). Accepted only if every answer of every validator is correct; a failed call
   or a failed judgement leaves the candidate `incomplete` (retried next run), never rejected;
4. difficulty reduction: a rejected candidate goes back through the reduction prompt (a new
   candidate, its parent recorded) and through steps 1-3 again, for at most `max_rounds`
   reductions; then it is dropped.
Every decision is a row of `s1.rounds`, every validation answer a row of `s1.validations`,
so an accepted item's history can be read back to its first candidate.

Evaluation: k samples at temperature 0.6, top_p 0.95, plus greedy; thinking and final answer
split at the end-of-thinking marker; the format type (table 9); correctness on the final
answer, or on the thinking when there is no final answer (exact check or judge); tokens from
the server's usage counts; difficulty awareness of the first paragraph; thinking redundancy.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from configuration import derived_seed
from generators.s1 import PROGRAMMATIC, Candidate, Registry, generation_prompt, parse_pairs, reduction_prompt
from llm_calls import CallRequest, Ledger
from validators.judge import Judge
from validators.read import STRICT_FORMATS, UNREADABLE_FORMATS, Reading, check_answer, format_type, read_verdict
from validators.s1 import difficulty_awareness, near_duplicates, redundancy

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


@dataclass
class Record:
    cid: str
    candidate: Candidate
    parent: str | None
    round: int


class Construction:
    def __init__(self, ledger: Ledger, registry: Registry, judge: Judge, seed: int, *, generators: Sequence[str],
                 discriminators: Sequence[str], validators: Sequence[str], reducer: str, temperatures: Sequence[float],
                 samples_per_temperature: int, max_rounds: int, dedup_threshold: float, validator_max_tokens: int,
                 annotations: dict[str, dict[str, Any]] | None = None):
        self.ledger, self.reg, self.judge, self.seed = ledger, registry, judge, seed
        self.generators, self.discriminators, self.validators = list(generators), list(discriminators), list(validators)
        self.reducer, self.temperatures, self.k = reducer, list(temperatures), samples_per_temperature
        self.max_rounds, self.threshold, self.max_tokens = max_rounds, dedup_threshold, validator_max_tokens
        self.annotations = annotations or {}
        self.candidates: list[dict[str, Any]] = []
        self.rounds: list[dict[str, Any]] = []
        self.validations: list[dict[str, Any]] = []
        self.items: list[dict[str, Any]] = []
        self.parents: dict[str, str | None] = {}

    # -- candidates ---------------------------------------------------------------------------

    def initial(self, subcategories: Sequence[str], languages: Sequence[str], per: int, programmatic: bool) -> list[Record]:
        records: list[Record] = []
        for sub in subcategories:
            rng = random.Random(derived_seed(self.seed, "s1", sub))
            slug = sub.replace(" ", "_")
            if programmatic and sub in PROGRAMMATIC:
                for lang in languages:
                    seen: set[str] = set()
                    for k in range(per * 5):
                        if len(seen) >= per:
                            break
                        c = PROGRAMMATIC[sub](rng, lang)
                        if c.question not in seen:
                            seen.add(c.question)
                            records.append(Record(f"{slug}-{lang}-p{len(seen) - 1:03d}", c, None, 0))
            for model in self.generators:
                r = self.ledger.complete(model, [CallRequest([{"role": "user", "content": generation_prompt(self.reg, sub, per)}],
                                                             {"temperature": 0.7, "max_tokens": 1024})],
                                         purpose="s1.generate")[0]
                pairs = parse_pairs(r.text) if r.ok else []
                self.rounds.append({"candidate_id": f"{slug}-gen-{model}", "round": 0, "stage": "generation",
                                    "actor": model, "decision": "call_failed" if not r.ok else f"{len(pairs)} pairs",
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
            following: list[Record] = []
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
                    child = self._reduce(rec)
                    if child:
                        following.append(child)
            current = following

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
            results = self.ledger.complete(model, [CallRequest([{"role": "user", "content": p}],
                                                               {"temperature": 0.0, "max_tokens": 512}) for p in prompts],
                                           purpose="s1.discriminate")
            for r, res in zip(records, results):
                decision, reasons = read_verdict(res.reply) if res.ok else ("call_failed", res.error or "")
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
            dup = near_duplicates(combined[len(earlier):], self.threshold, earlier)
            for k, r in enumerate(group):
                if k in dup:
                    j, sim = dup[k]
                    match = combined[j]
                    self._decide(r, "dedup", "all-MiniLM-L6-v2", "dropped", {"similarity": round(sim, 4), "match": match})
                else:
                    out.append(r)
        order = {r.cid: i for i, r in enumerate(records)}
        return sorted(out, key=lambda r: order[r.cid])

    def _validate(self, records: list[Record]) -> dict[str, str]:
        status = {r.cid: "accepted" for r in records}
        tally: dict[str, tuple[int, int]] = {}  # candidate -> (correct answers, answers)
        for model in self.validators:
            requests, index = [], []
            for r in records:
                for t in self.temperatures:
                    for s in range(self.k):
                        requests.append(CallRequest([{"role": "user", "content": r.candidate.question}],
                                                    {"temperature": t, "max_tokens": self.max_tokens}, s))
                        index.append((r, t, s))
            results = self.ledger.complete(model, requests, purpose="s1.validate")
            verdicts = self._judge_until_wrong(index, results)
            for k, ((rec, t, s), res) in enumerate(zip(index, results)):
                if not res.ok:
                    correct, method, explain = None, "call_failed", res.error
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
                self.validations.append({"candidate_id": rec.cid, "round": rec.round, "validator": model,
                                         "temperature": t, "sample_index": s, "reply": res.reply, "correct": correct,
                                         "method": method, "detail": explain, "call_key": res.key})
                if method in ("call_failed", "judge_failed"):  # no verdict yet: retried next run
                    if status[rec.cid] != "rejected":
                        status[rec.cid] = "incomplete"
                elif method != "not_judged" and not correct:
                    status[rec.cid] = "rejected"
        for r in records:
            right, answers = tally.get(r.cid, (0, 0))
            self._decide(r, "validation", ",".join(self.validators), status[r.cid], {"correct": right, "answers": answers})
        return status

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
                                       for k in batch], "s1.validate")
            for k, v in zip(batch, judged):
                verdicts[k] = v
                if v.answer is not True:
                    failed.add(index[k][0].cid)
        return verdicts

    def _reduce(self, rec: Record) -> Record | None:
        r = self.ledger.complete(self.reducer, [CallRequest([{"role": "user", "content": reduction_prompt(self.reg, rec.candidate)}],
                                                            {"temperature": 0.0, "max_tokens": 256})], purpose="s1.reduce")[0]
        pairs = parse_pairs(r.text) if r.ok else []
        if not pairs:
            self._decide(rec, "reduction", self.reducer, "dropped",
                         "reduction call failed" if not r.ok else f"no [question]/[answer] pair in: {(r.text or '')[:300]}")
            return None
        _, q, a = pairs[0]
        c = rec.candidate
        # the version suffix is replaced, never split on: a model name may contain "-r" (deepseek-r1)
        base = re.sub(r"-r\d+$", "", rec.cid)
        child = Record(f"{base}-r{rec.round + 1}", Candidate(c.subcategory, c.language, q, a, None,
                                                             f"reduced:{self.reducer}"), rec.cid, rec.round + 1)
        self._decide(rec, "reduction", self.reducer, "reduced", {"child": child.cid})
        return child

    def _accept(self, rec: Record) -> None:
        root = rec.cid
        while self.parents.get(root):
            root = self.parents[root]
        c = rec.candidate
        self.items.append({"item_id": rec.cid, "root_candidate": root, "rounds_taken": rec.round,
                           "subcategory": c.subcategory, "category": self.reg.subcategories[c.subcategory].category,
                           "language": c.language, "question": c.question, "answer": c.answer,
                           "check_spec": json.dumps(c.check), "origin": c.origin})


# -- evaluation ------------------------------------------------------------------------------------

def evaluate(ledger: Ledger, model: str, items: Sequence[dict[str, Any]], judge: Judge, k: int, temperature: float,
             top_p: float, max_tokens: int) -> list[dict[str, Any]]:
    """One row per (item, mode, sample): k top-p samples and one greedy answer."""
    plan = [(it, "sample", s) for it in items for s in range(k)] + [(it, "greedy", 0) for it in items]
    requests = [CallRequest([{"role": "user", "content": it["question"]}],
                            {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens} if mode == "sample"
                            else {"temperature": 0.0, "max_tokens": max_tokens}, s) for it, mode, s in plan]
    results = ledger.complete(model, requests, purpose="s1.evaluate")
    rows = []
    for (it, mode, s), r in zip(plan, results):
        fmt, thinking, answer = format_type(r.reply, r.finish_reason) if r.ok else (None, "", "")
        target = answer if answer else thinking
        first = (thinking or r.text or "").strip().split("\n\n")[0]
        rows.append({"model": model, "item_id": it["item_id"], "subcategory": it["subcategory"],
                     "category": it["category"], "language": it["language"], "mode": mode, "sample_index": s,
                     "format_type": fmt, "has_thinking": bool(thinking), "has_answer": bool(answer),
                     "judged_part": "answer" if answer else ("thinking" if thinking else None),
                     "correct": None, "method": "call_failed" if not r.ok else None, "detail": r.error,
                     "completion_tokens": r.completion_tokens, "finish_reason": r.finish_reason,
                     "difficulty_class": difficulty_awareness(first) if r.ok else None,
                     "redundancy": json.dumps(redundancy(thinking)) if thinking else None,
                     "reply": r.reply, "call_key": r.key, "_target": target, "_check": it["check_spec"],
                     "_question": it["question"], "_answer": it["answer"]})
    to_judge = [row for row in rows if row["method"] is None and json.loads(row["_check"]) is None and row["_target"]]
    verdicts = judge.grade([(row["_question"], row["_target"], row["_answer"]) for row in to_judge], "s1.evaluate")
    for row, v in zip(to_judge, verdicts):
        row["correct"], row["method"], row["detail"] = v.answer, v.method, v.evidence
    for row in rows:
        if row["method"] is None:
            check = json.loads(row["_check"])
            if check is not None:
                row["correct"], row["method"] = check_answer(row["_target"], check, row["_question"]), "exact"
            else:
                row["correct"], row["method"] = False, "empty"
        for key in ("_target", "_check", "_question", "_answer"):
            row.pop(key)
    return rows


FAILED = ("call_failed", "judge_failed")  # outcomes that are not the model's answer


def metric_rows(model: str, responses: Sequence[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """pass@1 (mean correctness over the k samples), acc@k (share of items with all k samples
    correct), greedy accuracy, strict / loose format rates, mean response tokens, difficulty
    awareness shares and mean redundancy per segment, for all items, per category and per
    subcategory. Unreadable judge verdicts count as not correct. Failed calls and failed
    judgements are not answers: they are left out of every denominator (acc@k counts only items
    whose k samples were all answered) and counted in `n_failed` beside each metric."""
    out: list[dict[str, Any]] = []
    scopes: dict[tuple[str, str], list[dict[str, Any]]] = {("all", "all"): list(responses)}
    for r in responses:
        scopes.setdefault(("category", r["category"]), []).append(r)
        scopes.setdefault(("subcategory", r["subcategory"]), []).append(r)
    for (level, scope), every in sorted(scopes.items()):
        n_failed = sum(r.get("method") in FAILED for r in every)
        rows = [r for r in every if r.get("method") not in FAILED]
        sampled = [r for r in rows if r["mode"] == "sample"]
        greedy = [r for r in rows if r["mode"] == "greedy"]
        by_item: dict[str, list[bool]] = {}
        for r in sampled:
            by_item.setdefault(r["item_id"], []).append(bool(r["correct"]))
        complete = {i: v for i, v in by_item.items() if len(v) == k}

        def put(metric: str, value: float | None, n: int, category: str = "-") -> None:
            out.append({"model": model, "level": level, "scope": scope, "metric": metric, "category": category,
                        "value": value, "n": n, "n_failed": n_failed})

        put("pass@1", sum(sum(v) / len(v) for v in by_item.values()) / len(by_item) if by_item else None, len(by_item))
        put(f"acc@{k}", sum(all(v) for v in complete.values()) / len(complete) if complete else None, len(complete))
        put("greedy_acc", sum(bool(r["correct"]) for r in greedy) / len(greedy) if greedy else None, len(greedy))
        fmts = [r["format_type"] for r in sampled if r["format_type"] is not None]
        put("strict_format", sum(f in STRICT_FORMATS for f in fmts) / len(fmts) if fmts else None, len(fmts))
        put("loose_format", sum(f not in UNREADABLE_FORMATS for f in fmts) / len(fmts) if fmts else None, len(fmts))
        toks = [r["completion_tokens"] for r in sampled if r["completion_tokens"] is not None]
        put("mean_tokens", sum(toks) / len(toks) if toks else None, len(toks))
        classes = [r["difficulty_class"] for r in sampled if r["difficulty_class"] is not None]
        for c in (1, 2, 3, 4):
            put("difficulty_awareness", sum(x == c for x in classes) / len(classes) if classes else None, len(classes), str(c))
        for f in sorted(set(fmts)):
            put("format_type", sum(x == f for x in fmts) / len(fmts), len(fmts), str(f))
        reds = [json.loads(r["redundancy"]) for r in sampled if r.get("redundancy") and json.loads(r["redundancy"])]
        for pos in range(max((len(x) for x in reds), default=0)):
            vals = [x[pos] for x in reds if len(x) > pos]
            put("redundancy", sum(vals) / len(vals), len(vals), str(pos + 2))
    return out
