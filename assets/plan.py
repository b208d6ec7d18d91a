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
    partition: str | None = None  # the dataset or level (None: the family's one item set, or none)
    for_model: str | None = None  # the evaluated model whose slice makes these calls (None: items, probe)


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
    for r in _stored(wh, "SELECT dataset, CASE WHEN variant LIKE 'miscellany%' THEN 'miscellany' ELSE variant END "
                         "AS variant, count(*) AS n FROM ib.items GROUP BY ALL"):
        stored[r["dataset"]][r["variant"]] = r["n"]
    out, source = {}, {}
    for name, spec in [*cfg.ib.datasets.items(), (MISCELLANY, cfg.ib.miscellany)]:
        n = spec.count.at(cfg.scale)  # base questions: a complete and an insufficient item each
        wanted = {"miscellany": 9 * n} if name == MISCELLANY else {"complete": n, "insufficient": n}
        out[name], source[name] = _stored_or_configured(stored.get(name), wanted, "complete", "miscellany")
    return Counts(out, source)


def _stored_or_configured(stored: dict[str, int] | None, wanted: dict[str, int], *compare: str
                          ) -> tuple[dict[str, int], str]:
    """The stored counts when they are the configured run's (the same count, in the columns
    `compare`), else the configured ones: items another scale or configuration built are not the
    items this run will ask."""
    if not stored:
        return dict(wanted), "configuration"
    if all(stored.get(c) == wanted[c] for c in compare if c in wanted):
        return dict(stored), "warehouse"
    held = ", ".join(f"{stored.get(c, 0)} {c}" for c in compare if c in wanted)
    return dict(wanted), f"configuration (warehouse holds {held}: another scale or configuration)"


