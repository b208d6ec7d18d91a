"""Running an OR-Tools CP-SAT all-solutions search: the part both CP-SAT enumerators share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

S = TypeVar("S")


def enumerate_all(model: Any, read: Callable[[Any], S], limit: int | None) -> list[S]:
    """Every solution of `model`, each turned into a value by `read(callback)`; with `limit`,
    the search stops after `limit + 1` solutions. Raises if CP-SAT does not finish."""
    from ortools.sat.python import cp_model

    class Collector(cp_model.CpSolverSolutionCallback):
        def __init__(self) -> None:
            super().__init__()
            self.solutions: list[S] = []

        def on_solution_callback(self) -> None:
            self.solutions.append(read(self))
            if limit is not None and len(self.solutions) > limit:
                self.stop_search()

    solver = cp_model.CpSolver()
    solver.parameters.enumerate_all_solutions = True
    solver.parameters.num_workers = 1  # all-solutions search is single-threaded
    collector = Collector()
    status = solver.solve(model, collector)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.INFEASIBLE):
        raise RuntimeError(f"CP-SAT did not finish the enumeration: {solver.status_name(status)}")
    return collector.solutions
