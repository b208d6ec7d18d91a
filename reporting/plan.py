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

The time is a range between the exact steps alone and every bound reached; inside it, an expected
time where the ledger already holds calls of the same steps (`branch_rates`: each bounded step
as often per exact call as the stored runs took it, e.g. a demo run's).

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
from configuration.families import BY_KEY, Family
from configuration.families import FAMILIES as FAMILY_LIST
from evaluations.calls import AT_LEAST, AT_MOST, EXACT, Line, Query, protocol_of
from reporting.summary import stored_items
from warehouse import Warehouse

__all__ = ["AT_LEAST", "AT_MOST", "EXACT", "Line", "Rates", "branch_rates", "plan_lines"]


def _stored(wh: Warehouse | None, sql: str, params: Sequence[object] = ()) -> list[dict]:
    if wh is None or not wh.exists():
        return []
    return wh.rows(sql, list(params))


def query_of(wh: Warehouse | None) -> Query:
    """The warehouse as the protocols' `planned_calls` read it: SQL -> rows, none without a file."""
    return lambda sql: _stored(wh, sql)


# -- the calls: the models probe here, each family's from its protocol module ---------------------

def models_lines(cfg: Config) -> list[Line]:
    """The models asset: one probe call per configured model."""
    return [Line("llm", name, "models.probe", 1) for name in cfg.models]


def _family_lines(family: Family) -> Callable[[Config, Warehouse | None], list[Line]]:
    protocol = protocol_of(family)
    return lambda cfg, wh: protocol.planned_calls(cfg, query_of(wh))


# "llm" (the probe) first, then the families in the registry's order
FAMILIES: dict[str, Callable[[Config, Warehouse | None], list[Line]]] = {
    "llm": lambda cfg, wh: models_lines(cfg), **{f.key: _family_lines(f) for f in FAMILY_LIST}}


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
    return {(family, part or None) for family, parts in stored_items(wh).items() for part in parts}


# -- cache, latency, time ------------------------------------------------------------------------

def stored_calls(cfg: Config, wh: Warehouse | None, runs: set[str] | None = None) -> dict[tuple[str, str], int]:
    """Answered calls in the ledger per (model, purpose), for the configured models' identities;
    with `runs`, only the calls those Dagster runs made (see `selected_runs`)."""
    from llm_calls import model_identity

    if wh is None or not wh.exists():
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
    from llm_calls import model_identity

    if wh is None or not wh.exists():
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


MIN_CLIENT_CALLS = 50  # a command's CPU per call counts from this many calls on (fewer: its fixed costs)
CLIENT_RUNS = 10  # the latest commands the client's CPU per call is the median of


@dataclass(frozen=True)
class ClientCpu:
    """What the client's own work costs per call on this machine (`client_cpu`): the call loop's CPU
    seconds per call sent to a model (`new_s`) and per call answered from the cache (`cached_s`), each the
    median over the latest commands whose calls were mostly of that kind (the other's where a
    kind has none), how many commands that rests on (`basis`); and the share of one core the
    command can count on now (`share`, from `load` on `cores`)."""

    new_s: float
    cached_s: float
    basis: int
    load: float | None
    cores: int

    @property
    def share(self) -> float:
        """The share of one core for the command's interpreter (its Python work holds one lock, so
        one core is the most it uses): 1 on an idle machine, cores / (load + 1) where other work
        keeps the cores busy (two CPU-bound processes on 2 cores: 2/3)."""
        if self.load is None:
            return 1.0
        return min(1.0, self.cores / (self.load + 1.0))

    def seconds(self, cached: float, new: float) -> float:
        """Wall seconds the client's own work for `cached` and `new` calls takes at `share`."""
        return (cached * self.cached_s + new * self.new_s) / self.share


def client_cpu(wh: Warehouse | None, load: float | None, cores: int) -> ClientCpu | None:
    """The client's CPU per call from `runs.commands` (runner/command_records.py): each command's
    call loop's CPU (sending the calls, reading the replies) over its calls; None before any
    command with `MIN_CLIENT_CALLS` calls. Measured on the machine and the code that ran them: a
    warehouse copied from another machine carries that machine's figure."""
    rows = _stored(wh, "SELECT calls, new_calls, calls_cpu_s FROM runs.commands WHERE calls >= ? AND calls_cpu_s "
                       "IS NOT NULL ORDER BY finished_at DESC LIMIT ?", [MIN_CLIENT_CALLS, CLIENT_RUNS])
    if not rows:
        return None
    live = [r["calls_cpu_s"] / r["calls"] for r in rows if r["new_calls"] * 2 >= r["calls"]]
    cached = [r["calls_cpu_s"] / r["calls"] for r in rows if r["new_calls"] * 2 < r["calls"]]
    new_s = statistics.median(live or cached)
    return ClientCpu(new_s, statistics.median(cached or live), len(rows), load, cores)


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
        purpose = ln.purpose
        take = min(ln.calls, left.get((ln.model, purpose), 0))
        left[(ln.model, purpose)] = left.get((ln.model, purpose), 0) - take
        rows.append(Row(ln, take))
    return rows


@dataclass(frozen=True)
class Rates:
    """How often the stored runs took each bounded step: its stored calls per stored call of its
    family's exact steps (`per_exact`, by (family, step)), and how many exact calls that rests on
    (`basis`, by family)."""

    per_exact: dict[tuple[str, str], float]
    basis: dict[str, int]


def branch_rates(rows: Sequence[Row], stored: dict[tuple[str, str], int]) -> Rates:
    """The branch rates of earlier runs, to turn a plan's bounds into an expected count.

    A bounded step's calls depend on the model's replies (WakenLLM's stages run on the items
    answered Unknown, a judge reads the replies exact reading could not decide), so no count
    follows from the configuration alone. What the ledger already holds does say how often the
    branches were taken: a step's stored calls (`stored`, per (model, purpose), as
    `stored_calls` gives them) against the stored calls of its family's exact steps, the ones
    every item makes whatever the replies. An earlier run at demo scale, or of a part of the
    selection, gives the rates the full run will likely show. The rates pool the configured
    models (a judge's calls are counted against the evaluated models' answers they read), so a
    model with no stored run is expected to take the branches as often as the stored ones did;
    and they are of the stored items, so a dataset or model with other rates moves the estimate
    (the bounds still hold).

    A step counted both exactly and as a bound (later turns of a conversation) is rated whole:
    its expected calls are its stored calls per exact call, kept between its exact part and its
    bound (`expected_calls`). A family with no stored exact calls has no rates."""
    purposes: dict[str, dict[str, set[str]]] = defaultdict(lambda: {"exact": set(), "bounded": set()})
    for r in rows:
        purposes[r.line.family]["exact" if r.line.kind == EXACT else "bounded"].add(r.line.purpose)
    by_purpose: dict[str, int] = defaultdict(int)
    for (_, purpose), n in stored.items():
        by_purpose[purpose] += n
    per_exact, basis = {}, {}
    for family, kinds in purposes.items():
        exact_only = kinds["exact"] - kinds["bounded"]
        base = sum(by_purpose.get(p, 0) for p in exact_only)
        if not base or not kinds["bounded"]:
            continue
        basis[family] = base
        for p in kinds["bounded"]:
            per_exact[(family, p)] = by_purpose.get(p, 0) / base
    return Rates(per_exact, basis)


def expected_calls(rows: Sequence[Row], rates: Rates) -> list[float] | None:
    """Each row's expected calls at `rates`: an exact row's own count; a bounded step's share of
    (its rate x its family's planned exact calls), shared among its rows by their counts and kept
    within each row's bound (`at most`) or above its count (`at least`). None when a family with
    bounded steps has no rates."""
    exact: dict[str, int] = defaultdict(int)  # planned calls of each family's exact-only steps
    fixed: dict[tuple[str, str], int] = defaultdict(int)  # a purpose's exact part
    bounded: dict[tuple[str, str], int] = defaultdict(int)  # a purpose's bounded part
    for r in rows:
        key = (r.line.family, r.line.purpose)
        (fixed if r.line.kind == EXACT else bounded)[key] += r.line.calls
    for (family, purpose), n in fixed.items():
        if (family, purpose) not in bounded:
            exact[family] += n
    out: list[float] = []
    for r in rows:
        key = (r.line.family, r.line.purpose)
        if r.line.kind == EXACT:  # made in full, whatever the replies (a step rated whole too)
            out.append(float(r.line.calls))
            continue
        if key not in rates.per_exact:
            return None
        whole = rates.per_exact[key] * exact[r.line.family]  # the step's calls, both parts
        if r.line.kind == AT_MOST:
            out.append(min(float(r.line.calls), max(0.0, whole - fixed[key]) * r.line.calls / bounded[key]))
        else:  # at least
            out.append(max(float(r.line.calls), max(0.0, whole - fixed[key]) * r.line.calls / bounded[key]))
    return out


def hours(new_calls: int, concurrency: int, latency_s: float) -> float:
    """Wall time of `new_calls` at `concurrency` calls in flight, each taking `latency_s`."""
    return math.ceil(new_calls / concurrency) * latency_s / 3600


def flow_depth(family: str) -> int | None:
    """The longest chain of dependent calls one item's flow makes, for a family whose protocol
    runs as per-item flows (`llm_calls/flows.py`: its `Protocol.flow_depth`); None for one that
    runs its steps one batch after another."""
    if family == "llm":
        return None
    return protocol_of(BY_KEY[family]).flow_depth


def render(cfg: Config, rows: Sequence[Row], latency: dict[str, tuple[float, str]],
           steps: dict[tuple[str, str], tuple[float, int]] | None = None, overhead: str = "",
           rates: Rates | None = None, steps_s: float | None = None, client: ClientCpu | None = None) -> str:
    """The plan as text: a table of steps, then per family and model the calls and the time of
    the new ones, as a range: the exact steps alone (no reply takes a bounded branch) to every
    bound reached. With `rates` (`branch_rates`), the expected time inside that range: every
    bounded step at the rate the stored runs took it; with `steps_s`, the steps' own time
    (`overhead` says it) is added to that. A call takes the median latency of its step's stored
    calls when there are `MIN_STEP_CALLS`, else the model's.

    With `client` (`client_cpu`), the call loop's work for every call of the run, cached and new
    (sending, reading the replies), at the share of a core the machine's load leaves it: where
    that is longer than the calls' time, the client, not the endpoint, bounds the run, and the
    expected time is the client's. On 2 cores the call loop took 0.6-1.0 ms a call in IB's paper
    runs (design/performance.md): against 0.5 s calls at concurrency 64 (7.8 ms of endpoint time
    a call) an eighth to a thirteenth of the calls' time; against a GPU server answering in 5 ms
    at concurrency 256 (0.02 ms a call) the client bounds the run.

    How the time adds up follows how the command runs (`materialize_all`: every slice, of every
    family, starts once its items are built, all at once):
    - per-item flows (Instruction Boundary, WakenLLM): every step's calls share the model's
      concurrency at once, so a model's time is its calls' total latency over its concurrency
      in whole waves, and at most the tail of one item's chain of dependent calls after that
      (`Protocol.flow_depth` - 1 calls);
    - steps one after another within a slice (the others): each step is its own waves at the
      model's concurrency;
    - a family's models (its slices, the judge) work at the same time, so the family takes its
      slowest model's time; the families run at the same time too, so the run takes its slowest
      family's time, or, when more is asked of one model than that, the model's own: the latency
      of every call it is asked for, across the families, over its concurrency."""
    out = [f"Capacity plan for {cfg.source} (scale {cfg.scale}); counts assume every call is answered",
           "", f"{'family':<7} {'model':<14} {'step':<40} {'kind':<8} {'calls':>9} {'cached':>9} {'new':>9}  items from"]
    for r in rows:
        ln = r.line
        out.append(f"{ln.family:<7} {ln.model[:14]:<14} {ln.step[:40]:<40} {ln.kind:<8} {ln.calls:>9} "
                   f"{r.cached:>9} {r.new:>9}  {ln.source}")
    expected = expected_calls(rows, rates) if rates is not None else None
    out += ["", f"{'family':<7} {'model':<14} {'calls (exact + at most)':>24} {'new':>9} {'conc':>5} "
                f"{'latency':>8}  time for the new calls: exact steps only - every bound reached"
                + ("; expected" if expected else "")]
    # each scenario's new calls per row: no bounded branch taken, the stored runs' rates, every bound
    scenarios = [[r.new if r.line.kind == EXACT else 0 for r in rows],
                 [r.new if r.line.kind == EXACT or expected is None else max(0.0, expected[i] - r.cached)
                  for i, r in enumerate(rows)],
                 [r.new for r in rows]]
    totals, load = _hours(cfg, rows, latency, steps or {}, scenarios)
    lines, by_family, unknown = _model_lines(cfg, totals, latency, expected is not None)
    out += lines
    # no run ends before each of its models has made every call asked of it
    low, mid, high = (max([*(m[k] for m in load.values()), *(f[k] for f in by_family.values())], default=0.0)
                      for k in range(3))
    if unknown:
        out += ["", f"Total time unknown: no latency for {', '.join(sorted(set(unknown)))} (no stored calls and no "
                    "probe answered); give --latency SECONDS."]
    else:
        # the rates only where they gave an expected time (`expected_calls` finds no basis in some runs)
        out += _total_lines(rows, (low, mid, high), sum(scenarios[1]), client, rates if expected is not None else None,
                            steps_s)
    return "\n".join(out + ([overhead] if overhead else []))


def _hours(cfg: Config, rows: Sequence[Row], latency: dict[str, tuple[float, str]],
           steps: dict[tuple[str, str], tuple[float, int]], scenarios: list[list[float]]
           ) -> tuple[dict[tuple[str, str], list[float]], dict[str, list[float]]]:
    """Per (family, model): [exact calls, bounded calls, new calls, hours per scenario...]; per model,
    the hours of its new calls per scenario over its concurrency, across the families (`render`)."""
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0.0, 0.0])
    load: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for i, r in enumerate(rows):
        t = totals[(r.line.family, r.line.model)]
        t[0 if r.line.kind == EXACT else 1] += r.line.calls
        t[2] += r.new
        lat = latency.get(r.line.model)
        own = steps.get((r.line.model, r.line.purpose))
        seconds = own[0] if own and own[1] >= MIN_STEP_CALLS else (lat[0] if lat else None)
        if seconds is None:
            continue
        conc = cfg.model(r.line.model).concurrency
        for k, calls in enumerate(scenario[i] for scenario in scenarios):
            if flow_depth(r.line.family) is not None:  # the calls' latency, shared out over the concurrency
                t[3 + k] += calls * seconds / conc / 3600
            else:  # each step is one batch after the previous: its own waves
                t[3 + k] += hours(math.ceil(calls), conc, seconds)
            load[r.line.model][k] += calls * seconds / conc / 3600
    return totals, load


