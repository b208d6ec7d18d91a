"""MuSoBench instance generation (paper appendix A.1), seeded and stratified by solution count.

Each complexity level (a bin of solution counts, e.g. 51-100) is generated on
its own random stream, seeded by (seed, task, bin bounds). Adding a bin in the
configuration therefore leaves every existing level's instances unchanged, and
each level can be built as its own Dagster partition.

Two things keep generation fast where the authors' generator spent most of its
time on rejected instances (REFERENCE-FACTS: their TimeTabling build did not
finish in 40 minutes):

- counting with early stop: a candidate's solutions are counted only until the
  count passes the bin's upper bound (SubsetSum counts exactly by dynamic
  programming, which is cheaper still); complete enumeration runs only for
  accepted instances;
- steering: parameters are drawn from "arms" (for TimeTabling: number of
  courses, time slots and a room-pool size band; for SubsetSum: set size, value
  range bands and the size of the subset that makes the target) chosen by
  Thompson sampling on each arm's hit rate for this bin, so sampling drifts to
  the parameter region that yields this level's counts. The per-course ranges
  of the paper (2-4 times, 1-3 rooms, single-room probability 0.1) are kept.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from configuration import Config, MusoSubsetSum, MusoTimetabling, derived_seed
from configuration.muso import TASKS, bin_label, build_order, level_key
from generators.ahead import ItemsAhead
from solvers import subsetsum as ss
from solvers import timetabling as tt
from validators.checks import Check
from validators.muso_check import subset_violations, timetable_violations

GENERATOR_VERSION = "muso-1"
TASK_PREFIX = {"timetabling": "tt", "subsetsum": "ss"}


class GenerationError(RuntimeError):
    """A level could not be filled within the candidate budget."""


@dataclass(frozen=True)
class LevelBin:
    """Solution counts lo..hi inclusive; hi None = open (lo or more)."""

    lo: int
    hi: int | None

    @property
    def label(self) -> str:
        return bin_label(self.lo, self.hi)

    def contains(self, count: int) -> bool:
        return count >= self.lo and (self.hi is None or count <= self.hi)


def level_of(count: int, bins: Sequence[LevelBin]) -> int | None:
    """1-based level whose bin holds `count`, or None (0 solutions, or beyond the last bin)."""
    for i, b in enumerate(bins, start=1):
        if b.contains(count):
            return i
    return None


def partition_key(task: str, b: LevelBin) -> str:
    return level_key(task, b.lo, b.hi)


def level_seed(seed: int, task: str, b: LevelBin) -> int:
    return derived_seed(seed, task, b.label, GENERATOR_VERSION)


# The generator's parameter ranges are the configuration's sections (paper appendix A.1, as their
# defaults): one definition; `TimetablingParams()` is the paper's ranges.
TimetablingParams = MusoTimetabling
SubsetSumParams = MusoSubsetSum


@dataclass
class Instance:
    instance_id: str
    task: str
    level: int
    bin: LevelBin
    problem: tt.TimetablingProblem | ss.SubsetSumProblem
    solutions: list[Any]
    seed: int
    candidate_index: int
    arm: dict[str, Any] = field(default_factory=dict)

    @property
    def solution_count(self) -> int:
        return len(self.solutions)


# -- steering ---------------------------------------------------------------------


class ArmSampler:
    """Thompson sampling over parameter arms, rewarded when a candidate lands in the bin."""

    def __init__(self, n_arms: int, rng: random.Random):
        self.hits = [0] * n_arms
        self.tries = [0] * n_arms
        self.rng = rng

    def choose(self) -> int:
        draws = [self.rng.betavariate(1 + h, 1 + t - h) for h, t in zip(self.hits, self.tries)]
        return max(range(len(draws)), key=draws.__getitem__)

    def update(self, arm: int, hit: bool) -> None:
        self.tries[arm] += 1
        self.hits[arm] += hit


def _bands(lo: int, hi: int, n: int) -> list[tuple[int, int]]:
    """Split lo..hi into up to n contiguous bands."""
    n = max(1, min(n, hi - lo + 1))
    edges = [lo + round(i * (hi - lo + 1) / n) for i in range(n + 1)]
    return [(edges[i], edges[i + 1] - 1) for i in range(n)]


def timetabling_arms(p: TimetablingParams) -> list[dict[str, Any]]:
    return [
        {"courses": c, "times": t, "rooms_band": band}
        for c in range(p.courses[0], p.courses[1] + 1)
        for t in range(p.times[0], p.times[1] + 1)
        for band in _bands(p.rooms[0], p.rooms[1], 3)
    ]


def timetabling_candidate(rng: random.Random, p: TimetablingParams, arm: dict[str, Any]) -> tt.TimetablingProblem:
    n_times = arm["times"]
    n_rooms = rng.randint(*arm["rooms_band"])
    n_teachers = rng.randint(*p.teachers)
    courses = []
    for _ in range(arm["courses"]):
        k_t = rng.randint(p.times_per_course[0], min(p.times_per_course[1], n_times))
        times = tuple(sorted(rng.sample(range(n_times), k_t)))
        if rng.random() < p.single_room_prob:
            rooms: tuple[int, ...] = (rng.randrange(n_rooms),)
        else:
            k_r = rng.randint(p.rooms_per_course[0], min(p.rooms_per_course[1], n_rooms))
            rooms = tuple(sorted(rng.sample(range(n_rooms), k_r)))
        courses.append(tt.Course(times, rooms, rng.randrange(n_teachers)))
    return tt.TimetablingProblem(tuple(courses), n_times, n_rooms, n_teachers)


def subsetsum_arms(p: SubsetSumParams) -> list[dict[str, Any]]:
    return [
        {"size": n, "min_band": lo_band, "max_band": hi_band, "subset_band": sub}
        for n in range(p.size[0], p.size[1] + 1)
        for lo_band in _bands(*p.min_value, 3)
        for hi_band in _bands(*p.max_value, 3)
        for sub in ("small", "middle", "large")
    ]


def subsetsum_candidate(rng: random.Random, p: SubsetSumParams, arm: dict[str, Any]) -> ss.SubsetSumProblem | None:
    n = arm["size"]
    min_v, max_v = rng.randint(*arm["min_band"]), rng.randint(*arm["max_band"])
    if max_v - min_v + 1 < n:
        return None  # not enough distinct integers in range
    values = tuple(rng.sample(range(min_v, max_v + 1), n))
    third = max(1, n // 3)
    k_range = {"small": (1, third), "middle": (third + 1, n - third), "large": (n - third + 1, n)}[arm["subset_band"]]
    k = rng.randint(k_range[0], max(k_range))
    target = sum(rng.sample(values, k))
    return ss.SubsetSumProblem(values, target)


# -- per-level generation ---------------------------------------------------------


def generate_level(
    task: str,
    bins: Sequence[LevelBin],
    level: int,
    quota: int,
    seed: int,
    params: TimetablingParams | SubsetSumParams,
    max_candidates: int = 500_000,
) -> list[Instance]:
    """`quota` instances whose solution count lies in bin `level` (1-based), with complete solution sets."""
    b = bins[level - 1]
    lseed = level_seed(seed, task, b)
    rng = random.Random(lseed)
    if task == "timetabling":
        if b.hi is None:
            raise GenerationError("timetabling levels need an upper bound (counting stops there)")
        arms = timetabling_arms(params)  # type: ignore[arg-type]
        make: Callable[[random.Random, Any, dict[str, Any]], Any] = timetabling_candidate
        count = lambda prob: tt.backtracking_count(prob, limit=b.hi)  # noqa: E731
        enumerate_all = tt.backtracking_solutions
    elif task == "subsetsum":
        arms = subsetsum_arms(params)  # type: ignore[arg-type]
        make = subsetsum_candidate
        count = ss.dp_count
        enumerate_all = ss.backtracking_solutions
    else:
        raise ValueError(f"unknown MuSoBench task {task!r}; expected one of {TASKS}")

    sampler = ArmSampler(len(arms), rng)
    seen: set[Any] = set()
    out: list[Instance] = []
    for candidate in range(max_candidates):
        if len(out) >= quota:
            return out
        arm_i = sampler.choose()
        problem = make(rng, params, arms[arm_i])
        hit = problem is not None and b.contains(count(problem))
        sampler.update(arm_i, hit)
        if not hit or problem in seen:
            continue
        seen.add(problem)
        solutions = sorted(enumerate_all(problem))
        out.append(Instance(
            instance_id=f"{TASK_PREFIX[task]}-{b.label}-{len(out):03d}", task=task, level=level, bin=b,
            problem=problem, solutions=solutions, seed=lseed, candidate_index=candidate, arm=arms[arm_i],
        ))
    raise GenerationError(
        f"{task} level {level} ({b.label} solutions): only {len(out)} of {quota} instances after "
        f"{max_candidates} candidates; widen the parameter ranges or the bin"
    )


# -- text ---------------------------------------------------------------------------


def timetabling_question(p: tt.TimetablingProblem) -> str:
    """The paper's question layout (appendix A.1 example)."""
    def nums(xs: Sequence[int]) -> str:
        return ", ".join(map(str, xs))

    lines = ["Constraints:"]
    lines += [f"- Course{i} : Time [{nums(c.times)}], Room [{nums(c.rooms)}], Teacher [{c.teacher}]"
              for i, c in enumerate(p.courses)]
    lines += ["- Multiple courses cannot be scheduled in the same time slot and room.",
              "- A teacher can only teach one course at a time."]
    return "\n".join(lines)


