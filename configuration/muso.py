"""MuSoBench's section of the configuration (`muso:`): tasks, bins, paradigms, budgets (paper 001)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from configuration.base import PerScale, Section, Strict

TASKS = ("timetabling", "subsetsum")  # the order the levels are listed and shown in


def bin_label(lo: int, hi: int | None) -> str:
    """A bin of solution counts in words: `1-50`, or `301+` for the open last one."""
    return f"{lo}+" if hi is None else f"{lo}-{hi}"


def level_key(task: str, lo: int, hi: int | None) -> str:
    """A level's partition key: its task and its bin (`timetabling_1-50`, `subsetsum_301+`)."""
    return f"{task}_{bin_label(lo, hi)}"


def build_order(keys: list[str]) -> list[str]:
    """The order a run builds the levels `keys` (partition keys, each task's in its bins' order):
    the tasks interleaved by each level's place in its task, the i-th of n at i / n, ties in
    `TASKS` order (TimeTabling 1-50, SubsetSum 1-50, TimeTabling 51-100, SubsetSum 51-100, ...).

    A run generates its levels ahead, in a worker process, while its steps store them
    (`runner.command.built_ahead`). A large TimeTabling level costs the worker more than
    its step costs (the 451-500 level: 2.9 s of generation and rows, against about 2 s to validate,
    write, check and record it); a SubsetSum level less (0.1-1 s against 0.6-0.8 s). Alternating them
    keeps both busy; in the configuration's order the run ended on seven SubsetSum steps queued
    behind a finished worker (benchmarks/muso_build.py, 2026-12-04: the build 1.32-1.36 x the
    generation in that order, 1.27-1.34 x interleaved, two runs each way and two trials)."""
    places: dict[str, list[str]] = {}
    for key in keys:
        places.setdefault(key.split("_", 1)[0], []).append(key)
    rank = {task: i for i, task in enumerate(TASKS)}
    return [key for _, _, key in sorted(
        ((i + 1) / len(levels), rank.get(task, len(rank)), key)
        for task, levels in places.items() for i, key in enumerate(levels))]


def _default_bins(n: int, width: int, open_last: bool) -> list[tuple[int, int | None]]:
    bins: list[tuple[int, int | None]] = [(1 + width * i, width * (i + 1)) for i in range(n)]
    if open_last:
        bins[-1] = (bins[-1][0], None)
    return bins


class _MusoTask(Strict):
    bins: list[tuple[int, int | None]]

    @model_validator(mode="after")
    def _bins_ordered(self) -> _MusoTask:
        if not self.bins:
            raise ValueError("expected at least one bin [lo, hi]")
        prev_hi = 0
        for i, (lo, hi) in enumerate(self.bins):
            if lo < 1 or (hi is not None and hi < lo):
                raise ValueError(f"bin {i} [{lo}, {hi}]: expected 1 <= lo <= hi")
            if lo <= prev_hi:
                raise ValueError(f"bin {i} [{lo}, {hi}]: overlaps or precedes the bin before it")
            if hi is None and i != len(self.bins) - 1:
                raise ValueError(f"bin {i} [{lo}, null]: only the last bin may be open")
            prev_hi = hi if hi is not None else lo
        return self


class MusoTimetabling(_MusoTask):
    """TimeTabling generator ranges (paper appendix A.1; REFERENCE-FACTS)."""

    bins: list[tuple[int, int]] = Field(default_factory=lambda: _default_bins(10, 50, False))
    courses: tuple[int, int] = (3, 7)
    times: tuple[int, int] = (3, 10)
    rooms: tuple[int, int] = (2, 10)
    teachers: tuple[int, int] = (2, 5)
    times_per_course: tuple[int, int] = (2, 4)
    rooms_per_course: tuple[int, int] = (1, 3)
    single_room_prob: float = Field(0.1, ge=0, le=1)


class MusoSubsetSum(_MusoTask):
    """SubsetSum generator ranges (paper appendix A.1; REFERENCE-FACTS)."""

    bins: list[tuple[int, int | None]] = Field(default_factory=lambda: _default_bins(7, 50, True))
    size: tuple[int, int] = (10, 15)
    min_value: tuple[int, int] = (1, 25)
    max_value: tuple[int, int] = (26, 50)


