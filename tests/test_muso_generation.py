"""MuSoBench generation: levels, reproducibility, stable levels when bins are added, verified solution sets."""

import pytest

from generators.muso import (
    GenerationError,
    LevelBin,
    SubsetSumParams,
    TimetablingParams,
    generate_level,
    level_of,
    question,
    reference_answer,
    solution_json,
    solution_text,
)
from solvers import subsetsum as ss
from solvers import timetabling as tt
from validators.muso_check import subset_violations, timetable_violations

TT_BINS = [LevelBin(1 + 50 * i, 50 * (i + 1)) for i in range(10)]
SS_BINS = [LevelBin(1 + 50 * i, 50 * (i + 1)) for i in range(6)] + [LevelBin(301, None)]


def snapshot(instances):
    return [(i.instance_id, i.problem, i.solutions, i.seed, i.candidate_index) for i in instances]


def test_level_edges_are_inclusive():
    assert level_of(1, TT_BINS) == 1
    assert level_of(50, TT_BINS) == 1
    assert level_of(51, TT_BINS) == 2
    assert level_of(500, TT_BINS) == 10
    assert level_of(501, TT_BINS) is None
    assert level_of(0, TT_BINS) is None


def test_open_last_subsetsum_bin_takes_every_larger_count():
    assert level_of(300, SS_BINS) == 6
    assert level_of(301, SS_BINS) == 7
    assert level_of(10_000, SS_BINS) == 7
    assert SS_BINS[-1].label == "301+"


@pytest.mark.parametrize("task,bins,params", [("timetabling", TT_BINS, TimetablingParams()),
                                              ("subsetsum", SS_BINS, SubsetSumParams())])
def test_same_seed_same_instances_other_seed_other_instances(task, bins, params):
    a = generate_level(task, bins, 3, 4, seed=11, params=params)
    b = generate_level(task, bins, 3, 4, seed=11, params=params)
    c = generate_level(task, bins, 3, 4, seed=12, params=params)
    assert snapshot(a) == snapshot(b)
    assert [i.problem for i in a] != [i.problem for i in c]


def test_adding_a_bin_leaves_existing_levels_unchanged():
    params = TimetablingParams()
    before = generate_level("timetabling", [LevelBin(1, 50), LevelBin(51, 100)], 2, 3, seed=5, params=params)
    # a bin added at the end, and one split in front: the 51-100 level is drawn identically
    appended = generate_level("timetabling", [LevelBin(1, 50), LevelBin(51, 100), LevelBin(101, 150)], 2, 3,
                              seed=5, params=params)
    split = generate_level("timetabling", [LevelBin(1, 25), LevelBin(26, 50), LevelBin(51, 100)], 3, 3,
                           seed=5, params=params)
    assert snapshot(before) == snapshot(appended) == snapshot(split)
    assert split[0].level == 3 and before[0].level == 2  # the position changes, the instances do not


@pytest.mark.parametrize("level", range(1, 11))
def test_every_timetabling_level_fills_with_counts_in_bin_and_verified_solutions(level):
    out = generate_level("timetabling", TT_BINS, level, 2, seed=3, params=TimetablingParams())
    assert len(out) == 2
    for inst in out:
        assert TT_BINS[level - 1].contains(inst.solution_count)
        assert set(inst.solutions) == set(tt.cpsat_solutions(inst.problem))
        problem = inst.problem.to_json()
        assert all(timetable_violations(problem, solution_json("timetabling", s)) == [] for s in inst.solutions)
        p = TimetablingParams()
        assert p.courses[0] <= len(inst.problem.courses) <= p.courses[1]
        assert all(2 <= len(c.times) <= 4 and 1 <= len(c.rooms) <= 3 for c in inst.problem.courses)


@pytest.mark.parametrize("level", range(1, 8))
def test_every_subsetsum_level_fills_with_counts_in_bin_and_verified_solutions(level):
    out = generate_level("subsetsum", SS_BINS, level, 2, seed=3, params=SubsetSumParams())
    for inst in out:
        assert SS_BINS[level - 1].contains(inst.solution_count)
        assert set(inst.solutions) == set(ss.cpsat_solutions(inst.problem))
        assert all(subset_violations(inst.problem.to_json(), s) == [] for s in inst.solutions)
        values = inst.problem.values
        assert 10 <= len(values) <= 15 and len(set(values)) == len(values)
        assert 1 <= min(values) and max(values) <= 50


@pytest.mark.parametrize(("task", "bins", "params"), [("timetabling", TT_BINS, TimetablingParams()),
                                                      ("subsetsum", SS_BINS, SubsetSumParams())])