def timetabling_answer(p: tt.TimetablingProblem, solutions: Sequence[tt.Solution]) -> str:
    blocks = []
    for k, sol in enumerate(solutions, start=1):
        rows = [f"| Course{i} | T{t} | R{r} | P{p.courses[i].teacher} |" for i, (t, r) in enumerate(sol)]
        blocks.append("\n".join([f"Solution {k}:", "| Course | Time | Room | Teacher |",
                                 "|---------|-------|-------|----------|", *rows]))
    blocks.append(f"Total {len(solutions)} feasible solutions shown above.")
    return "\n".join(blocks)


def subsetsum_question(p: ss.SubsetSumProblem) -> str:
    return (f"Given the set of unique integers: {{{', '.join(map(str, p.values))}}}\n"
            f"Find all subsets that sum exactly to the target: {p.target}")


def subsetsum_answer(solutions: Sequence[ss.Solution]) -> str:
    return ", ".join("[" + ", ".join(map(str, s)) + "]" for s in solutions)


def question(inst: Instance) -> str:
    if isinstance(inst.problem, tt.TimetablingProblem):
        return timetabling_question(inst.problem)
    return subsetsum_question(inst.problem)


def reference_answer(inst: Instance) -> str:
    if isinstance(inst.problem, tt.TimetablingProblem):
        return timetabling_answer(inst.problem, inst.solutions)
    return subsetsum_answer(inst.solutions)