class MusoConfig(Section):
    """MuSoBench: generation quotas, the evaluation protocol and its budgets."""

    timetabling: MusoTimetabling = MusoTimetabling()
    subsetsum: MusoSubsetSum = MusoSubsetSum()
    quota: PerScale = PerScale(demo=1, paper=100)
    demo_levels: int | list[int] | None = Field(None, description=(
        "demo scale: the first N levels (bins) of each task, or a list of level numbers (from 1) built in each "
        "task that has them (e.g. [1, 2, 11]: the first two and an added eleventh bin); null = all"))
    cpsat_check_per_level: PerScale = Field(
        PerScale(demo=1000, paper=10), description="instances per level re-enumerated by CP-SAT in the asset check"
    )
    paradigms: list[Literal["short_cot", "long_cot"]] = Field(default_factory=lambda: ["short_cot"])
    model_paradigms: dict[str, list[Literal["short_cot", "long_cot"]]] = Field(default_factory=dict, description=(
        "per evaluated model, the paradigms it runs instead of `paradigms` (paper 001, section 3: Qwen3-8B "
        "non-thinking as Short-CoT, thinking as Long-CoT: two configured models, one paradigm each)"))

    def levels(self, scale: str) -> list[tuple[str, int, int, int | None]]:
        """(task, level number from 1, lo, hi) of each level built at `scale`: at demo scale only
        the levels `demo_levels` names (a level keeps its number whichever levels are built)."""
        return [(task, n, lo, hi) for task in TASKS for n, (lo, hi) in enumerate(getattr(self, task).bins, start=1)
                if self.builds(scale, n)]

    def builds(self, scale: str, n: int) -> bool:
        """Whether level `n` (from 1) of a task is built at `scale`."""
        chosen = self.demo_levels if scale == "demo" else None
        if chosen is None:
            return True
        return n <= chosen if isinstance(chosen, int) else n in chosen

    @field_validator("demo_levels")
    @classmethod
    def _positive(cls, v: int | list[int] | None) -> int | list[int] | None:
        if v is not None and any(n < 1 for n in ([v] if isinstance(v, int) else v)):
            raise ValueError("levels are numbered from 1")
        if isinstance(v, list) and not v:
            raise ValueError("an empty list builds no level; give level numbers, or null for all")
        return v

    def item_partitions(self, scale: str) -> list[str]:
        """One partition per level, the tasks in order."""
        return [level_key(task, lo, hi) for task, _, lo, hi in self.levels(scale)]

    def paradigms_for(self, model: str) -> list[str]:
        """The paradigms `model` is evaluated in."""
        return list(self.model_paradigms.get(model, self.paradigms))
    exploration: bool = Field(False, description="also run the exploration-cue variant (paper section 5)")
    reflection_checkpoints: list[int] = Field(default_factory=list, description=(
        "Long-CoT paused after these numbers of reflection steps, </think> inserted (paper section 5, figure 6a); "
        "needs an endpoint that continues an assistant message (vLLM); [] = off"))
    self_consistency: PerScale = Field(PerScale(demo=0, paper=0), description="parallel paths; 0 = off")
    temperature: float | list[float] = Field(
        0.2, description="decoding temperature, or a list for a temperature sweep (paper section 4.3)")
    solve_max_tokens: PerScale = PerScale(demo=128, paper=20480)
    # the paper gives every call 20,480 tokens: a reasoning model thinks before it states a number
    confidence_max_tokens: PerScale = PerScale(demo=16, paper=20480)

    @field_validator("reflection_checkpoints")
    @classmethod
    def _steps_counted(cls, value: list[int]) -> list[int]:
        if any(n < 0 for n in value) or len(set(value)) != len(value):
            raise ValueError(f"expected distinct numbers of reflection steps >= 0, got {value!r}")
        return value

    @property
    def temperatures(self) -> list[float]:
        return list(self.temperature) if isinstance(self.temperature, list) else [self.temperature]

    @model_validator(mode="after")
    def _temperatures_in_range(self) -> MusoConfig:
        bad = [t for t in self.temperatures if not 0 <= t <= 2]
        if bad or not self.temperatures:
            raise ValueError(f"temperature: expected values from 0 to 2, got {self.temperature!r}")
        return self

    def referenced_models(self) -> list[tuple[str, str, str]]:
        return [(f"model_paradigms.{name}", name, "models") for name in self.model_paradigms]
