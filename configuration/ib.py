"""Instruction Boundary's section of the configuration (`ib:`): datasets, settings (paper 003)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from configuration.base import PerScale, Section, SourceSpec, Strict, datasets_beside


class IBSource(SourceSpec):
    kind: Literal["fld", "folio", "scienceqa", "mmlu", "mmlu_pro", "commonsenseqa", "truthfulqa", "multirc"]
    topics: list[str] | None = None  # scienceqa topics


# Instruction Boundary's offline item generators (generators/ib.py) and the form each makes
IB_GENERATOR_FORMS = {"fld": "judging", "arithmetic": "single", "arithmetic10": "single", "even_numbers": "multiple"}
# its prompt settings (paper 003, section 3 and table 3; the default runs all, in this order)
IB_SETTINGS = ("vanilla", "multi_turn", "conformity", "conformity_tense", "disturbing_miscellany", "few_shot",
               "few_shot_tense", "few_shot_sparse", "missing_choices", "vagueness", "prompt_polishing")


class IBDataset(Strict):
    """One Instruction Boundary dataset: its form, and a source or an offline generator."""

    form: Literal["judging", "single", "multiple"]
    generator: Literal[tuple(IB_GENERATOR_FORMS)] | None = None
    source: IBSource | None = None
    count: PerScale  # base questions; each yields a complete and an insufficient item
    options: int = Field(4, ge=3, le=10, description=(
        "choice forms: options per question (the authors' released items have 4); wrong options sampled "
        "with the seed, questions with too few skipped and counted"))
    true_options: int = Field(2, ge=2, description=(
        "multiple choice: true answers per question (the authors' MultiRC items have 2 of 4)"))
    combined_option: bool = Field(False, description=(
        "multiple choice: for half the questions add an option combining the true answers (\"Options i and j "
        "are all true\") as a sparse label. Off by default: table 3's GR3 is accuracy over all 150 multi-select "
        "MultiRC items with no such option (its values are multiples of 1/150), as the authors' items are"))

    @model_validator(mode="after")
    def _generator_or_source(self) -> IBDataset:
        if (self.generator is None) == (self.source is None):
            raise ValueError("expected exactly one of `generator` or `source`")
        made = IB_GENERATOR_FORMS.get(self.generator or "")
        if self.generator is not None and made != self.form:
            raise ValueError(f"generator {self.generator} makes {made} items, not {self.form}")
        if self.form == "multiple" and self.true_options >= self.options:
            raise ValueError(f"true_options ({self.true_options}) must be fewer than options ({self.options}): "
                             "an item needs a wrong option")
        return self


MISCELLANY = "miscellany"  # the partition of the disturbing-miscellany items (ten-option questions)


class IBConfig(Section):
    """Instruction Boundary (paper 003): datasets per form, the miscellany set, settings, budgets."""

    datasets: dict[str, IBDataset] = Field(default_factory=lambda: {
        "fld": IBDataset(form="judging", generator="fld", count=PerScale(demo=2, paper=600)),
        "arithmetic": IBDataset(form="single", generator="arithmetic", count=PerScale(demo=2, paper=300)),
        "even_numbers": IBDataset(form="multiple", generator="even_numbers", count=PerScale(demo=2, paper=150)),
    })
    miscellany: IBDataset = Field(
        default_factory=lambda: IBDataset(form="single", generator="arithmetic10", count=PerScale(demo=1, paper=300)),
        description="ten-option questions for disturbing miscellany (MMLU-Pro in the paper)")
    settings: list[Literal[IB_SETTINGS]] = Field(default_factory=lambda: list(IB_SETTINGS))
    polisher: str | None = Field(None, description="model that rewrites prompts (default: the judge)")
    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: PerScale = PerScale(demo=48, paper=1024)

    def referenced_models(self) -> list[tuple[str, str, str]]:
        return [("polisher", self.polisher, "models")] if self.polisher is not None else []

    def item_partitions(self, scale: str) -> list[str]:
        """One partition per dataset, in the configured order, then the miscellany's."""
        return [*self.datasets, MISCELLANY]

    @classmethod
    def paths_beside(cls, section: dict[str, Any], base: Path) -> dict[str, Any]:
        return datasets_beside(section, base)