def solution_json(task: str, solution: Any) -> list[Any]:
    """Canonical JSON of a solution: [[time, room], ...] per course, or the sorted subset."""
    return [list(x) for x in solution] if task == "timetabling" else list(solution)


def solution_text(task: str, solution: Any) -> str:
    """`json.dumps(solution_json(task, solution))` for the enumerators' integer solutions, written
    directly: at paper scale the 373,173 `json.dumps` calls and their lists took 1.5 s of the rows'
    3.2 s (tests/test_muso_generation.py holds the two texts equal)."""
    if task == "timetabling":
        return "[" + ", ".join([f"[{t}, {r}]" for t, r in solution]) + "]"
    return "[" + ", ".join(map(str, solution)) + "]"


# -- the configuration's levels ------------------------------------------------------------------

def task_bins(cfg: Config, task: str) -> list[LevelBin]:
    section = cfg.muso.timetabling if task == "timetabling" else cfg.muso.subsetsum
    return [LevelBin(lo, hi) for lo, hi in section.bins]


def task_params(cfg: Config, task: str) -> TimetablingParams | SubsetSumParams:
    """The configured generator ranges of `task`."""
    return cfg.muso.timetabling if task == "timetabling" else cfg.muso.subsetsum


def partitions(cfg: Config) -> dict[str, tuple[str, int, LevelBin]]:
    """Partition key -> (task, level, bin) of each level built at the configured scale
    (`MusoConfig.levels`)."""
    return {level_key(task, lo, hi): (task, level, LevelBin(lo, hi)) for task, level, lo, hi in cfg.muso.levels(cfg.scale)}