def _model_lines(cfg: Config, totals: dict[tuple[str, str], list[float]], latency: dict[str, tuple[float, str]],
                 expected: bool) -> tuple[list[str], dict[str, list[float]], list[str]]:
    """A line per family and model with the time of its new calls (`render`); the hours per family
    (its slowest model's) per scenario; the models whose latency is unknown."""
    out: list[str] = []
    by_family: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    unknown = []
    for (family, model), (exact, bounded, new, *h) in totals.items():
        conc = cfg.model(model).concurrency
        lat = latency.get(model)
        depth = flow_depth(family)
        if lat is None and new:
            unknown.append(model)
            when = "unknown latency (give --latency)"
        else:
            if depth is not None and new:  # whole waves; at most, the last item's chain after its first call
                h = [math.ceil(x * 3600 / lat[0] - 1e-9) * lat[0] / 3600 for x in h]
                h[2] += (depth - 1) * lat[0] / 3600
            f = by_family[family]
            by_family[family] = [max(a, b) for a, b in zip(f, h, strict=True)]
            when = (f"{_duration(h[0])} - {_duration(h[2])}" + (f"; {_duration(h[1])}" if expected else "")
                    + (f"  (latency {lat[1]})" if lat else ""))
        out.append(f"{family:<7} {model[:14]:<14} {f'{exact:.0f} + {bounded:.0f}':>24} {new:>9.0f} {conc:>5} "
                   f"{(f'{lat[0]:.2f}s' if lat else '-'):>8}  {when}")
    return out, by_family, unknown


