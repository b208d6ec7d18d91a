"""The MuSoBench evaluation: prompts, the multi-turn protocol through the ledger, and metrics.

Protocol (paper section 3 and appendix A.3), one chat per instance:
  1. solve: Instruction1 for the task (+ "Think step by step before answering."
     for Short-CoT; Long-CoT models get the bare instruction);
  2. confidence: Instruction2, a 0-100 score in [[CONFIDENCE: \\boxed{..}]];
  3. recheck: Instruction3, [[UNCHANGE]] or [[CHANGE]] with the full new answer.
Variants: `standard`; `exploration` (section 5: after the solve turn the user
says "Wait, there may be other solutions."; the first answer set is the union of
both replies); `self_consistency` (section 5, table 2: n parallel solve +
confidence paths, sample indexes 0..n-1, aggregated by voting, `sc_vote`, and by
the median-confidence path, `sc_median`; the per-path rows are `sc_path`).

Turns are batched across instances, so every turn is one ledger batch; each
turn's key covers the whole conversation so far, and a rerun replays it from
the ledger. A failed call is recorded as such and never becomes an answer: a
failed solve turn leaves the instance out of every metric (counted in
`n_failed_calls`); a failed confidence or recheck turn leaves it out of ECE or
the stability rates only.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from configuration import Config
from evaluations import scoring
from evaluations.calls import AT_MOST, EXACT, Counts, Line, Protocol, Query, stored_or_configured
from generators import muso as muso_gen
from llm_calls import CallRequest, CallResult
from validators.checks import Check
from validators.muso_read import ParsedAnswer, read_confidence, read_recheck, read_subsets, read_timetables
from validators.outcomes import CALL_FAILED
from validators.reply_text import answer_part

if TYPE_CHECKING:  # annotations only: importing the ledger loads the HTTP client
    from llm_calls import Ledger

TIMETABLING_INSTRUCTION = (
    "You are asked to perform a timetabling task. Please find ALL FEASIBLE SCHEDULES that satisfies all "
    "constraints one by one and output the number of feasible schedules. Output format example:\n"
    "Solution 1:\n| Course | Time | Room | Teacher |\n|---------|-------|-------|----------|\n"
    "| Course0 | T2 | R0 | P0 |\n| Course1 | T3 | R2 | P2 |\n| Course2 | T0 | R2 | P1 |\n"
    "Solution 2:\n| Course | Time | Room | Teacher |\n|---------|-------|-------|----------|\n"
    "| Course0 | T2 | R0 | P0 |\n| Course1 | T3 | R2 | P2 |\n| Course2 | T1 | R2 | P1 |\n"
    "...\nTotal xxx feasible solutions shown above.\n"
    "The question is {question}\n"
    "You must output all feasible solutions without using ellipsis, etc. The most important thing is to FIND THE "
    "SPECIFIC CONTENT OF EACH SOLUTION, rather than just counting the number of solutions. Please note that the "
    "examples I gave you are just to show the format, the actual answer may be different from the examples shown."
)
SUBSETSUM_INSTRUCTION = (
    "You are asked to perform a subset-sum task. Please find ALL FEASIBLE SUBSETS that meet the requirements one "
    "by one and output the number of feasible subsets. Output format example:\n"
    "Solution 1: {{1, 3, 5}}\nSolution 2: {{1, 4, 4}}\n...\nTotal xxx feasible solutions shown above.\n"
    "The question is {question}\n"
    "You must output all feasible solutions without using ellipsis, etc.\n"
    "The most important thing is to FIND THE SPECIFIC CONTENT OF EACH SOLUTION, rather than just counting the "
    "number of solutions. Please note that the examples I gave you are just to show the format, the actual "
    "answer may be different from the examples shown."
)
SHORT_COT_SUFFIX = " Think step by step before answering."
CONFIDENCE_PROMPT = (
    "Please rate your confidence in the proposed answer on a scale of 0-100. "
    "Put your confidence score within [[CONFIDENCE: \\boxed{}]]"
)
RECHECK_PROMPT = (
    "Recheck all your answers. You can now supplement and correct your answers. If you think your answer does "
    "not need to be changed, please output [[UNCHANGE]]. If you need to supplement or correct your answer, please "
    "input [[CHANGE]] and re-output your new answer IN FULL, NOT JUST THE PART YOU CHANGED."
)
EXPLORATION_CUE = "Wait, there may be other solutions."

PARADIGMS = ("short_cot", "long_cot")
# The turns of each variant's conversation, in order (section 3, appendix A.3): `run` asks these,
# and `planned_calls` counts these; each is the ledger purpose `muso.<variant>.<turn>`.
TURNS: dict[str, tuple[str, ...]] = {
    "standard": ("solve", "confidence", "recheck"),
    "exploration": ("solve", "cue", "confidence", "recheck"),  # the cue: "Wait, there may be other solutions."
    "self_consistency": ("solve", "confidence"),  # n paths, aggregated; no recheck
}


def variants(cfg: Config) -> list[str]:
    """The variants a configuration runs: standard, plus exploration and self-consistency when set."""
    m = cfg.muso
    return ["standard"] + (["exploration"] if m.exploration else []) + (
        ["self_consistency"] if m.self_consistency.at(cfg.scale) > 0 else [])


@dataclass(frozen=True)
class Item:
    """One MuSoBench instance as the evaluation needs it."""

    instance_id: str
    task: str
    level: int  # the bin's position when the instance was generated (informational)
    problem: dict[str, Any]
    question: str
    truth: frozenset[Any]
    level_lo: int | None = None  # the bin itself: what metrics group by
    level_hi: int | None = None  # None: an open last bin ("301+")


def solve_prompt(item: Item, paradigm: str) -> str:
    template = TIMETABLING_INSTRUCTION if item.task == "timetabling" else SUBSETSUM_INSTRUCTION
    prompt = template.format(question=item.question)
    return prompt + SHORT_COT_SUFFIX if paradigm == "short_cot" else prompt


def parse_answer(item: Item, text: str | None) -> ParsedAnswer:
    """The solutions of a reply's final answer (reasoning set aside; `validators.read`)."""
    if item.task == "timetabling":
        return read_timetables(text, item.problem)
    return read_subsets(text, item.problem)


