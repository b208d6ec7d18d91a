"""SubsetSum (MuSoBench, paper appendix A.1): the problem type, exact counting and two enumerators.

A solution is a non-empty subset of the given unique positive integers whose sum
is the target, written as a sorted tuple.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from solvers.cpsat import enumerate_all

Solution = tuple[int, ...]


@dataclass(frozen=True)
class SubsetSumProblem:
    values: tuple[int, ...]  # unique positive integers, in presentation order
    target: int

    def to_json(self) -> dict[str, Any]:
        return {"values": list(self.values), "target": self.target}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SubsetSumProblem:
        return cls(tuple(int(v) for v in data["values"]), int(data["target"]))


def dp_count(problem: SubsetSumProblem) -> int:
    """Exact number of subsets summing to the target (dynamic programme over sums)."""
    target = problem.target
    ways = [0] * (target + 1)
    ways[0] = 1
    for v in problem.values:
        for s in range(target, v - 1, -1):
            ways[s] += ways[s - v]
    return ways[target] if target > 0 else 0


def backtracking_solutions(problem: SubsetSumProblem, limit: int | None = None) -> list[Solution]:
    """All subsets by include/exclude search over values in descending order, pruned by the
    remaining sum; with `limit`, stops after `limit + 1` solutions."""
    values = sorted(problem.values, reverse=True)
    suffix = [0] * (len(values) + 1)
    for i in range(len(values) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + values[i]
    cap = None if limit is None else limit + 1
    found: list[Solution] = []
    picked: list[int] = []

    def visit(i: int, remaining: int) -> bool:
        if remaining == 0:
            if picked:
                found.append(tuple(sorted(picked)))
                return cap is not None and len(found) >= cap
            return False
        if i == len(values) or suffix[i] < remaining:
            return False
        if values[i] <= remaining:
            picked.append(values[i])
            stop = visit(i + 1, remaining - values[i])
            picked.pop()
            if stop:
                return True
        return visit(i + 1, remaining)

    visit(0, problem.target)
    return found


def cpsat_solutions(problem: SubsetSumProblem, limit: int | None = None) -> list[Solution]:
    """All subsets by OR-Tools CP-SAT: one Boolean per value, a linear equality, at least one chosen."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    xs = [model.new_bool_var(f"x{i}") for i in range(len(problem.values))]
    model.add(sum(v * x for v, x in zip(problem.values, xs)) == problem.target)
    model.add_bool_or(xs)

    return enumerate_all(
        model, lambda cb: tuple(sorted(v for v, x in zip(problem.values, xs) if cb.boolean_value(x))), limit
    )
