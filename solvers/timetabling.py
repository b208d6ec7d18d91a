"""TimeTabling (MuSoBench, paper appendix A.1): the problem type and its two enumerators.

A schedule gives each course one (time, room) from its allowed times and rooms
such that no two courses share a (time, room) and no teacher teaches two
courses in one time slot. Teachers are fixed per course, so a solution is the
tuple of (time, room) pairs in course order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from solvers.cpsat import enumerate_all

Solution = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Course:
    times: tuple[int, ...]
    rooms: tuple[int, ...]
    teacher: int


@dataclass(frozen=True)
class TimetablingProblem:
    courses: tuple[Course, ...]
    n_times: int
    n_rooms: int
    n_teachers: int

    def to_json(self) -> dict[str, Any]:
        return {
            "n_times": self.n_times, "n_rooms": self.n_rooms, "n_teachers": self.n_teachers,
            "courses": [{"times": list(c.times), "rooms": list(c.rooms), "teacher": c.teacher} for c in self.courses],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TimetablingProblem:
        return cls(
            courses=tuple(Course(tuple(c["times"]), tuple(c["rooms"]), int(c["teacher"])) for c in data["courses"]),
            n_times=int(data["n_times"]), n_rooms=int(data["n_rooms"]), n_teachers=int(data["n_teachers"]),
        )


def backtracking_solutions(problem: TimetablingProblem, limit: int | None = None) -> list[Solution]:
    """All schedules by depth-first search (courses with fewest options first).

    With `limit`, stops after `limit + 1` solutions.
    """
    courses = problem.courses
    order = sorted(range(len(courses)), key=lambda i: len(courses[i].times) * len(courses[i].rooms))
    options = [[(t, r) for t in courses[i].times for r in courses[i].rooms] for i in order]
    teachers = [courses[i].teacher for i in order]
    n_rooms = problem.n_rooms
    cap = None if limit is None else limit + 1
    found: list[Solution] = []
    chosen: list[tuple[int, int]] = [(0, 0)] * len(order)
    used_slots = 0  # bit (t * n_rooms + r): that (time, room) is taken
    busy = [0] * (problem.n_teachers + 1)  # per teacher, bit t: teaching at time t

    def visit(depth: int) -> bool:
        nonlocal used_slots
        if depth == len(order):
            by_course = [(0, 0)] * len(order)
            for pos, course in enumerate(order):
                by_course[course] = chosen[pos]
            found.append(tuple(by_course))
            return cap is not None and len(found) >= cap
        teacher = teachers[depth]
        for t, r in options[depth]:
            slot = 1 << (t * n_rooms + r)
            if used_slots & slot or busy[teacher] >> t & 1:
                continue
            used_slots |= slot
            busy[teacher] |= 1 << t
            chosen[depth] = (t, r)
            stop = visit(depth + 1)
            used_slots &= ~slot
            busy[teacher] &= ~(1 << t)
            if stop:
                return True
        return False

    visit(0)
    return found


def backtracking_count(problem: TimetablingProblem, limit: int) -> int:
    """Number of schedules, or `limit + 1` as soon as it exceeds `limit` (early stop)."""
    courses = problem.courses
    order = sorted(range(len(courses)), key=lambda i: len(courses[i].times) * len(courses[i].rooms))
    options = [[(t, r, 1 << (t * problem.n_rooms + r), 1 << t) for t in courses[i].times for r in courses[i].rooms]
               for i in order]
    teachers = [courses[i].teacher for i in order]
    last = len(order) - 1
    busy = [0] * (problem.n_teachers + 1)
    cap = limit + 1

    def count(depth: int, used: int, total: int) -> int:
        teacher = teachers[depth]
        mask = busy[teacher]
        if depth == last:  # count the compatible options of the last course directly
            return total + sum(1 for _, _, slot, tbit in options[depth] if not (used & slot or mask & tbit))
        for _, _, slot, tbit in options[depth]:
            if used & slot or mask & tbit:
                continue
            busy[teacher] = mask | tbit
            total = count(depth + 1, used | slot, total)
            busy[teacher] = mask
            if total >= cap:
                return total
        return total

    return min(count(0, 0, 0), cap) if order else 1


def cpsat_solutions(problem: TimetablingProblem, limit: int | None = None) -> list[Solution]:
    """All schedules by OR-Tools CP-SAT all-solutions search (one Boolean per allowed
    (course, time, room)); with `limit`, stops after `limit + 1` solutions."""
    from ortools.sat.python import cp_model

    model = cp_model.CpModel()
    x: dict[tuple[int, int, int], Any] = {}
    for c, course in enumerate(problem.courses):
        for t in course.times:
            for r in course.rooms:
                x[c, t, r] = model.new_bool_var(f"x_{c}_{t}_{r}")
        model.add_exactly_one(x[c, t, r] for t in course.times for r in course.rooms)
    by_slot: dict[tuple[int, int], list[Any]] = {}
    by_teacher_time: dict[tuple[int, int], list[Any]] = {}
    for (c, t, r), var in x.items():
        by_slot.setdefault((t, r), []).append(var)
        by_teacher_time.setdefault((problem.courses[c].teacher, t), []).append(var)
    for group in (*by_slot.values(), *by_teacher_time.values()):
        if len(group) > 1:
            model.add_at_most_one(group)

    def read(cb: Any) -> Solution:
        sol = [(0, 0)] * len(problem.courses)
        for (c, t, r), var in x.items():
            if cb.boolean_value(var):
                sol[c] = (t, r)
        return tuple(sol)

    return enumerate_all(model, read, limit)
