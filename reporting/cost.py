"""Tokens and cost: what the calls a configured run will make cost before it makes them (`--plan`),
and what a run spent (the command's summary).

Per step (model and ledger purpose) of the capacity plan, for its new calls (the cached ones are
answered by the ledger and cost nothing):

- **prompt tokens** are counted from the requests the run will send, where the stored items fix
  their text: each family's `planned_requests(cfg, query)` (`evaluations/<key>.py`) builds them
  with the builders the run uses (MuSoBench's solve turns, WakenLLM's direct pass, Instruction
  Boundary's one-call settings and first turns, S1-Bench's evaluation), and the model's own system
  prompt and prefill are added as the ledger adds them (`counted`). A step whose prompts carry
  earlier replies (a second turn, a judge) is counted from the requests the ledger already
  holds for that step, by any model (`stored requests`); otherwise its prompt tokens are unknown.
  Tokens are counted with the Qwen2.5 tokenizer shipped in the install, plus 3 per message and 3
  for the reply (the chat template's markers): a provider counts with its own tokenizer, so a
  hosted model's own `usage` can differ by some percent.
- **completion tokens** are the observed mean of the model's answered calls of that step in the
  ledger (`observed`) where it holds any, else the step's budget (`max_tokens`), an upper bound
  (`budget`).
- **cost** from the model's `price` (per million tokens): input, output, cached input at the share
  of prompt tokens the provider served from its cache in the model's stored calls of the step,
  and the batch discount for a model in `batch: {mode: api}`. A model without a price has tokens
  and no cost.

What a run spent is summed from the `usage` of the calls its Dagster runs stored (`llm.calls`
rows with their run ids): what the provider counted, not an estimate.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from configuration import Config, ModelConfig
from configuration.families import FAMILIES
from evaluations.calls import Query, protocol_of
from llm_calls import CallRequest, default_sampling, model_identity, model_messages, probe_request
from validators.s1 import count_tokens
from warehouse import Warehouse

PER_MESSAGE, PER_REPLY = 3, 3  # the chat template's tokens around each message and before the reply
_STORED_SAMPLE = 500  # stored requests re-counted per step


def request_tokens(messages: Iterable[Mapping[str, str]]) -> int:
    """Prompt tokens of a chat request: its messages' text by the Qwen2.5 tokenizer and the template's markers."""
    n = PER_REPLY
    for m in messages:
        n += PER_MESSAGE + (count_tokens(m["content"]) or 0)
    return n


def as_sent(m: ModelConfig, req: CallRequest) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """A request's messages and parameters as the ledger sends them for model `m`."""
    messages = model_messages(m, req.messages) if (m.system_prompt or m.prefill) else [dict(x) for x in req.messages]
    return messages, {**default_sampling(m), **dict(req.params)}


def planned_requests(cfg: Config, query: Query) -> Iterator[tuple[str, str, CallRequest]]:
    """(model, purpose, request) of every request whose text the configuration and the stored
    items fix: the models probe's, and each family's `planned_requests`."""
    for name in cfg.models:
        yield name, "models.probe", probe_request(cfg.probe_prompt)
    for family in FAMILIES:
        protocol = protocol_of(family)
        if protocol.planned_requests is not None:
            yield from protocol.planned_requests(cfg, query)


@dataclass
class Estimate:
    """One step's tokens per call, and where each figure came from."""

    prompt: float | None = None
    prompt_source: str = "-"
    completion: float | None = None
    completion_source: str = "-"
    cached_share: float = 0.0  # of prompt tokens, served from the provider's cache (observed)


def counted(cfg: Config, query: Query) -> dict[tuple[str, str], tuple[float, float | None, int]]:
    """(model, purpose) -> (mean prompt tokens, mean budget, requests counted) of the planned requests."""
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for model, purpose, req in planned_requests(cfg, query):
        messages, params = as_sent(cfg.model(model), req)
        s = sums[(model, purpose)]
        s[0] += request_tokens(messages)
        s[1] += params.get("max_tokens") or 0
        s[2] += 1
    return {k: (p / n, (b / n) or None, int(n)) for k, (p, b, n) in sums.items()}