# -- the rows of a level, and its quality checks (the `muso_instances` asset stores and reports them) --

@dataclass(frozen=True)
class LevelJob:
    """Every input of one level's build: what `build_level` takes. A level built ahead
    (`generators.ahead`) is used only for a job equal to the step's own, every field compared."""

    partition_key: str
    task: str
    level: int
    bins: tuple[LevelBin, ...]
    quota: int
    seed: int
    params: TimetablingParams | SubsetSumParams


@dataclass
class BuiltLevel:
    """A level's `muso.instances` and `muso.solutions` rows, and the seconds its generation and its
    rows took."""

    instances: list[dict[str, Any]]
    solutions: list[dict[str, Any]]
    seconds: dict[str, float]


def level_job(cfg: Config, pk: str) -> LevelJob:
    """The build of level `pk` as the configuration sets it."""
    task, level, _ = partitions(cfg)[pk]
    return LevelJob(pk, task, level, tuple(task_bins(cfg, task)), cfg.muso.quota.at(cfg.scale), cfg.seed,
                    task_params(cfg, task))


def build_level(job: LevelJob) -> BuiltLevel:
    """Generate a level and make its rows (`generate_level`, `level_rows`): the build of one
    `muso_instances` partition up to the rows' validation and write, in this process or a worker
    (`generators.ahead`)."""
    t0 = time.perf_counter()
    instances = generate_level(job.task, list(job.bins), job.level, job.quota, job.seed, job.params)
    t1 = time.perf_counter()
    inst_rows, sol_rows = level_rows(job.partition_key, job.task, job.level, job.bins[job.level - 1], instances,
                                     job.seed)
    return BuiltLevel(inst_rows, sol_rows, {"generation": t1 - t0, "rows": time.perf_counter() - t1})


