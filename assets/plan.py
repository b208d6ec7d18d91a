"""The capacity plan: the model calls a configured run will make, before it makes them.

`python -m assets.materialize_all --plan` prints, per family and model, each step's calls (the
ledger `purpose` they carry), how many of them the warehouse already answers, and the time the
new ones take at the model's concurrency and a per-call latency (given with `--latency`, else
the median of the model's stored calls, else measured from a few probe calls).

Each count is what the families' code does, step by step:

- `exact`: requests fixed by the configuration and the items alone (every item, setting,
  paradigm, temperature and sample asked once), made in full when every call is answered (a
  failed call ends its conversation, so a run against a failing endpoint makes fewer).
- `at most`: steps that depend on earlier replies. Some run only for some replies (WakenLLM's
  stages on the items answered Unknown; a judge on the replies exact reading could not decide;
  S1-Bench validates the candidates that survive discrimination and reduces those that fail).
  Later turns of a conversation carry the earlier reply, and two conversations whose replies
  were the same are one request to the ledger, so those are bounds too. A bound is reached when
  every reply takes the branch and every reply differs.
- `at least`: ScienceQA Unknown drafts that the judge rejects are replaced from the pool, each
  replacement one more call.

Item counts come from the warehouse when the items are stored (`source: warehouse`), otherwise
from the configuration (`source: configuration`). "Cached" counts the stored answered calls of the
same model identity and step, capped at the step's calls: exact for a rerun of an unchanged
configuration; after a change of prompts or parameters, some of those stored calls no longer
match a request, so it is an upper bound on what the cache will answer.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from configuration import Config
from warehouse import Warehouse

EXACT, AT_MOST, AT_LEAST = "exact", "at most", "at least"


@dataclass(frozen=True)
class Line:
    family: str
    model: str
    step: str  # the ledger purpose of these calls
    calls: int
    kind: str = EXACT
    source: str = "configuration"  # where the item counts came from


@dataclass(frozen=True)
class Counts:
    """Item counts per partition, and where they came from."""

    by_partition: dict[str, dict[str, int]]
    source: dict[str, str]


# -- item counts -------------------------------------------------------------------------------

def _stored(wh: Warehouse | None, sql: str, params: Sequence[object] = ()) -> list[dict]:
    if wh is None or not wh.path.exists():
        return []
    return wh.rows(sql, list(params))


def ib_counts(cfg: Config, wh: Warehouse | None) -> Counts:
    """Per dataset: complete and insufficient items (and the miscellany's items)."""
    from assets.ib import MISCELLANY

    stored = defaultdict(dict)
    for r in _stored(wh, "SELECT dataset, variant, count(*) AS n FROM ib.items GROUP BY ALL"):
        stored[r["dataset"]][r["variant"]] = r["n"]
    out, source = {}, {}
    for name, spec in [*cfg.ib.datasets.items(), (MISCELLANY, cfg.ib.miscellany)]:
        if name in stored:
            out[name], source[name] = dict(stored[name]), "warehouse"
            continue
        n = spec.count.at(cfg.scale)  # base questions: a complete and an insufficient item each
        out[name] = {"miscellany": 9 * n} if name == MISCELLANY else {"complete": n, "insufficient": n}
        source[name] = "configuration"
    return Counts(out, source)


def waken_counts(cfg: Config, wh: Warehouse | None) -> Counts:
    stored = {r["dataset"]: r for r in _stored(
        wh, "SELECT dataset, count(*) AS n, count(*) FILTER (WHERE label = 'Unknown') AS u FROM waken.items GROUP BY ALL")}
    out, source = {}, {}
    for name, spec in cfg.waken.datasets.items():
        if name in stored:
            out[name] = {"items": stored[name]["n"], "unknown": stored[name]["u"]}
            source[name] = "warehouse"
        else:
            n = spec.count.at(cfg.scale)
            out[name], source[name] = {"items": n, "unknown": n // 2, "drafts": n // 2}, "configuration"
        out[name]["scienceqa"] = int(spec.kind == "scienceqa")
    return Counts(out, source)


def muso_counts(cfg: Config, wh: Warehouse | None) -> Counts:
    from assets.muso import partitions

    stored = {r["partition_key"]: r["n"] for r in _stored(
        wh, "SELECT partition_key, count(*) AS n FROM muso.instances GROUP BY ALL")}
    quota = cfg.muso.quota.at(cfg.scale)
    out = {pk: {"instances": stored.get(pk, quota)} for pk in partitions(cfg)}
    return Counts(out, {pk: "warehouse" if pk in stored else "configuration" for pk in out})


def s1_counts(cfg: Config, wh: Warehouse | None) -> Counts:
    """Initial candidates (the programmatic ones made here exactly as the construction makes them,
    the LLM generators' as many as each is asked for) and the accepted items if stored."""
    from generators.s1 import load_registry
    from generators.s1_construction import programmatic_candidates

    s = cfg.s1
    reg = load_registry()
    subs = s.demo_subcategories if cfg.scale == "demo" else (s.subcategories or list(reg.subcategories))
    per = s.candidates_per_subcategory.at(cfg.scale)
    programmatic = sum(len(programmatic_candidates(cfg.seed, sub, s.languages, per)) for sub in subs) \
        if s.programmatic else 0
    generated = len(s.generators) * len(subs) * per * len(s.languages)
    stored = _stored(wh, "SELECT count(*) AS n FROM s1.items")
    items = stored[0]["n"] if stored and stored[0]["n"] else None
    return Counts({"construction": {"subcategories": len(subs), "programmatic": programmatic,
                                    "generated": generated},
                   "evaluation": {"items": items if items is not None else programmatic + generated}},
                  {"construction": "configuration",
                   "evaluation": "warehouse" if items is not None else "configuration (every candidate accepted)"})


# -- the families' call structure ----------------------------------------------------------------

def models_lines(cfg: Config) -> list[Line]:
    """The models asset: one probe call per configured model."""
    return [Line("llm", name, "models.probe", 1) for name in cfg.models]


def ib_lines(cfg: Config, counts: Counts) -> list[Line]:
    """evaluations/ib.py `Runner.run`: each setting asks every complete item once (multi-turn twice,
    prompt polishing after a rewrite by the polisher), missing-choices the insufficient items,
    disturbing-miscellany the miscellany items; the judge reads at most every reply."""
    from assets.ib import MISCELLANY

    polisher = cfg.ib.polisher or cfg.judge
    out: list[Line] = []
    for name, c in counts.by_partition.items():
        src = counts.source[name]
        for model in cfg.evaluate:
            asked = 0
            # multi-turn's first turn is the vanilla request: whichever setting comes first makes it
            order = list(cfg.ib.settings)
            shared: set[str] = set()
            if {"vanilla", "multi_turn"} <= set(order):
                shared = {"ib.multi_turn.first" if order.index("vanilla") < order.index("multi_turn") else "ib.vanilla"}
            for setting in cfg.ib.settings:
                if (setting == "disturbing_miscellany") != (name == MISCELLANY):
                    continue
                n = {"missing_choices": c.get("insufficient", 0),
                     "disturbing_miscellany": c.get("miscellany", 0)}.get(setting, c.get("complete", 0))
                if setting == "multi_turn" and "ib.multi_turn.first" not in shared:
                    out.append(Line("ib", model, "ib.multi_turn.first", n, EXACT, src))
                elif setting == "prompt_polishing":
                    out.append(Line("ib", polisher, "ib.prompt_polishing.rewrite", n, EXACT, src))
                if f"ib.{setting}" not in shared:  # the second turn and the polished prompt come from replies
                    kind = AT_MOST if setting in ("multi_turn", "prompt_polishing") else EXACT
                    out.append(Line("ib", model, f"ib.{setting}", n, kind, src))
                asked += n * (2 if setting == "multi_turn" else 1)
            out.append(Line("ib", cfg.judge, "ib.judge", asked, AT_MOST, src))
    return out


def waken_lines(cfg: Config, counts: Counts) -> list[Line]:
    """evaluations/waken.py `Pipeline.run`: the direct answers and every baseline over all items
    (self-reflection a second turn each) are fixed; the diagnosis (Unknown items answered
    Unknown), the stages, Remind-then-Guide, the ablation and the cause classification run on the
    items the replies select, at most all of them; the judge reads at most every reply. ScienceQA
    items need one judge verification per Unknown draft (more when drafts are rejected)."""
    w = cfg.waken
    out: list[Line] = []
    for name, c in counts.by_partition.items():
        src, n, u = counts.source[name], c["items"], c["unknown"]
        if c["scienceqa"] and counts.source[name] == "configuration":
            out.append(Line("waken", cfg.judge, "waken.unknown_verification", c["drafts"], AT_LEAST, src))
        for model in cfg.evaluate:
            # self-reflection's first turn is the direct request itself: the ledger answers it from there
            fixed = [("waken.direct", n)] + [(f"waken.baseline.{b}", n) for b in w.baselines if b != "self_reflection"]
            bounded = [("waken.baseline.self_reflection.reflect", n)] if "self_reflection" in w.baselines else []
            bounded += [("waken.diagnosis", u), ("waken.stage1.vanilla", n), ("waken.stage2.vanilla", n)]
            for rate in w.misguiding_rates:
                bounded += [(f"waken.rtg_label_stage1.M={rate:.3f}", n), (f"waken.rtg_label_stage2.M={rate:.3f}", n)]
            bounded += [("waken.rtg_rp_stage1.reasoning", n), ("waken.rtg_rp_stage2.reasoning", n),
                        (f"waken.ablation.T={w.ablation_temperature}", n)]
            out += [Line("waken", model, step, k, EXACT, src) for step, k in fixed]
            out += [Line("waken", model, step, k, AT_MOST, src) for step, k in bounded]
            out.append(Line("waken", cfg.judge, "waken.cause", n, AT_MOST, src))
            out.append(Line("waken", cfg.judge, "waken.judge", sum(k for _, k in fixed + bounded), AT_MOST, src))
    return out


def muso_lines(cfg: Config, counts: Counts) -> list[Line]:
    """evaluations/muso.py `run`: per paradigm, variant and temperature, every instance (times the
    self-consistency paths) is solved, asked its confidence and, except self-consistency paths,
    asked to recheck; the exploration variant adds its cue turn. The solve turns are exact."""
    m = cfg.muso
    paths = max(1, m.self_consistency.at(cfg.scale))
    variants = ["standard"] + (["exploration"] if m.exploration else []) + (
        ["self_consistency"] if m.self_consistency.at(cfg.scale) > 0 else [])
    turns = {"standard": ["solve", "confidence", "recheck"], "exploration": ["solve", "cue", "confidence", "recheck"],
             "self_consistency": ["solve", "confidence"]}
    per_step: dict[tuple[str, str, str], int] = defaultdict(int)
    sources = set()
    for pk, c in counts.by_partition.items():
        sources.add(counts.source[pk])
        for model in cfg.evaluate:
            for variant in variants:
                conversations = c["instances"] * (paths if variant == "self_consistency" else 1)
                for turn in turns[variant]:
                    per_step[(model, f"muso.{variant}.{turn}", counts.source[pk])] += (
                        conversations * len(m.paradigms_for(model)) * len(m.temperatures))
            if m.reflection_checkpoints and "long_cot" in m.paradigms_for(model):
                # the standard Long-CoT solve again (answered by the ledger), then per checkpoint reached
                for step in ("muso.checkpoint.answer", "muso.checkpoint.confidence"):
                    per_step[(model, step, counts.source[pk])] += (
                        c["instances"] * len(m.reflection_checkpoints) * len(m.temperatures))
    # the later turns carry the solve reply: conversations with equal replies are one request
    return [Line("muso", model, step, n, EXACT if step.endswith(".solve") else AT_MOST, src)
            for (model, step, src), n in per_step.items()]


def s1_lines(cfg: Config, counts: Counts) -> list[Line]:
    """generators/s1_construction.py and evaluations/s1.py: one generation call per generator and
    subcategory; each candidate discriminated by every discriminator and validated by every
    validator (temperatures x samples), the judge grading answers without an exact check, the
    failures reduced and sent round again, for at most `max_rounds` reductions; then every
    accepted item answered k times plus once greedily by each evaluated model, the judge grading
    (with up to two rewrites) the answers that have no exact check."""
    s = cfg.s1
    c = counts.by_partition["construction"]
    candidates = c["programmatic"] + c["generated"]
    rounds = 1 + s.max_rounds.at(cfg.scale)
    validators = s.validators or [cfg.judge]
    per_validator = len(s.temperatures) * s.samples_per_temperature
    out = [Line("s1", g, "s1.generate", c["subcategories"]) for g in s.generators]
    for d in s.discriminators:
        out.append(Line("s1", d, "s1.discriminate", candidates * rounds, AT_MOST))
    for v in validators:
        # round 0: the candidates that discrimination and near-duplicate removal leave
        out.append(Line("s1", v, "s1.validate", candidates * per_validator, AT_MOST))
        if rounds > 1:
            out.append(Line("s1", v, "s1.validate (reduced)", candidates * per_validator * (rounds - 1), AT_MOST))
    out.append(Line("s1", s.reducer or cfg.judge, "s1.reduce", candidates * (rounds - 1), AT_MOST))
    out.append(Line("s1", cfg.judge, "s1.validate.judge", candidates * rounds * per_validator * len(validators), AT_MOST))
    items, src = counts.by_partition["evaluation"]["items"], counts.source["evaluation"]
    per_model = items * (s.k + 1)
    kind = EXACT if src == "warehouse" else AT_MOST
    for model in cfg.evaluate:
        calls = per_model + (items * per_validator if model in s.table2_models else 0)  # table 2's sweep
        out.append(Line("s1", model, "s1.evaluate", calls, kind, src))
        out.append(Line("s1", cfg.judge, "s1.evaluate.judge", 3 * calls, AT_MOST, src))
    return out


FAMILIES: dict[str, Callable[[Config, Warehouse | None], list[Line]]] = {
    "llm": lambda cfg, wh: models_lines(cfg),
    "muso": lambda cfg, wh: muso_lines(cfg, muso_counts(cfg, wh)),
    "waken": lambda cfg, wh: waken_lines(cfg, waken_counts(cfg, wh)),
    "ib": lambda cfg, wh: ib_lines(cfg, ib_counts(cfg, wh)),
    "s1": lambda cfg, wh: s1_lines(cfg, s1_counts(cfg, wh)),
}


def plan_lines(cfg: Config, wh: Warehouse | None, families: Sequence[str] | None = None) -> list[Line]:
    """Every step's calls, merged per (family, model, step, kind)."""
    merged: dict[tuple[str, str, str, str], list] = {}
    for family, lines_of in FAMILIES.items():
        if families and family not in families:
            continue
        for ln in lines_of(cfg, wh):
            if ln.calls <= 0:
                continue
            key = (ln.family, ln.model, ln.step, ln.kind)
            if key in merged:
                merged[key][0] += ln.calls
                merged[key][1].add(ln.source)
            else:
                merged[key] = [ln.calls, {ln.source}]
    return [Line(f, m, st, n, k, ", ".join(sorted(srcs))) for (f, m, st, k), (n, srcs) in merged.items()]


# -- cache, latency, time ------------------------------------------------------------------------

def stored_calls(cfg: Config, wh: Warehouse | None) -> dict[tuple[str, str], int]:
    """Answered calls in the ledger per (model, purpose), for the configured models' identities."""
    from llm_calls.endpoints import model_identity

    if wh is None or not wh.path.exists():
        return {}
    identities = {model_identity(name, m): name for name, m in cfg.models.items()}
    out: dict[tuple[str, str], int] = {}
    for r in wh.rows("SELECT model_identity, purpose, count(*) AS n FROM llm.calls WHERE status = 'ok' GROUP BY ALL"):
        if r["model_identity"] in identities:
            out[(identities[r["model_identity"]], r["purpose"])] = r["n"]
    return out


def stored_latency(cfg: Config, wh: Warehouse | None) -> dict[str, tuple[float, int]]:
    """Median latency of each configured model's answered calls, and how many calls it is over."""
    from llm_calls.endpoints import model_identity

    if wh is None or not wh.path.exists():
        return {}
    out = {}
    for name, m in cfg.models.items():
        rows = wh.rows("SELECT median(latency_s) AS s, count(*) AS n FROM llm.calls WHERE status = 'ok' "
                       "AND model_identity = ? AND latency_s IS NOT NULL", [model_identity(name, m)])
        if rows and rows[0]["n"]:
            out[name] = (float(rows[0]["s"]), int(rows[0]["n"]))
    return out


def probe_latency(cfg: Config, wh: Warehouse, model: str, n: int = 3) -> float | None:
    """Median latency of `n` short calls through the ledger (recorded like any call; a rerun
    reuses their measured latency)."""
    from llm_calls import CallRequest, Ledger, ModelRegistry

    with ModelRegistry(cfg) as reg:
        ledger = Ledger(wh, reg)
        results = ledger.complete(model, [CallRequest([{"role": "user", "content": f"Reply with one word. ({i + 1})"}])
                                          for i in range(n)], purpose="plan.latency_probe")
    times = [r.latency_s for r in results if r.ok and r.latency_s is not None]
    return statistics.median(times) if times else None


@dataclass(frozen=True)
class Row:
    line: Line
    cached: int

    @property
    def new(self) -> int:
        return self.line.calls - self.cached


def with_cache(lines: Sequence[Line], stored: dict[tuple[str, str], int]) -> list[Row]:
    """Each line with the stored calls that may answer it; a purpose split over several lines
    (the same step counted exactly and as a bound) takes its stored calls in line order."""
    left = dict(stored)
    rows = []
    for ln in lines:
        purpose = ln.step.split(" (")[0]
        take = min(ln.calls, left.get((ln.model, purpose), 0))
        left[(ln.model, purpose)] = left.get((ln.model, purpose), 0) - take
        rows.append(Row(ln, take))
    return rows


def hours(new_calls: int, concurrency: int, latency_s: float) -> float:
    """Wall time of `new_calls` at `concurrency` calls in flight, each taking `latency_s`."""
    return math.ceil(new_calls / concurrency) * latency_s / 3600


def render(cfg: Config, rows: Sequence[Row], latency: dict[str, tuple[float, str]]) -> str:
    """The plan as text: a table of steps, then per family and model the totals and the time."""
    out = [f"Capacity plan for {cfg.source} (scale {cfg.scale}); counts assume every call is answered",
           "", f"{'family':<7} {'model':<14} {'step':<40} {'kind':<8} {'calls':>9} {'cached':>9} {'new':>9}  items from"]
    for r in rows:
        ln = r.line
        out.append(f"{ln.family:<7} {ln.model[:14]:<14} {ln.step[:40]:<40} {ln.kind:<8} {ln.calls:>9} "
                   f"{r.cached:>9} {r.new:>9}  {ln.source}")
    out += ["", f"{'family':<7} {'model':<14} {'calls (exact + at most)':>24} {'new':>9} {'conc':>5} "
                f"{'latency':>8}  time for the new calls"]
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0, 0.0])
    for r in rows:
        t = totals[(r.line.family, r.line.model)]
        t[0 if r.line.kind == EXACT else 1] += r.line.calls
        t[2] += r.new
        lat = latency.get(r.line.model)
        if lat is not None:  # each step is one batch after the previous: its own waves
            t[3] += hours(r.new, cfg.model(r.line.model).concurrency, lat[0])
    grand = 0.0
    for (family, model), (exact, bounded, new, h) in totals.items():
        conc = cfg.model(model).concurrency
        lat = latency.get(model)
        if lat is None:
            when = "unknown latency (give --latency)"
        else:
            grand += h
            when = f"{_duration(h)}  (latency {lat[1]})"
        out.append(f"{family:<7} {model[:14]:<14} {f'{exact:.0f} + {bounded:.0f}':>24} {new:>9.0f} {conc:>5} "
                   f"{(f'{lat[0]:.2f}s' if lat else '-'):>8}  {when}")
    out += ["", f"Total for the new calls, families one after another: at most {_duration(grand)} "
                "(the 'at most' steps included; a model's calls run at its concurrency)."]
    return "\n".join(out)


def _duration(h: float) -> str:
    s = h * 3600
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{h:.1f} h"
