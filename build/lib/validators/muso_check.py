"""Constraint checks of MuSoBench solutions, written apart from both enumerators.

Works on the problems' JSON form (as stored in `muso.instances.parameters`) so
it shares no code with `solvers/`: a bug in an enumerator cannot hide here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def timetable_violations(problem: dict[str, Any], schedule: Sequence[Sequence[int]]) -> list[str]:
    """Why `schedule` ([time, room] per course) breaks the instance's constraints; [] if it is valid."""
    courses = problem["courses"]
    if len(schedule) != len(courses):
        return [f"schedule has {len(schedule)} courses, the instance {len(courses)}"]
    problems: list[str] = []
    rooms_taken: dict[tuple[int, int], int] = {}
    teacher_taken: dict[tuple[int, int], int] = {}
    for k, (cell, course) in enumerate(zip(schedule, courses)):
        time, room = int(cell[0]), int(cell[1])
        if time not in course["times"]:
            problems.append(f"Course{k}: time {time} not in allowed {course['times']}")
        if room not in course["rooms"]:
            problems.append(f"Course{k}: room {room} not in allowed {course['rooms']}")
        if (time, room) in rooms_taken:
            problems.append(f"Course{k} and Course{rooms_taken[time, room]} share time {time}, room {room}")
        rooms_taken.setdefault((time, room), k)
        who = (course["teacher"], time)
        if who in teacher_taken:
            problems.append(f"teacher {course['teacher']} teaches Course{teacher_taken[who]} and Course{k} at time {time}")
        teacher_taken.setdefault(who, k)
    return problems


def subset_violations(problem: dict[str, Any], subset: Sequence[int]) -> list[str]:
    """Why `subset` is not a solution of the SubsetSum instance; [] if it is."""
    values = set(problem["values"])
    out = []
    if not subset:
        out.append("empty subset")
    if len(set(subset)) != len(subset):
        out.append("repeated element")
    missing = [v for v in subset if v not in values]
    if missing:
        out.append(f"elements not in the set: {missing}")
    if sum(subset) != problem["target"]:
        out.append(f"sums to {sum(subset)}, target {problem['target']}")
    return out