def canonical(solution_json: Any, task: str) -> Any:
    """Stored solution JSON -> the hashable form the parsers produce."""
    return tuple(tuple(x) for x in solution_json) if task == "timetabling" else tuple(solution_json)


def _answers_json(answers: Sequence[Any]) -> str:
    return json.dumps([{"invalid": a[1]} if a and a[0] == "invalid" else a for a in answers])


@dataclass
class _Conversation:
    item: Item
    path: int
    messages: list[dict[str, str]]
    keys: list[str]
    truncated: bool = False
    failed: str | None = None

    def add(self, user: str, result: CallResult) -> CallResult:
        self.keys.append(result.key)
        self.truncated |= result.truncated
        if result.ok:  # later turns see the answer, not the reasoning before it
            self.messages += [{"role": "user", "content": user},
                              {"role": "assistant", "content": answer_part(result.text)[1]}]
        return result


def turn_params(temperature: float, max_tokens: int) -> dict[str, Any]:
    """A turn's sampling: the variant's temperature and the turn's budget."""
    return {"temperature": temperature, "max_tokens": max_tokens}


def _turn(ledger: Ledger, model: str, convs: list[_Conversation], user: str | None,
          params: dict[str, Any], purpose: str, user_of: Any = None) -> list[CallResult]:
    """One turn for every conversation: `user` (or `user_of(conv)`) appended, one ledger batch."""
    prompts = [user_of(c) if user_of else user for c in convs]
    requests = [CallRequest([*c.messages, {"role": "user", "content": p}], params, c.path) for c, p in zip(convs, prompts)]
    results = ledger.complete(model, requests, purpose=purpose)
    return [c.add(p, r) for c, p, r in zip(convs, prompts, results)]