def waken_counts(cfg: Config, wh: Warehouse | None) -> Counts:
    stored = {r["dataset"]: r for r in _stored(
        wh, "SELECT dataset, count(*) AS n, count(*) FILTER (WHERE label = 'Unknown') AS u FROM waken.items GROUP BY ALL")}
    out, source = {}, {}
    for name, spec in cfg.waken.datasets.items():
        n = spec.count.at(cfg.scale)
        held = {"items": stored[name]["n"], "unknown": stored[name]["u"]} if name in stored else None
        out[name], source[name] = _stored_or_configured(held, {"items": n, "unknown": n // 2, "drafts": n // 2},
                                                        "items")
        out[name]["scienceqa"] = int(spec.kind == "scienceqa")
    return Counts(out, source)


def muso_counts(cfg: Config, wh: Warehouse | None) -> Counts:
    from assets.muso import partitions

    stored = {r["partition_key"]: r["n"] for r in _stored(
        wh, "SELECT partition_key, count(*) AS n FROM muso.instances GROUP BY ALL")}
    quota = cfg.muso.quota.at(cfg.scale)
    out, source = {}, {}
    for pk in partitions(cfg):
        held = {"instances": stored[pk]} if pk in stored else None
        out[pk], source[pk] = _stored_or_configured(held, {"instances": quota}, "instances")
    return Counts(out, source)


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
                at = {"partition": name, "for_model": model}
                if setting == "multi_turn" and "ib.multi_turn.first" not in shared:
                    out.append(Line("ib", model, "ib.multi_turn.first", n, EXACT, src, **at))
                elif setting == "prompt_polishing":
                    out.append(Line("ib", polisher, "ib.prompt_polishing.rewrite", n, EXACT, src, **at))
                if f"ib.{setting}" not in shared:  # the second turn and the polished prompt come from replies
                    kind = AT_MOST if setting in ("multi_turn", "prompt_polishing") else EXACT
                    out.append(Line("ib", model, f"ib.{setting}", n, kind, src, **at))
                asked += n * (2 if setting == "multi_turn" else 1)
            out.append(Line("ib", cfg.judge, "ib.judge", asked, AT_MOST, src, name, model))
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
        if c["scienceqa"] and counts.source[name].startswith("configuration"):
            out.append(Line("waken", cfg.judge, "waken.unknown_verification", c["drafts"], AT_LEAST, src, name))
        for model in cfg.evaluate:
            # self-reflection's first turn is the direct request itself: the ledger answers it from there
            fixed = [("waken.direct", n)] + [(f"waken.baseline.{b}", n) for b in w.baselines if b != "self_reflection"]
            bounded = [("waken.baseline.self_reflection.reflect", n)] if "self_reflection" in w.baselines else []
            bounded += [("waken.diagnosis", u), ("waken.stage1.vanilla", n), ("waken.stage2.vanilla", n)]
            for rate in w.misguiding_rates:
                bounded += [(f"waken.rtg_label_stage1.M={rate:.3f}", n), (f"waken.rtg_label_stage2.M={rate:.3f}", n)]
            bounded += [("waken.rtg_rp_stage1.reasoning", n), ("waken.rtg_rp_stage2.reasoning", n),
                        (f"waken.ablation.T={w.ablation_temperature}", n)]
            out += [Line("waken", model, step, k, EXACT, src, name, model) for step, k in fixed]
            out += [Line("waken", model, step, k, AT_MOST, src, name, model) for step, k in bounded]
            out.append(Line("waken", cfg.judge, "waken.cause", n, AT_MOST, src, name, model))
            out.append(Line("waken", cfg.judge, "waken.judge", sum(k for _, k in fixed + bounded), AT_MOST, src,
                            name, model))
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
    per_step: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for pk, c in counts.by_partition.items():
        for model in cfg.evaluate:
            for variant in variants:
                conversations = c["instances"] * (paths if variant == "self_consistency" else 1)
                for turn in turns[variant]:
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
        out.append(Line("s1", model, "s1.evaluate", calls, kind, src, for_model=model))
        out.append(Line("s1", cfg.judge, "s1.evaluate.judge", 3 * calls, AT_MOST, src, for_model=model))
    return out


FAMILIES: dict[str, Callable[[Config, Warehouse | None], list[Line]]] = {
    "llm": lambda cfg, wh: models_lines(cfg),
    "muso": lambda cfg, wh: muso_lines(cfg, muso_counts(cfg, wh)),
    "waken": lambda cfg, wh: waken_lines(cfg, waken_counts(cfg, wh)),
    "ib": lambda cfg, wh: ib_lines(cfg, ib_counts(cfg, wh)),
    "s1": lambda cfg, wh: s1_lines(cfg, s1_counts(cfg, wh)),
}


def plan_lines(cfg: Config, wh: Warehouse | None, families: Sequence[str] | None = None,
               partitions: Sequence[str] | None = None, models: Sequence[str] | None = None) -> list[Line]:
    """Every step's calls, merged per (family, model, step, kind), for the run
    `materialize_all --select FAMILIES --partition PARTITIONS --model MODELS` would make: a
    partition is a dataset or level or one slice (`fld|m`); with `models`, only those models'
    slices, and the calls that build items only where the warehouse lacks them (as the run does)."""
    built = _built(wh)
    merged: dict[tuple[str, str, str, str], list] = {}
    for family, lines_of in FAMILIES.items():
        if families and family not in families:
            continue
        for ln in lines_of(cfg, wh):
            if ln.calls <= 0 or not _selected(ln, partitions, models, built):
                continue
            key = (ln.family, ln.model, ln.step, ln.kind)
            if key in merged:
                merged[key][0] += ln.calls
                merged[key][1].add(ln.source)
            else:
                merged[key] = [ln.calls, {ln.source}]
    return [Line(f, m, st, n, k, ", ".join(sorted(srcs))) for (f, m, st, k), (n, srcs) in merged.items()]


def _selected(ln: Line, partitions: Sequence[str] | None, models: Sequence[str] | None,
              built: set[tuple[str, str | None]]) -> bool:
    if ln.family == "llm":
        return True  # the probe runs first in every run
    if partitions:
        keys = {ln.partition, f"{ln.partition}|{ln.for_model}" if ln.for_model else None, ln.for_model} - {None}
        if not keys & set(partitions):
            return False
    if models:
        if ln.for_model is not None:
            return ln.for_model in models
        return (ln.family, ln.partition) not in built  # item building, skipped where items are stored
    return True


def _built(wh: Warehouse | None) -> set[tuple[str, str | None]]:
    """(family, partition) whose items the warehouse holds."""
    from assets.materialize_all import ITEMS

    out: set[tuple[str, str | None]] = set()
    for family, (table, column) in ITEMS.items():
        if column is None:
            if _stored(wh, f"SELECT 1 FROM {table} LIMIT 1"):
                out.add((family, None))
        else:
            out |= {(family, r["p"]) for r in _stored(wh, f"SELECT DISTINCT {column} AS p FROM {table}")}
    return out


# -- cache, latency, time ------------------------------------------------------------------------

def stored_calls(cfg: Config, wh: Warehouse | None, runs: set[str] | None = None) -> dict[tuple[str, str], int]:
    """Answered calls in the ledger per (model, purpose), for the configured models' identities;
    with `runs`, only the calls those Dagster runs made (see `selected_runs`)."""
    from llm_calls.endpoints import model_identity

    if wh is None or not wh.path.exists():
        return {}
    identities = {model_identity(name, m): name for name, m in cfg.models.items()}
    out: dict[tuple[str, str], int] = {}
    only = "" if runs is None else " AND run_id IN (SELECT unnest(?::VARCHAR[]))"
    for r in wh.rows("SELECT model_identity, purpose, count(*) AS n FROM llm.calls WHERE status = 'ok'"
                     f"{only} GROUP BY ALL", [] if runs is None else [sorted(runs)]):
        if r["model_identity"] in identities:
            out[(identities[r["model_identity"]], r["purpose"])] = r["n"]
    return out


def selected_runs(instance, partitions: Sequence[str] | None, models: Sequence[str] | None) -> set[str]:
    """The runs of the instance whose step a `--partition` / `--model` selection also runs (by
    the tags every step carries): the calls they made are the ones that selection may find cached.
    Calls of other partitions share a step's purpose but answer none of its requests."""
    out = set()
    for rec in instance.get_run_records(limit=100_000):
        tags = rec.dagster_run.tags
        if not tags.get("benchsmith/family"):
            continue
        part = tags.get("benchsmith/partition", "")
        if not part:  # the probe, the S1-Bench item set, the metrics and the summary: every run has them
            out.add(rec.dagster_run.run_id)
            continue
        keys = {part, part.split("|")[0]} - {""}
        model = part.split("|")[1] if "|" in part else None
        if partitions and not keys & set(partitions):
            continue
        if models and model not in models:
            continue
        out.add(rec.dagster_run.run_id)
    return out


def stored_latency(cfg: Config, wh: Warehouse | None
                   ) -> tuple[dict[str, tuple[float, int]], dict[tuple[str, str], tuple[float, int]]]:
    """Median latency of each configured model's answered calls and how many it is over, per model
    and per (model, purpose): a step's own replies (their length, their budget) say more about
    its time than the model's other calls."""
    both = _latencies(cfg, wh)
    return ({m: v for (m, purpose), v in both.items() if purpose is None},
            {(m, purpose): v for (m, purpose), v in both.items() if purpose is not None})


def _latencies(cfg: Config, wh: Warehouse | None) -> dict[tuple[str, str | None], tuple[float, int]]:
    from llm_calls.endpoints import model_identity

    if wh is None or not wh.path.exists():
        return {}
    names = {model_identity(name, m): name for name, m in cfg.models.items()}
    out: dict[tuple[str, str | None], tuple[float, int]] = {}
    for r in wh.rows("SELECT model_identity, purpose, median(latency_s) AS s, count(*) AS n FROM llm.calls "
                     "WHERE status = 'ok' AND latency_s IS NOT NULL AND purpose NOT LIKE 'plan.%' GROUP BY ALL"):
        if r["model_identity"] in names and r["n"]:
            out[(names[r["model_identity"]], r["purpose"])] = (float(r["s"]), int(r["n"]))
    for r in wh.rows("SELECT model_identity, median(latency_s) AS s, count(*) AS n FROM llm.calls "
                     "WHERE status = 'ok' AND latency_s IS NOT NULL GROUP BY ALL"):  # probes count for the model
        if r["model_identity"] in names and r["n"]:
            out[(names[r["model_identity"]], None)] = (float(r["s"]), int(r["n"]))
    return out


MIN_STEP_CALLS = 3  # a step's own median is used from this many stored calls on


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


def render(cfg: Config, rows: Sequence[Row], latency: dict[str, tuple[float, str]],
           steps: dict[tuple[str, str], tuple[float, int]] | None = None, overhead: str = "") -> str:
    """The plan as text: a table of steps, then per family and model the calls and the time of
    the new ones, as a range: the exact steps alone (no reply takes a bounded branch) to every
    bound reached. A step's time is its own waves at the model's concurrency, at the median
    latency of that step's stored calls when there are `MIN_STEP_CALLS`, else the model's."""
    steps = steps or {}
    out = [f"Capacity plan for {cfg.source} (scale {cfg.scale}); counts assume every call is answered",
           "", f"{'family':<7} {'model':<14} {'step':<40} {'kind':<8} {'calls':>9} {'cached':>9} {'new':>9}  items from"]
    for r in rows:
        ln = r.line
        out.append(f"{ln.family:<7} {ln.model[:14]:<14} {ln.step[:40]:<40} {ln.kind:<8} {ln.calls:>9} "
                   f"{r.cached:>9} {r.new:>9}  {ln.source}")
    out += ["", f"{'family':<7} {'model':<14} {'calls (exact + at most)':>24} {'new':>9} {'conc':>5} "
                f"{'latency':>8}  time for the new calls: exact steps only - every bound reached"]
    # (exact calls, bounded calls, new calls, hours of the new exact calls, hours of all new calls)
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0.0])
    for r in rows:
        t = totals[(r.line.family, r.line.model)]
        t[0 if r.line.kind == EXACT else 1] += r.line.calls
        t[2] += r.new
        lat = latency.get(r.line.model)
        own = steps.get((r.line.model, r.line.step.split(" (")[0]))
        seconds = own[0] if own and own[1] >= MIN_STEP_CALLS else (lat[0] if lat else None)
        if seconds is not None:  # each step is one batch after the previous: its own waves
            h = hours(r.new, cfg.model(r.line.model).concurrency, seconds)
            t[4] += h
            if r.line.kind == EXACT:
                t[3] += h
    low = high = 0.0
    unknown = []
    for (family, model), (exact, bounded, new, h_exact, h_all) in totals.items():
        conc = cfg.model(model).concurrency
        lat = latency.get(model)
        if lat is None and new:
            unknown.append(model)
            when = "unknown latency (give --latency)"
        else:
            low, high = low + h_exact, high + h_all
            when = f"{_duration(h_exact)} - {_duration(h_all)}" + (f"  (latency {lat[1]})" if lat else "")
        out.append(f"{family:<7} {model[:14]:<14} {f'{exact:.0f} + {bounded:.0f}':>24} {new:>9.0f} {conc:>5} "
                   f"{(f'{lat[0]:.2f}s' if lat else '-'):>8}  {when}")
    if unknown:
        out += ["", f"Total time unknown: no latency for {', '.join(sorted(set(unknown)))} (no stored calls and no "
                    "probe answered); give --latency SECONDS."]
    else:
        out += ["", f"Total for the new calls, families one after another: {_duration(low)} if no reply takes a "
                    f"bounded branch, at most {_duration(high)} (a model's calls run at its concurrency)."]
    if overhead:
        out.append(overhead)
    return "\n".join(out)


def _duration(h: float) -> str:
    s = h * 3600
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    return f"{h:.1f} h"