def _total_lines(rows: Sequence[Row], hours_: tuple[float, float, float], calls: float, client: ClientCpu | None,
                 rates: Rates | None, steps_s: float | None) -> list[str]:
    """The plan's totals (`render`): the range of the new calls' time (`hours_`: exact steps only,
    expected, every bound), the client's own work, and the expected time for about `calls` new calls."""
    low, mid, high = hours_
    out = ["", f"Total for the new calls, families and slices at once: {_duration(low)} if no reply takes a "
               f"bounded branch, at most {_duration(high)} (a model's calls run at its concurrency, shared by "
               "every slice and family that asks it)."]
    if client is not None:
        lines, client_s = client_lines(client, sum(r.cached for r in rows), calls, mid)
        out += lines
        mid = max(mid, client_s / 3600)
    return out + _expected_lines(rows, rates, calls, mid, steps_s)


def _expected_lines(rows: Sequence[Row], rates: Rates | None, calls: float, mid: float,
                    steps_s: float | None) -> list[str]:
    """The plan's expected time: `mid` hours for about `calls` new calls, with the steps' own; `rates`
    None where there is no expected time (no stored run's rates)."""
    if rates is not None:
        with_steps = f"; with the steps below, about {_duration(mid + steps_s / 3600)}" if steps_s is not None else ""
        basis = ", ".join(f"{n} of {family}" for family, n in sorted(rates.basis.items()))
        return [f"Expected: {_duration(mid)} for about {calls:.0f} new calls, each bounded step at the rate the "
                f"stored runs took it (per exact call; {basis} stored exact calls){with_steps}."]
    if any(r.line.kind != EXACT and r.new for r in rows):
        return ["Expected: no estimate inside that range: no stored run of these steps shows how often the "
                "replies take the bounded branches (a run at demo scale first gives one)."]
    return []