def run(
    ledger: Ledger, model: str, items: Sequence[Item], paradigm: str, variant: str,
    temperature: float, solve_max_tokens: int, confidence_max_tokens: int, paths: int = 1,
) -> list[dict[str, Any]]:
    """Rows for `muso.responses`: one per (item, path), plus aggregated rows for self-consistency."""
    if paradigm not in PARADIGMS:
        raise ValueError(f"unknown paradigm {paradigm!r}; expected one of {PARADIGMS}")
    if variant not in TURNS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {tuple(TURNS)}")
    turns = TURNS[variant]
    solve = turn_params(temperature, solve_max_tokens)
    confid = turn_params(temperature, confidence_max_tokens)
    n_paths = paths if variant == "self_consistency" else 1
    convs = [_Conversation(item, p, [], []) for item in items for p in range(n_paths)]
    tag = f"muso.{variant}"

    first = _turn(ledger, model, convs, None, solve, f"{tag}.solve", user_of=lambda c: solve_prompt(c.item, paradigm))
    answers1 = [parse_answer(c.item, r.reply) if r.ok else None for c, r in zip(convs, first)]
    for c, r in zip(convs, first):
        if not r.ok:
            c.failed = f"solve: {r.error}"
    live = [c for c in convs if c.failed is None]

    if "cue" in turns:
        cue = _turn(ledger, model, live, EXPLORATION_CUE, solve, f"{tag}.cue")
        extra = {id(c): (parse_answer(c.item, r.reply) if r.ok else None) for c, r in zip(live, cue)}
        for i, c in enumerate(convs):
            more = extra.get(id(c))
            if answers1[i] is not None and more is not None:
                merged = ParsedAnswer(answers=list(dict.fromkeys(answers1[i].answers + more.answers)),
                                      claimed_total=more.claimed_total or answers1[i].claimed_total,
                                      error=answers1[i].error if not more.answers else None)
                merged.invalid_reasons = answers1[i].invalid_reasons + more.invalid_reasons
                answers1[i] = merged

    conf_results = dict(zip(map(id, live), _turn(ledger, model, live, CONFIDENCE_PROMPT, confid, f"{tag}.confidence")))
    recheck_results: dict[int, CallResult] = {}
    if "recheck" in turns:
        recheck_results = dict(zip(map(id, live), _turn(ledger, model, live, RECHECK_PROMPT, solve, f"{tag}.recheck")))

    rows = []
    for i, c in enumerate(convs):
        rows.append(_row(model, paradigm, "sc_path" if variant == "self_consistency" else variant, c,
                         answers1[i], conf_results.get(id(c)), recheck_results.get(id(c))))
        # the solve turn's length (figure 5a: reasoning length against the confidence stated after it)
        rows[-1]["solve_tokens"] = first[i].completion_tokens if first[i].ok else None
    if variant == "self_consistency":
        by_item: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            by_item[r["instance_id"]].append(r)
        for item in items:
            rows += _aggregate(model, paradigm, item, by_item[item.instance_id])
    for r in rows:  # a dimension of the responses: a temperature sweep (section 4.3) adds rows, never overwrites
        r["temperature"] = temperature
        r.setdefault("solve_tokens", None)  # an aggregate of self-consistency paths has no one solve turn
    return rows


# A reflection step starts where the thinking turns back on itself (a new paragraph or line opening
# with one of these cues).
REFLECTION_CUE = re.compile(r"(?:^|\n)[ \t]*(?:but\s+)?(?:wait|hmm+|alternatively|on second thought|let me (?:re-?check|"
                            r"double[- ]check|verify|check again))\b", re.I)


