"""S1-Bench's section of the configuration (`s1:`): construction roles, budgets, sampling (paper 002)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from configuration.base import PerScale, Section


class S1Config(Section):
    """S1-Bench (paper 002): construction roles and budgets, and the evaluation's sampling."""

    release: str | None = Field(None, description=(
        "a released S1-Bench file (the authors' S1-Bench.json: 422 items) whose items are evaluated beside the "
        "built ones; relative to this file"))
    build: bool = Field(True, description="run the construction loop (false: evaluate only `release`)")
    subcategories: list[str] | None = Field(None, description="registry names at paper scale; null = all 28")
    demo_subcategories: list[str] = Field(default_factory=lambda: ["scientific notation", "creative authorship"])
    languages: list[Literal["en", "zh"]] = Field(default_factory=lambda: ["en", "zh"])
    candidates_per_subcategory: PerScale = PerScale(demo=1, paper=50)
    programmatic: bool = True
    generators: list[str] = Field(default_factory=list, description="LLM generators (the paper uses two)")
    discriminators: list[str] = Field(default_factory=list, description="LLM quality discriminators")
    validators: list[str] | None = Field(None, description="small validator LLMs; null = the judge model")
    reducer: str | None = Field(None, description="model for difficulty reduction (default: the judge)")
    temperatures: list[float] = Field(default_factory=lambda: [0.0, 0.2, 0.4])
    samples_per_temperature: int = Field(10, ge=1)
    max_rounds: PerScale = PerScale(demo=1, paper=3)
    dedup_threshold: float = Field(0.9, gt=0, le=1)
    # Token budgets per step, sized to the task at paper scale: 50 bilingual pairs in one generation
    # call; a discriminator's analysis before its verdict line; validators' answers (paper table 2:
    # 38-114 tokens on average); the paper's 10,000-token evaluation budget.
    generation_max_tokens: PerScale = PerScale(demo=1024, paper=8192)
    discrimination_max_tokens: PerScale = PerScale(demo=512, paper=2048)
    validator_max_tokens: PerScale = PerScale(demo=48, paper=512)
    reduction_max_tokens: PerScale = PerScale(demo=256, paper=1024)
    k: int = Field(5, ge=1)
    table2_models: list[str] = Field(default_factory=list, description=(
        "evaluated models also sampled `samples_per_temperature` times at each of `temperatures` on the final "
        "items (paper 002, table 2: the small LLMs' acc@10 at t = 0, 0.2, 0.4, and their tokens)"))
    eval_temperature: float = 0.6
    eval_top_p: float = 0.95
    eval_max_tokens: PerScale = PerScale(demo=128, paper=10000)

    @model_validator(mode="after")
    def _something_to_evaluate(self) -> S1Config:
        if not self.build and not self.release:
            raise ValueError("build: false needs a `release` file to evaluate")
        return self

    @field_validator("generation_max_tokens", "discrimination_max_tokens", "validator_max_tokens",
                     "reduction_max_tokens", "eval_max_tokens", mode="before")
    @classmethod
    def _one_budget_for_both_scales(cls, value: Any) -> Any:
        return {"demo": value, "paper": value} if isinstance(value, int) else value

    def referenced_models(self) -> list[tuple[str, str, str]]:
        refs = [(f"{role}.{i}", name, "models") for role in ("generators", "discriminators", "validators")
                for i, name in enumerate(getattr(self, role) or [])]
        refs += [("reducer", self.reducer, "models")] if self.reducer is not None else []
        return refs + [(f"table2_models.{i}", name, "evaluate") for i, name in enumerate(self.table2_models)]

    @classmethod
    def paths_beside(cls, section: dict[str, Any], base: Path) -> dict[str, Any]:
        release = section.get("release")
        if isinstance(release, str) and not Path(release).is_absolute():
            return {**section, "release": str(base / release)}
        return section