def estimates(cfg: Config, wh: Warehouse | None, query: Query, steps: Iterable[tuple[str, str]]) -> dict[tuple[str, str], Estimate]:
    """Tokens per call of each (model, purpose) in `steps` (see the module docstring for the order
    of the sources)."""
    steps = set(steps)
    built = counted(cfg, query)
    observed = _observed(cfg, wh)
    out = {}
    for model, purpose in steps:
        e = Estimate()
        budget = None
        if (model, purpose) in built:
            e.prompt, budget, _ = built[(model, purpose)]
            e.prompt_source = "counted"
        else:
            again = _stored_requests(wh, purpose)
            if again is not None:
                e.prompt, budget = again
                e.prompt_source = "stored requests"
        seen = observed.get((model, purpose))
        if seen and seen["completion"] is not None:
            e.completion, e.completion_source = seen["completion"], "observed"
        elif budget:
            e.completion, e.completion_source = budget, "budget"
        if seen and seen["prompt"]:
            e.cached_share = (seen["cached"] or 0) / seen["prompt"]
        out[(model, purpose)] = e
    return out


def _observed(cfg: Config, wh: Warehouse | None) -> dict[tuple[str, str], dict[str, float | None]]:
    if wh is None or not wh.exists():
        return {}
    names = {model_identity(n, m): n for n, m in cfg.models.items()}
    out = {}
    for r in wh.rows("SELECT model_identity, purpose, avg(completion_tokens) AS completion, "
                     "sum(prompt_tokens) AS prompt, sum(cached_prompt_tokens) AS cached FROM llm.calls "
                     "WHERE status = 'ok' GROUP BY ALL"):
        if r["model_identity"] in names:
            out[(names[r["model_identity"]], r["purpose"])] = {
                "completion": None if r["completion"] is None else float(r["completion"]),
                "prompt": r["prompt"], "cached": r["cached"]}
    return out


def _stored_requests(wh: Warehouse | None, purpose: str) -> tuple[float, float | None] | None:
    """Mean prompt tokens and budget of the step's requests the ledger holds (any model), re-counted."""
    if wh is None or not wh.exists():
        return None
    rows = wh.rows("SELECT request FROM llm.calls WHERE purpose = ? ORDER BY key LIMIT ?", [purpose, _STORED_SAMPLE])
    if not rows:
        return None
    tokens, budgets = [], []
    for r in rows:
        req = json.loads(r["request"])
        tokens.append(request_tokens(req["messages"]))
        p = req.get("params", {})
        budgets.append(p.get("max_tokens") or p.get("max_completion_tokens") or 0)
    return sum(tokens) / len(tokens), (sum(budgets) / len(budgets)) or None


def batched(m: ModelConfig, purpose: str) -> bool:
    """Whether `m`'s calls of `purpose` go through a provider's Batch API (the probe asks live)."""
    from llm_calls import LIVE_PURPOSES

    return m.batch is not None and m.batch.mode == "api" and not purpose.startswith(LIVE_PURPOSES)


def price_of(m: ModelConfig, prompt: float, completion: float, cached_share: float = 0.0,
             in_batch: bool = False) -> float | None:
    """The cost of `prompt` and `completion` tokens of model `m` (None without a price), at the
    batch discount for calls made `in_batch`."""
    p = m.price
    if p is None:
        return None
    cached = prompt * cached_share
    rate = p.cached_input_per_mtok if p.cached_input_per_mtok is not None else p.input_per_mtok
    cost = ((prompt - cached) * p.input_per_mtok + cached * rate + completion * p.output_per_mtok) / 1e6
    return cost * (p.batch_discount if in_batch else 1.0)


@dataclass(frozen=True)
class StepCost:
    family: str
    model: str
    step: str
    new: int
    prompt_tokens: float | None
    prompt_source: str
    completion_tokens: float | None
    completion_source: str
    cost: float | None


def step_costs(cfg: Config, rows: Sequence[Any], est: Mapping[tuple[str, str], Estimate]) -> list[StepCost]:
    """Per plan row (`reporting.plan.Row`): its new calls' tokens and cost."""
    out = []
    for r in rows:
        ln = r.line
        e = est.get((ln.model, ln.purpose), Estimate())
        prompt = None if e.prompt is None else e.prompt * r.new
        completion = None if e.completion is None else e.completion * r.new
        m = cfg.model(ln.model)
        cost = price_of(m, prompt, completion, e.cached_share, batched(m, ln.step)) \
            if prompt is not None and completion is not None else None
        out.append(StepCost(ln.family, ln.model, ln.step, r.new, prompt, e.prompt_source, completion,
                            e.completion_source, cost))
    return out


