"""Both enumerators of each MuSoBench task equal a brute-force enumeration of the full assignment space."""

import itertools
import random

import pytest

from solvers.subsetsum import SubsetSumProblem, dp_count
from solvers.subsetsum import backtracking_solutions as ss_bt
from solvers.subsetsum import cpsat_solutions as ss_cp
from solvers.timetabling import (
    Course,
    TimetablingProblem,
    backtracking_count,
)
from solvers.timetabling import (
    backtracking_solutions as tt_bt,
)
from solvers.timetabling import (
    cpsat_solutions as tt_cp,
)


def random_timetabling(rng: random.Random) -> TimetablingProblem:
    n_times, n_rooms, n_teachers = rng.randint(2, 4), rng.randint(1, 3), rng.randint(1, 3)
    courses = tuple(
        Course(tuple(sorted(rng.sample(range(n_times), rng.randint(1, n_times)))),
               tuple(sorted(rng.sample(range(n_rooms), rng.randint(1, n_rooms)))),
               rng.randrange(n_teachers))
        for _ in range(rng.randint(1, 4))
    )
    return TimetablingProblem(courses, n_times, n_rooms, n_teachers)


def brute_force_timetabling(p: TimetablingProblem) -> set:
    """Every element of the product of allowed (time, room) options, filtered by the constraints."""
    out = set()
    for combo in itertools.product(*[[(t, r) for t in c.times for r in c.rooms] for c in p.courses]):
        slots_clash = len(set(combo)) < len(combo)
        teacher_times = [(c.teacher, tr[0]) for c, tr in zip(p.courses, combo)]
        if not slots_clash and len(set(teacher_times)) == len(teacher_times):
            out.add(combo)
    return out


def brute_force_subsetsum(p: SubsetSumProblem) -> set:
    return {tuple(sorted(s)) for k in range(1, len(p.values) + 1)
            for s in itertools.combinations(p.values, k) if sum(s) == p.target}


@pytest.mark.parametrize("seed", range(300))
def test_timetabling_enumerators_equal_brute_force(seed):
    p = random_timetabling(random.Random(seed))
    truth = brute_force_timetabling(p)
    bt, cp = tt_bt(p), tt_cp(p)
    assert len(bt) == len(set(bt)) and len(cp) == len(set(cp))  # no solution twice
    assert set(bt) == truth and set(cp) == truth
    assert backtracking_count(p, limit=10_000) == len(truth)


@pytest.mark.parametrize("seed", range(300))
def test_subsetsum_enumerators_equal_brute_force(seed):
    rng = random.Random(seed)
    values = tuple(rng.sample(range(1, 30), rng.randint(1, 10)))
    target = rng.randint(1, sum(values) + 3)  # sometimes unreachable
    p = SubsetSumProblem(values, target)
    truth = brute_force_subsetsum(p)
    assert set(ss_bt(p)) == truth and len(ss_bt(p)) == len(truth)
    assert set(ss_cp(p)) == truth and len(ss_cp(p)) == len(truth)
    assert dp_count(p) == len(truth)


def test_early_stop_returns_limit_plus_one():
    p = TimetablingProblem(tuple(Course((0, 1, 2), (0, 1, 2), i) for i in range(4)), 3, 3, 4)
    full = len(tt_bt(p))
    assert full > 100
    assert backtracking_count(p, limit=50) == 51
    assert len(tt_bt(p, limit=50)) == 51 and len(tt_cp(p, limit=50)) == 51
    s = SubsetSumProblem(tuple(range(1, 16)), 40)
    assert len(ss_bt(s, limit=10)) == 11 and len(ss_cp(s, limit=10)) == 11


def test_problem_json_round_trip():
    p = random_timetabling(random.Random(7))
    assert TimetablingProblem.from_json(p.to_json()) == p
    s = SubsetSumProblem((5, 3, 9), 12)
    assert SubsetSumProblem.from_json(s.to_json()) == s