def reflection_prefix(thinking: str, steps: int) -> str | None:
    """The thinking paused after `steps` reflection steps: everything before the (steps + 1)-th
    reflection cue; None where the thinking has no more than `steps` (the model ended on its own, no
    pause to insert)."""
    cues = [m.start() for m in REFLECTION_CUE.finditer(thinking)]
    return thinking[:cues[steps]].rstrip() if len(cues) > steps else None


def checkpoint_continuation(r: CallResult) -> str:
    """What the model wrote after a checkpoint's inserted `</think>`. A server with a reasoning parser
    (vLLM's) that saw no `</think>` among the generated tokens files all of them under
    `reasoning_content` and leaves the content empty; the thinking was closed in the prompt, so that
    text is the answer. Where the server split the continuation itself (thinking, its own `</think>`,
    then content), the content is the answer."""
    if (r.text or "").strip():
        return r.text or ""
    return r.reasoning or ""


def checkpoints(ledger: Ledger, model: str, items: Sequence[Item], steps: Sequence[int], *, temperature: float,
                solve_max_tokens: int, confidence_max_tokens: int,
                continue_params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Reflection checkpoints (paper 001, section 5, figure 6a): Long-CoT paused after a fixed number of
    reflection steps, `</think>` inserted, and the answer it then gives recorded with its confidence
    (read from the content, or from `reasoning_content` where the server filed it there:
    `checkpoint_continuation`). `metric_rows` scores each checkpoint on its own replies and, as
    `checkpoint_<n>_fixed`, on the conversations that reached every checkpoint.
    The solve turn is the standard Long-CoT one (the same request, so the ledger answers it); each
    checkpoint continues the assistant turn "<think>\n{thinking so far}\n</think>\n\n" (the
    endpoint must continue a final assistant message: `continue_params`, the model's `prefill_params`,
    vLLM's `continue_final_message` by default). Rows have
    variant `checkpoint_<steps>`; replies with no more than that many reflection steps have none."""
    solve = {"temperature": temperature, "max_tokens": solve_max_tokens}
    convs = [_Conversation(item, 0, [], []) for item in items]
    first = _turn(ledger, model, convs, None, solve, "muso.checkpoint.solve",
                  user_of=lambda c: solve_prompt(c.item, "long_cot"))
    paused: list[tuple[int, _Conversation, str]] = []
    for c, r in zip(convs, first):
        if not r.ok:
            continue
        thinking = answer_part(r.reply)[0]
        for n in steps:
            prefix = reflection_prefix(thinking, n)
            if prefix is not None:
                head = f"<think>\n{prefix}\n</think>\n\n"
                paused.append((n, _Conversation(c.item, 0, [{"role": "user", "content": solve_prompt(c.item, "long_cot")},
                                                            {"role": "assistant", "content": head}], [r.key]), head))
    results = ledger.complete(model, [CallRequest(c.messages, {**solve, **continue_params}) for _, c, _ in paused],
                              purpose="muso.checkpoint.answer")
    answers: list[ParsedAnswer | None] = []
    for (_n, c, head), r in zip(paused, results):
        c.keys.append(r.key)
        c.truncated |= r.truncated
        if r.ok:
            after = checkpoint_continuation(r)
            c.messages[-1] = {"role": "assistant", "content": answer_part(head + after)[1]}
            answers.append(parse_answer(c.item, head + after))
        else:
            c.failed = f"checkpoint answer: {r.error}"
            answers.append(None)
    live = [c for _, c, _ in paused if c.failed is None]
    confid = {"temperature": temperature, "max_tokens": confidence_max_tokens}
    conf = dict(zip(map(id, live), _turn(ledger, model, live, CONFIDENCE_PROMPT, confid, "muso.checkpoint.confidence")))
    rows = []
    for (n, c, _), a in zip(paused, answers):
        row = _row(model, "long_cot", f"checkpoint_{n}", c, a, conf.get(id(c)), None)
        rows.append({**row, "temperature": temperature, "solve_tokens": None})
    return rows


def _row(model: str, paradigm: str, variant: str, c: _Conversation, a1: ParsedAnswer | None,
         conf: CallResult | None, recheck: CallResult | None) -> dict[str, Any]:
    item, truth = c.item, set(c.item.truth)
    row: dict[str, Any] = {
        "model": model, "paradigm": paradigm, "variant": variant, "path": c.path,
        "instance_id": item.instance_id, "task": item.task, "level": item.level,
        "level_lo": item.level_lo, "level_hi": item.level_hi,
        "status": CALL_FAILED if c.failed else "ok", "error": c.failed,
        "answers_first": None, "n_first": None, "n_first_correct": None, "n_first_invalid": None,
        "parse_error": None, "parse_method": None, "claimed_total": None, "confidence": None,
        "confidence_method": None, "recheck": None, "answers_second": None, "n_second": None, "n_second_correct": None,
        "precision": None, "recall": None, "retention": None, "correction": None, "discovery": None,
        "truncated": c.truncated, "call_keys": json.dumps(c.keys),
    }
    if c.failed or a1 is None:
        return row
    y1 = a1.answer_set
    row.update(
        answers_first=_answers_json(a1.answers), n_first=len(y1), n_first_correct=len(y1 & truth),
        n_first_invalid=len(a1.invalid_reasons), parse_error=a1.error, parse_method=a1.method,
        claimed_total=a1.claimed_total,
        precision=scoring.precision(y1, truth), recall=scoring.recall(y1, truth),
    )
    if conf is not None:
        if conf.ok:
            got = read_confidence(conf.reply)
            row["confidence"], row["confidence_method"] = got.answer, got.method if got.evidence is None else \
                f"{got.method}: {got.evidence}"
        else:
            row["confidence_method"] = CALL_FAILED
    if recheck is not None:
        y2: set[Any] | None = None
        if not recheck.ok:
            row["recheck"] = CALL_FAILED
        else:
            decision = read_recheck(recheck.reply)
            reparsed = parse_answer(item, recheck.reply)
            if decision == "unchanged":
                y2 = y1
            elif decision == "changed" or reparsed.answers:
                y2 = reparsed.answer_set
                decision = decision or "changed_without_marker"
            row["recheck"] = decision or "no_marker"
        if y2 is not None:
            row.update(
                answers_second=_answers_json(sorted(y2, key=repr)), n_second=len(y2),
                n_second_correct=len(y2 & truth), retention=scoring.retention(y1, y2, truth),
                correction=scoring.correction(y1, y2, truth), discovery=scoring.discovery(y1, y2, truth),
            )
    return row


def _decode(answers_json: str | None) -> set[Any]:
    if answers_json is None:
        return set()
    out: set[Any] = set()
    for a in json.loads(answers_json):
        out.add(("invalid", a["invalid"]) if isinstance(a, dict) else tuple(tuple(x) if isinstance(x, list) else x for x in a))
    return out


def _aggregate(model: str, paradigm: str, item: Item, paths: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Self-consistency aggregation (section 5): voting = union of all paths' answers with the
    paths' confidences weighted by how many answers each contributes; median = the path whose
    confidence is the (lower) median."""
    truth = set(item.truth)
    ok = [p for p in paths if p["status"] == "ok"]
    base = {"model": model, "paradigm": paradigm, "path": None, "instance_id": item.instance_id,
            "task": item.task, "level": item.level, "level_lo": item.level_lo, "level_hi": item.level_hi,
            "recheck": None, "answers_second": None, "n_second": None,
            "n_second_correct": None, "retention": None, "correction": None, "discovery": None,
            "parse_error": None, "parse_method": None, "claimed_total": None, "n_first_invalid": None,
            "truncated": any(p["truncated"] for p in paths),
            "call_keys": json.dumps([k for p in paths for k in json.loads(p["call_keys"])])}
    if not ok:
        failed = {**base, "status": CALL_FAILED, "error": f"all {len(paths)} paths failed",
                  "answers_first": None, "n_first": None, "n_first_correct": None, "confidence": None,
                  "confidence_method": None, "precision": None, "recall": None}
        return [{**failed, "variant": "sc_vote"}, {**failed, "variant": "sc_median"}]
    union: set[Any] = set().union(*(_decode(p["answers_first"]) for p in ok))
    weighted = [(p["confidence"], p["n_first"]) for p in ok if p["confidence"] is not None]
    if weighted and sum(n for _, n in weighted):
        vote_conf = sum(c * n for c, n in weighted) / sum(n for _, n in weighted)
    else:
        vote_conf = scoring.mean([c for c, _ in weighted])
    rows = [{**base, "variant": "sc_vote", "status": "ok", "error": None,
             "answers_first": _answers_json(sorted(union, key=repr)), "n_first": len(union),
             "n_first_correct": len(union & truth), "confidence": vote_conf,
             "confidence_method": f"vote over {len(weighted)} paths",
             "precision": scoring.precision(union, truth), "recall": scoring.recall(union, truth)}]
    confident = sorted((p for p in ok if p["confidence"] is not None), key=lambda p: (p["confidence"], p["path"]))
    chosen = confident[(len(confident) - 1) // 2] if confident else None
    if chosen is None:
        rows.append({**base, "variant": "sc_median", "status": "ok", "error": "no path gave a confidence",
                     "answers_first": None, "n_first": None, "n_first_correct": None, "confidence": None,
                     "confidence_method": None, "precision": None, "recall": None})
    else:
        y = _decode(chosen["answers_first"])
        rows.append({**base, "variant": "sc_median", "status": "ok", "error": None,
                     "answers_first": chosen["answers_first"], "n_first": len(y),
                     "n_first_correct": len(y & truth), "confidence": chosen["confidence"],
                     "confidence_method": f"median path {chosen['path']}",
                     "precision": scoring.precision(y, truth), "recall": scoring.recall(y, truth)})
    return rows


def level_label(lo: int | None, hi: int | None) -> str:
    """'51-100', or '301+' for an open last bin."""
    return f"{lo}+" if hi is None else f"{lo}-{hi}"


FIXED = "_fixed"  # suffix of the checkpoint variants scored on one fixed set of instances


def fixed_checkpoint_rows(responses: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies of the reflection-checkpoint rows (`checkpoint_<n>`) restricted to one fixed set of
    conversations, as variant `checkpoint_<n>_fixed`: per model, paradigm, temperature and task, the
    (instance, path) pairs that reached every checkpoint of that group. Each `checkpoint_<n>` is
    scored on the replies with more than n reflection steps, so its set shrinks as n grows and the
    curve over n (paper 001, figure 6a) mixes the trend with which instances remain; over the fixed
    set the curve shows the trend alone. Both are kept."""
    reached: dict[tuple[Any, ...], dict[tuple[Any, ...], set[str]]] = defaultdict(lambda: defaultdict(set))
    steps: dict[tuple[Any, ...], set[str]] = defaultdict(set)
    for r in responses:
        v = r["variant"]
        if v.startswith("checkpoint_") and not v.endswith(FIXED):
            head = (r["model"], r["paradigm"], r.get("temperature"), r["task"])
            reached[head][(r["instance_id"], r["path"])].add(v)
            steps[head].add(v)
    out = []
    for r in responses:
        v = r["variant"]
        if v.startswith("checkpoint_") and not v.endswith(FIXED):
            head = (r["model"], r["paradigm"], r.get("temperature"), r["task"])
            if reached[head][(r["instance_id"], r["path"])] == steps[head]:
                out.append({**r, "variant": v + FIXED})
    return out


def metric_rows(responses: Sequence[dict[str, Any]], bins: Mapping[str, Sequence[tuple[int, int | None]]]
                ) -> list[dict[str, Any]]:
    """`muso.metrics` rows per model x paradigm x temperature x variant x task x bin, plus level
    'all' (0) per task.

    Rows are grouped by the bin itself (level_lo, level_hi), never by a position, so inserting a
    level in the configuration cannot merge two bins; `level` is the bin's position in `bins` (the
    configured bins per task, from 1), NULL for a bin the configuration no longer has (the
    `every_model_task_level` check then fails). Per-path self-consistency rows are not scored.
    """
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in [*responses, *fixed_checkpoint_rows(responses)]:
        if r["variant"] == "sc_path":
            continue
        head = (r["model"], r["paradigm"], r.get("temperature"), r["variant"], r["task"])
        groups[(*head, r.get("level_lo"), r.get("level_hi"), False)].append(r)
        groups[(*head, None, None, True)].append(r)
    out = []
    for key, rows in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        model, paradigm, temperature, variant, task, lo, hi, overall = key
        configured = [tuple(b) for b in bins.get(task, [])]
        level = 0 if overall else (configured.index((lo, hi)) + 1 if (lo, hi) in configured else None)
        ok = [r for r in rows if r["status"] == "ok" and r["recall"] is not None]
        with_conf = [r for r in ok if r["confidence"] is not None]
        confs = [r["confidence"] / 100 for r in with_conf]
        stable = [r for r in ok if r["discovery"] is not None]
        out.append({
            "model": model, "paradigm": paradigm, "temperature": temperature, "variant": variant, "task": task,
            "level": level, "level_label": "all" if overall else level_label(lo, hi), "level_lo": lo, "level_hi": hi,
            "n_instances": len(rows), "n_scored": len(ok),
            "n_failed_calls": sum(r["status"] == CALL_FAILED for r in rows),
            "n_parse_failures": sum(r["parse_error"] is not None for r in ok),
            "n_truncated": sum(bool(r["truncated"]) for r in rows),
            "precision": scoring.mean([r["precision"] for r in ok]),
            "recall": scoring.mean([r["recall"] for r in ok]),
            "n_confidence": len(with_conf),
            "mean_confidence": scoring.mean([r["confidence"] for r in with_conf]),
            "ece_precision": scoring.ece(confs, [r["precision"] for r in with_conf]),
            "ece_recall": scoring.ece(confs, [r["recall"] for r in with_conf]),
            "n_stability": len(stable),
            "retention": scoring.mean([r["retention"] for r in stable]),
            "correction": scoring.mean([r["correction"] for r in stable]),
            "discovery": scoring.mean([r["discovery"] for r in stable]),
        })
    return out


def items_from_rows(instances: Sequence[Mapping[str, Any]], solutions: Sequence[Mapping[str, Any]]) -> list[Item]:
    """The protocol's items from a level's stored rows: `muso.instances` (instance_id, task, level,
    level_lo, level_hi, question, parameters) and `muso.solutions` (instance_id, task, solution)."""
    sols: dict[str, set] = {}
    for r in solutions:
        sols.setdefault(r["instance_id"], set()).add(canonical(json.loads(r["solution"]), r["task"]))
    return [Item(r["instance_id"], r["task"], r["level"], json.loads(r["parameters"])["problem"],
                 r["question"], frozenset(sols.get(r["instance_id"], ())), r["level_lo"], r["level_hi"])
            for r in instances]


def coverage(evaluated: Sequence[str], built: set[tuple[str, int, int | None]], rows: Sequence[dict[str, Any]]) -> Check:
    """Every evaluated model has metrics for every (task, bin) the configuration builds (an empty
    or replaced file holds nothing, and nothing measured is no pass), and no metrics row is for a
    bin the configuration no longer has (a level inserted or changed: its responses are stale)."""
    expected = {(model, task, lo, hi) for model in evaluated for task, lo, hi in built}
    present = {(r["model"], r["task"], r["level_lo"], r["level_hi"]) for r in rows
               if r["variant"] == "standard" and r["level"] != 0}
    missing = sorted(expected - present, key=str)
    stale = sorted({f"{r['task']} {r['level_label']}" for r in rows if r["level"] is None})
    return Check("every_model_task_level", not missing and not stale,
                 {"missing": [list(m) for m in missing], "bins_not_configured": stale},
                 "every evaluated model has metrics for every configured bin, and no metrics row is for a bin "
                 "the configuration no longer has")

# -- the calls this protocol makes, declared for `--plan` (evaluations/calls.py) -------------------

def planned_requests(cfg: Config, query: Query) -> Iterator[tuple[str, str, CallRequest]]:
    """(model, purpose, request) of every solve turn `run` starts, from the stored instances, as
    the asset runs them (paradigm x variant x temperature x instance x path); the later turns
    carry the solve reply, unknown before the run. Nothing before the instances are built."""
    m = cfg.muso
    items = items_from_rows(query("SELECT instance_id, task, level, level_lo, level_hi, question, parameters "
                                  "FROM muso.instances ORDER BY partition_key, instance_id"), [])
    paths = max(1, m.self_consistency.at(cfg.scale))
    for model in cfg.evaluate:
        for paradigm in m.paradigms_for(model):
            for variant in variants(cfg):
                n_paths = paths if variant == "self_consistency" else 1
                for temperature in m.temperatures:
                    solve = turn_params(temperature, m.solve_max_tokens.at(cfg.scale))
                    for item in items:
                        for path in range(n_paths):
                            yield model, f"muso.{variant}.solve", CallRequest(
                                [{"role": "user", "content": solve_prompt(item, paradigm)}], solve, path)


def planned_calls(cfg: Config, query: Query) -> list[Line]:
    """Every call a run of this family makes, per step, model and partition (see `_planned_lines`)."""
    return _planned_lines(cfg, item_counts(cfg, query))


def item_counts(cfg: Config, query: Query) -> Counts:
    stored = {r["partition_key"]: r["n"] for r in query("SELECT partition_key, count(*) AS n FROM muso.instances GROUP BY ALL")}
    quota = cfg.muso.quota.at(cfg.scale)
    out, source = {}, {}
    for pk in muso_gen.partitions(cfg):
        held = {"instances": stored[pk]} if pk in stored else None
        out[pk], source[pk] = stored_or_configured(held, {"instances": quota}, "instances")
    return Counts(out, source)


def _planned_lines(cfg: Config, counts: Counts) -> list[Line]:
    """evaluations/muso.py `run`: per paradigm, variant and temperature, every instance (times the
    self-consistency paths) is solved, asked its confidence and, except self-consistency paths,
    asked to recheck; the exploration variant adds its cue turn. The solve turns are exact."""
    m = cfg.muso
    paths = max(1, m.self_consistency.at(cfg.scale))
    per_step: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for pk, c in counts.by_partition.items():
        for model in cfg.evaluate:
            for variant in variants(cfg):
                conversations = c["instances"] * (paths if variant == "self_consistency" else 1)
                for turn in TURNS[variant]:
                    per_step[(model, f"muso.{variant}.{turn}", counts.source[pk], pk)] += (
                        conversations * len(m.paradigms_for(model)) * len(m.temperatures))
            if m.reflection_checkpoints and "long_cot" in m.paradigms_for(model):
                # the standard Long-CoT solve again (answered by the ledger), then per checkpoint reached
                for step in ("muso.checkpoint.answer", "muso.checkpoint.confidence"):
                    per_step[(model, step, counts.source[pk], pk)] += (
                        c["instances"] * len(m.reflection_checkpoints) * len(m.temperatures))
    # the later turns carry the solve reply: conversations with equal replies are one request
    return [Line("muso", model, step, n, EXACT if step.endswith(".solve") else AT_MOST, src, pk, model)
            for (model, step, src, pk), n in per_step.items()]


# what the cross-family code reads (configuration/families.py: Parts.protocol)
PROTOCOL = Protocol(planned_calls, planned_requests, left_out_at_demo=muso_gen.left_out_at_demo)