def render(cfg: Config, costs: Sequence[StepCost]) -> str:
    """The tokens and cost table of the plan, then per family and model and in all."""
    out = ["", f"{'family':<7} {'model':<14} {'step':<40} {'new':>9} {'prompt tokens':>15} {'':<15} "
               f"{'completion tokens':>17} {'':<8} {'cost':>11}"]
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for c in costs:
        if not c.new:
            continue
        out.append(f"{c.family:<7} {c.model[:14]:<14} {c.step[:40]:<40} {c.new:>9} {_n(c.prompt_tokens):>15} "
                   f"{c.prompt_source:<15} {_n(c.completion_tokens):>17} {c.completion_source:<8} "
                   f"{_money(cfg, c.model, c.cost):>11}")
        t = totals[(c.family, c.model)]
        t[0] += c.prompt_tokens or 0
        t[1] += c.completion_tokens or 0
        t[2] += c.cost or 0
        t[3] += c.new if c.prompt_tokens is None or c.completion_tokens is None else 0
    out += ["", f"{'family':<7} {'model':<14} {'prompt tokens':>15} {'completion tokens':>18} {'cost':>11}  "
                "(new calls; completion at the budget where no stored call of the step says more)"]
    grand = defaultdict(float)
    unknown = 0
    for (family, model), (p, c, cost, no_tokens) in totals.items():
        priced = cfg.model(model).price is not None
        note = (f"  ({no_tokens} calls not estimated: their items are not built yet, or their prompts carry "
                "replies and the ledger holds no call of the step)") if no_tokens else ""
        out.append(f"{family:<7} {model[:14]:<14} {_n(p):>15} {_n(c):>18} "
                   f"{_money(cfg, model, cost if priced else None):>11}{note}")
        unknown += no_tokens
        if priced:
            grand[cfg.model(model).price.currency] += cost
    money = ", ".join(f"{v:,.{2 if v >= 1 else 4}f} {k}" for k, v in sorted(grand.items())) or "no model has a price"
    out.append(f"\nTotal cost of the new calls: {money}" + (f" (and {unknown} calls not estimated)" if unknown else "")
               + "; tokens counted with the Qwen2.5 tokenizer (reporting/cost.py).")
    return "\n".join(out)


def spent(cfg: Config, wh: Warehouse, run_ids: Sequence[str]) -> str | None:
    """What the calls the given runs made cost, from their stored usage, per model; None if they made none."""
    if not run_ids or not wh.exists():
        return None
    rows = wh.rows("""SELECT model, endpoint_host LIKE '% batch %' AS batched, count(*) AS calls,
                             coalesce(sum(prompt_tokens), 0) AS prompt, coalesce(sum(completion_tokens), 0) AS completion,
                             coalesce(sum(cached_prompt_tokens), 0) AS cached
                      FROM llm.calls WHERE run_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL ORDER BY ALL""",
                   [list(run_ids)])
    if not rows:
        return None
    parts = []
    for r in rows:
        m = cfg.models.get(r["model"])
        cost = None
        if m is not None and m.price is not None:
            share = r["cached"] / r["prompt"] if r["prompt"] else 0.0
            cost = price_of(m, r["prompt"], r["completion"], share, bool(r["batched"]))
        parts.append(f"{r['model']}{' (batch)' if r['batched'] else ''}: {r['calls']} calls, {r['prompt']:,} prompt "
                     f"({r['cached']:,} from the provider's prompt cache) + {r['completion']:,} completion tokens"
                     + (f" = {_money(cfg, r['model'], cost)}" if cost is not None else " (no price configured)"))
    return "Spent by this run: " + "; ".join(parts)


def _n(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def _money(cfg: Config, model: str, cost: float | None) -> str:
    if cost is None:
        return "-"
    return f"{cost:,.{2 if cost >= 1 else 4}f} {cfg.model(model).price.currency}"
