"""Paper-scale MuSoBench build against a plain rejection-sampling generator, in one run.

Builds TimeTabling (10 levels x 100) and SubsetSum (7 levels x 100) with
complete solution sets, twice, on the same 2 worker processes:

- Benchsmith's generator (generators/muso.py): per-level seeded streams,
  counting with early stop at the bin's upper bound, parameters steered toward
  the bin by Thompson sampling; full enumeration only for accepted instances;
- the baseline, written here: draw parameters uniformly from the paper's
  ranges, enumerate every solution by backtracking (no early stop), keep the
  instance if its level still has room, repeat until every level is full. This
  is how the authors' generator works (REFERENCE-FACTS: it did not finish its
  1,000 TimeTabling instances in 40 minutes). The baseline is stopped at
  `--baseline-cap` seconds; if it has not finished, the printed ratio is a lower
  bound and the instances it built by then are shown.

    python benchmarks/muso_generation.py [--quota 100] [--baseline-cap 300]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import time
from concurrent.futures import ProcessPoolExecutor

from generators.muso import LevelBin, SubsetSumParams, TimetablingParams, generate_level, level_of
from solvers import subsetsum as ss
from solvers import timetabling as tt

TT_BINS = [LevelBin(1 + 50 * i, 50 * (i + 1)) for i in range(10)]
SS_BINS = [LevelBin(1 + 50 * i, 50 * (i + 1)) for i in range(6)] + [LevelBin(301, None)]
BINS = {"timetabling": TT_BINS, "subsetsum": SS_BINS}


def ours_level(args: tuple[str, int, int, int]) -> tuple[str, int, int, int]:
    task, level, quota, seed = args
    params = TimetablingParams() if task == "timetabling" else SubsetSumParams()
    out = generate_level(task, BINS[task], level, quota, seed, params)
    return task, level, len(out), sum(i.solution_count for i in out)


def uniform_timetabling(rng: random.Random) -> tt.TimetablingProblem:
    p = TimetablingParams()
    n_times, n_rooms, n_teachers = rng.randint(*p.times), rng.randint(*p.rooms), rng.randint(*p.teachers)
    courses = []
    for _ in range(rng.randint(*p.courses)):
        times = tuple(sorted(rng.sample(range(n_times), rng.randint(2, min(4, n_times)))))
        if rng.random() < p.single_room_prob:
            rooms: tuple[int, ...] = (rng.randrange(n_rooms),)
        else:
            rooms = tuple(sorted(rng.sample(range(n_rooms), rng.randint(1, min(3, n_rooms)))))
        courses.append(tt.Course(times, rooms, rng.randrange(n_teachers)))
    return tt.TimetablingProblem(tuple(courses), n_times, n_rooms, n_teachers)


def uniform_subsetsum(rng: random.Random) -> ss.SubsetSumProblem:
    while True:
        n = rng.randint(10, 15)
        lo, hi = rng.randint(1, 25), rng.randint(26, 50)
        if hi - lo + 1 >= n:  # enough distinct integers in range
            break
    values = tuple(rng.sample(range(lo, hi + 1), n))
    return ss.SubsetSumProblem(values, sum(rng.sample(values, rng.randint(1, n))))


def baseline_task(task: str, quota: int, seed: int, filled: mp.Array) -> None:  # type: ignore[type-arg]
    """Rejection sampling with full enumeration; `filled[level-1]` is updated as levels fill."""
    rng = random.Random(seed)
    bins = BINS[task]
    counts = [0] * len(bins)
    while min(counts) < quota:
        if task == "timetabling":
            problem = uniform_timetabling(rng)
            n = len(tt.backtracking_solutions(problem))
        else:
            problem = uniform_subsetsum(rng)
            n = len(ss.backtracking_solutions(problem))
        level = level_of(n, bins)
        if level is not None and counts[level - 1] < quota:
            counts[level - 1] += 1
            filled[level - 1] = counts[level - 1]


def run_baseline(quota: int, seed: int, cap: float) -> tuple[float, dict[str, list[int]], bool]:
    ctx = mp.get_context("spawn")
    arrays = {task: ctx.Array("i", len(BINS[task])) for task in BINS}
    procs = {task: ctx.Process(target=baseline_task, args=(task, quota, seed, arrays[task])) for task in BINS}
    t0 = time.perf_counter()
    for p in procs.values():
        p.start()
    deadline = t0 + cap
    for p in procs.values():
        p.join(max(0.0, deadline - time.perf_counter()))
    elapsed = time.perf_counter() - t0
    finished = all(p.exitcode == 0 for p in procs.values())
    for p in procs.values():
        if p.is_alive():
            p.kill()
            p.join()
    return elapsed, {task: list(a[:]) for task, a in arrays.items()}, finished


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quota", type=int, default=100, help="instances per level (paper: 100)")
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--baseline-cap", type=float, default=300.0, help="seconds before the baseline is stopped")
    args = parser.parse_args()
    jobs = [(task, level, args.quota, args.seed) for task in BINS for level in range(1, len(BINS[task]) + 1)]
    total = args.quota * len(jobs)

    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.workers, mp_context=mp.get_context("spawn")) as pool:
        results = list(pool.map(ours_level, jobs))
    ours = time.perf_counter() - t0
    built = sum(r[2] for r in results)
    solutions = sum(r[3] for r in results)
    print(f"Benchsmith generator: {built} instances ({solutions} solutions enumerated), "
          f"{args.workers} processes: {ours:.1f} s")

    base, filled, finished = run_baseline(args.quota, args.seed, args.baseline_cap)
    base_built = sum(min(n, args.quota) for counts in filled.values() for n in counts)
    print(f"rejection-sampling baseline: {base_built} of {total} instances in {base:.1f} s"
          + ("" if finished else f" (stopped at the {args.baseline_cap:.0f} s cap)"))
    for task, counts in filled.items():
        print(f"  {task:<12} per level: {counts}")
    relation = "=" if finished else ">="
    print(f"\nratio baseline / Benchsmith: {relation} {base / ours:.1f}x   (paper-scale build {ours:.1f} s; target < 120 s, >= 5x)")


if __name__ == "__main__":
    main()