def client_lines(client: ClientCpu, cached: int, new: float, calls_h: float) -> tuple[list[str], float]:
    """The plan's lines on the client's own work (see `render`) and its seconds: `cached` and
    `new`, the run's calls of each kind (new: expected); `calls_h`, the calls' expected hours at
    the endpoint."""
    cpu = cached * client.cached_s + new * client.new_s
    wall = client.seconds(cached, new)
    load = f"load {client.load:.1f} on {client.cores} cores" if client.load is not None else "load unknown"
    latest = "command" if client.basis == 1 else f"{client.basis} commands"
    out = [f"The client's own work: its call loop's {client.new_s * 1000:.2f} ms of CPU per new call, "
           f"{client.cached_s * 1000:.2f} per cached (sending, reading the replies; median of the latest {latest} in "
           f"this warehouse): {cpu:.0f} s "
           f"for these calls; at this machine's {load} the command gets about {client.share:.0%} of a core, so at "
           f"least {_duration(wall / 3600)}."]
    if wall > calls_h * 3600:
        out.append("The client, not the endpoint, bounds this run: the expected time below is the client's "
                   "(fewer calls out than the concurrency allows while it reads the replies).")
    elif wall > calls_h * 3600 / 2:
        out.append("The client's work is more than half the calls' time: expect the run below the endpoint's "
                   "bound (the client busy while replies wait).")
    return out, wall


def _duration(h: float) -> str:
    s = h * 3600
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{h:.1f} h"