def test_the_stored_solution_text_is_the_json_of_the_solution(task, bins, params):
    """`solution_text` writes the JSON by hand (for speed); it must be `json.dumps`'s text exactly,
    which the evaluation parses back and compares."""
    import json

    solutions = [s for level in (1, 3) for inst in generate_level(task, bins, level, 2, seed=4, params=params)
                 for s in inst.solutions]
    assert len(solutions) > 100
    assert [solution_text(task, s) for s in solutions] == [json.dumps(solution_json(task, s)) for s in solutions]
    assert solution_text("subsetsum", (-7, 0, 12)) == "[-7, 0, 12]"


def test_unfillable_level_fails_naming_the_level():
    with pytest.raises(GenerationError, match=r"timetabling level 1 \(90000-90001 solutions\): only 0 of 1"):
        generate_level("timetabling", [LevelBin(90000, 90001)], 1, 1, seed=1, params=TimetablingParams(),
                       max_candidates=200)


def test_question_and_answer_follow_the_paper_format():
    inst = generate_level("timetabling", TT_BINS, 1, 1, seed=2, params=TimetablingParams())[0]
    q = question(inst)
    assert q.startswith("Constraints:\n- Course0 : Time [")
    assert "], Teacher [" in q
    assert q.endswith("- Multiple courses cannot be scheduled in the same time slot and room.\n"
                      "- A teacher can only teach one course at a time.")
    ans = reference_answer(inst)
    assert ans.count("Solution ") == inst.solution_count
    assert "| Course | Time | Room | Teacher |" in ans and ans.endswith(
        f"Total {inst.solution_count} feasible solutions shown above.")
    s = generate_level("subsetsum", SS_BINS, 1, 1, seed=2, params=SubsetSumParams())[0]
    assert question(s).startswith("Given the set of unique integers: {")
    assert f"Find all subsets that sum exactly to the target: {s.problem.target}" in question(s)
    assert reference_answer(s).startswith("[")


def test_a_stored_level_s_checks_catch_a_miscounted_instance_and_a_missing_solution():
    """generators.muso.level_checks reads a level as stored: a solution count that disagrees with
    the stored solutions breaks `counts_in_bin`; a stored set CP-SAT enumerates differently breaks
    `enumerators_agree`; both name the instance."""
    from collections import Counter

    from generators.muso import level_checks, level_rows

    b = LevelBin(1, 50)
    instances = generate_level("subsetsum", [b], 1, 2, seed=4, params=SubsetSumParams())
    inst, sols = level_rows("subsetsum_1-50", "subsetsum", 1, b, instances, config_seed=4)
    ok = {c.name: c for c in level_checks("subsetsum", b, 2, 10, inst, Counter(s["instance_id"] for s in sols), sols, [])}
    assert all(c.passed for c in ok.values()) and ok["enumerators_agree"].metadata["checked_with_cpsat"] == 2
    first = inst[0]["instance_id"]
    dropped = [s for s in sols if not (s["instance_id"] == first and s["solution_index"] == 0)]
    bad = {c.name: c for c in level_checks("subsetsum", b, 3, 10, inst, Counter(s["instance_id"] for s in dropped),
                                           dropped, [["a", "b"]])}
    assert bad["counts_in_bin"].metadata["violations"] == [first]
    assert bad["enumerators_agree"].metadata["disagree"] == [first]
    assert not bad["quota_met"].passed and not bad["no_duplicate_instances"].passed


def test_a_solution_row_that_breaks_the_constraints_stops_the_build_naming_it():
    """`check_solution_rows` re-checks the rows about to be stored, from their texts: a solution
    changed after the enumerators found it, or one of no instance, stops the build by name."""
    import json

    from generators.muso import check_solution_rows, level_rows

    b = LevelBin(1, 50)
    instances = generate_level("timetabling", [b], 1, 2, seed=4, params=TimetablingParams())
    inst, sols = level_rows("timetabling_1-50", "timetabling", 1, b, instances, config_seed=4)
    check_solution_rows(inst, sols)  # as enumerated: no violation
    broken = json.loads(sols[3]["solution"])
    broken[1] = broken[0]  # course 1 in course 0's time and room
    tampered = [*sols[:3], {**sols[3], "solution": json.dumps(broken)}, *sols[4:]]
    with pytest.raises(RuntimeError, match=rf"{sols[3]['instance_id']} solution {sols[3]['solution_index']} breaks"):
        check_solution_rows(inst, tampered)
    with pytest.raises(RuntimeError, match="tt-x-000 solution 0: no such instance"):
        check_solution_rows(inst, [*sols, {**sols[0], "instance_id": "tt-x-000", "solution_index": 0}])
