"""WakenLLM's section of the configuration (`waken:`): datasets, the protocol's settings (paper 000)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from configuration.base import PerScale, Section, SourceSpec, Strict, datasets_beside


class FLDGenerator(Strict):
    depth: tuple[int, int] = (1, 3)
    max_distractors: int = Field(4, ge=0, le=20)


class WakenDataset(Strict):
    """One WakenLLM dataset: FLD-style (generated offline or from a source), FOLIO, or ScienceQA topics."""

    kind: Literal["fld", "folio", "scienceqa"]
    topics: list[str] | None = Field(None, description="scienceqa: e.g. [physics, biology] for Science")
    # Fact-based datasets get the detailed stimulation, story-based ones the concise one (section 4.1).
    # null = by kind, as paper 000 sorts them: FLD and FOLIO are fact-based (section 2 lists both under
    # "Fact-based Datasets"; appendix C's 43.66 % fact-based = FLD 21.13 % + FOLIO 22.53 %, i.e. Figure 2's
    # (600 + 640) / 2,840), ScienceQA's topics story-based. Section 5's "story-based datasets like FOLIO"
    # (appendix I) contradicts both and is not followed.
    form: Literal["fact", "story"] | None = None
    generator: FLDGenerator | None = None
    source: SourceSpec | None = None
    count: PerScale  # items in all, half solvable and half Unknown
    lecture: bool = Field(False, description=(
        "scienceqa: the row's lecture follows its hint or passage as supporting text. An Unknown draft still "
        "cuts the item's own context (hint or passage), never only the lecture: a lecture is background on the "
        "skill, and an item with it cut is answerable as shown; the solution is never shown"))

    @property
    def context_form(self) -> Literal["fact", "story"]:
        """The dataset's form: the configured one, else by kind (see `form`)."""
        return self.form or ("story" if self.kind == "scienceqa" else "fact")

    @model_validator(mode="after")
    def _generator_or_source(self) -> WakenDataset:
        if (self.generator is None) == (self.source is None):
            raise ValueError("expected exactly one of `generator` (fld only) or `source`")
        if self.generator is not None and self.kind != "fld":
            raise ValueError("only kind `fld` has an offline generator; give a `source`")
        if (self.kind == "scienceqa") != (self.topics is not None):
            raise ValueError("`topics` is required for kind `scienceqa` and only allowed there")
        if self.lecture and self.kind != "scienceqa":
            raise ValueError("`lecture` is for kind `scienceqa` only")
        return self


# WakenLLM's prompt baselines (paper 000, table 6), in the table's order; the default runs all
WAKEN_BASELINES = ("cot", "few_shot", "tree_of_thought", "plan_and_solve", "self_reflection")


class WakenConfig(Section):
    """WakenLLM (paper 000): datasets, the protocol's settings and budgets."""

    datasets: dict[str, WakenDataset] = Field(default_factory=lambda: {
        "fld": WakenDataset(kind="fld", generator=FLDGenerator(), count=PerScale(demo=10, paper=600)),
    })
    temperature: float = Field(0.5, ge=0, le=2)
    ablation_temperature: float = Field(1.0, ge=0, le=2)
    misguiding_rates: list[float] = Field(default_factory=lambda: [1.0, 2 / 3, 0.5, 0.0])
    baselines: list[Literal[WAKEN_BASELINES]] = Field(default_factory=lambda: list(WAKEN_BASELINES))
    max_tokens: PerScale = PerScale(demo=96, paper=2048)
    style_swap: bool = Field(False, description=(
        "paper 000, section 5.4 and table 4: stage 1 also asked with the other stimulation style (concise for "
        "fact-based datasets, detailed for story-based ones) on the same Vague Perception items (waken.table4)"))
    rtg_rounds: int = Field(2, ge=2, le=20, description=(
        "T of paper 000's algorithm 3: stage 1 re-run with the previous round's reasoning shown, for rounds "
        "t = 2..T, each round's reasoning reminding the next (TCR^(t) per round); 2 = one round"))

    def item_partitions(self, scale: str) -> list[str]:
        """One partition per dataset, in the configured order."""
        return list(self.datasets)

    @classmethod
    def paths_beside(cls, section: dict[str, Any], base: Path) -> dict[str, Any]:
        return datasets_beside(section, base)