def level_rows(pk: str, task: str, level: int, b: LevelBin, instances: Sequence[Instance], config_seed: int
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(`muso.instances` rows, `muso.solutions` rows) of one level. The step that stores them first
    re-checks every solution in them (`check_solution_rows`)."""
    inst_rows, sol_rows = [], []
    for inst in instances:
        sol_rows += [{"partition_key": pk, "instance_id": inst.instance_id, "solution_index": k,
                      "solution": solution_text(task, sol)} for k, sol in enumerate(inst.solutions)]
        inst_rows.append({
            "partition_key": pk, "instance_id": inst.instance_id, "task": task, "level": level,
            "level_lo": b.lo, "level_hi": b.hi, "solution_count": inst.solution_count,
            "question": question(inst), "reference_answer": reference_answer(inst),
            "parameters": json.dumps({"problem": inst.problem.to_json(), "arm": inst.arm}),
            "config_seed": config_seed, "level_seed": inst.seed, "candidate_index": inst.candidate_index,
            "generator_version": GENERATOR_VERSION,
        })
    return inst_rows, sol_rows


def check_solution_rows(inst_rows: Sequence[Mapping[str, Any]], sol_rows: Sequence[Mapping[str, Any]]) -> None:
    """Every solution row re-checked against its instance's constraints by a validator independent
    of the enumerators (validators/muso_check.py), read from the texts about to be stored (the
    problem in `parameters`, the solution's JSON); a violation, or a solution of no instance in
    `inst_rows`, stops the build, naming the instance and the solution: an instance with a wrong
    solution would be scored against it. Run by the step that stores them, built or read from a
    release."""
    problems = {r["instance_id"]: (r["task"], json.loads(r["parameters"])["problem"]) for r in inst_rows}
    for r in sol_rows:
        task, problem = problems.get(r["instance_id"], (None, None))
        if problem is None:
            raise RuntimeError(f"{r['instance_id']} solution {r['solution_index']}: no such instance in the level")
        sol = json.loads(r["solution"])
        bad = timetable_violations(problem, sol) if task == "timetabling" else subset_violations(problem, sol)
        if bad:
            raise RuntimeError(f"{r['instance_id']} solution {r['solution_index']} breaks the constraints: {bad}")


def cpsat_disagreements(task: str, instances: Sequence[Mapping[str, Any]],
                        stored: Mapping[str, Sequence[Any]]) -> list[str]:
    """Ids of the instances (rows with `instance_id` and `parameters`) whose CP-SAT enumeration,
    from their stored parameters, differs from their stored solutions."""
    disagree = []
    for r in instances:
        problem = json.loads(r["parameters"])["problem"]
        if task == "timetabling":
            cp = {tuple(map(tuple, map(list, s))) for s in tt.cpsat_solutions(tt.TimetablingProblem.from_json(problem))}
            mine = {tuple(tuple(x) for x in s) for s in stored.get(r["instance_id"], [])}
        else:
            cp = set(ss.cpsat_solutions(ss.SubsetSumProblem.from_json(problem)))
            mine = {tuple(s) for s in stored.get(r["instance_id"], [])}
        if cp != mine:
            disagree.append(r["instance_id"])
    return disagree


def level_checks(task: str, b: LevelBin, quota: int, cpsat_sample: int, instances: Sequence[Mapping[str, Any]],
                 counts: Mapping[str, int], sample_solutions: Sequence[Mapping[str, Any]],
                 duplicates: Sequence[Any]) -> list[Check]:
    """The quality gates of a stored level: its `instances` rows (id, solution_count, parameters,
    in id order), `counts` (instance id -> solutions the warehouse holds for it), the stored
    `sample_solutions` rows (id, solution JSON) of the first `cpsat_sample` instances, which CP-SAT
    enumerates again, and `duplicates` (the id groups of instances of the task sharing a problem or
    an id, found in the whole table). Only the sample's solutions are read back: at paper scale a
    level holds up to 50,000 solution rows, and the counts are one GROUP BY."""
    stored: dict[str, list] = {}
    for r in sample_solutions:
        stored.setdefault(r["instance_id"], []).append(json.loads(r["solution"]))
    outside = [r["instance_id"] for r in instances
               if not b.contains(r["solution_count"]) or r["solution_count"] != counts.get(r["instance_id"], 0)]
    sample = list(instances[:cpsat_sample])
    disagree = cpsat_disagreements(task, sample, stored)
    return [
        Check("quota_met", len(instances) == quota, {"instances": len(instances), "quota": quota}),
        Check("counts_in_bin", not outside, {"bin": b.label, "violations": outside}),
        Check("enumerators_agree", not disagree, {"checked_with_cpsat": len(sample), "disagree": disagree}),
        Check("no_duplicate_instances", not duplicates, {"duplicates": list(duplicates)}),
    ]


def left_out_at_demo(cfg: Config) -> list[str]:
    """The levels the demo scale does not build (beyond `muso.demo_levels`), a line per task."""
    built = {(task, b) for task, _, b in partitions(cfg).values()}
    out = []
    for task in TASKS:
        left = [b.label for b in task_bins(cfg, task) if (task, b) not in built]
        if left:
            out.append(f"MuSoBench {task}: levels {', '.join(left)} not built (muso.demo_levels: "
                       f"{cfg.muso.demo_levels}; scale: paper builds every level)")
    return out


# the levels the run command builds ahead, in a worker process (configuration/families.py: Parts.ahead)
AHEAD = ItemsAhead(build_order, level_job, build_level)
