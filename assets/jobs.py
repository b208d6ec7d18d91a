"""The named jobs, and a step: one run of a job on one partition (the run command plans its steps in
`runner/steps.py`; every run, from anywhere, records its steps: `assets/step_records.py`).

A Dagster job holds assets of one partitions definition, so each family has three jobs:

- `build_<family>`: the items (per dataset or level; S1-Bench: one item set),
- `evaluate_<family>`: the evaluated models' answers, per (dataset, model) slice,
- `score_<family>`: the metrics and the paper's tables, over every stored slice, and the family's
  release folder (`<key>_release`, where the family has `releases/<key>.py`),

plus `probe_models` (the endpoint probe, run first) and `summarise` (the ledger summary and the
per-model reports, run last). Job names differ from asset names: Dagster keeps both in one namespace.
Every run of the command, the UI or a schedule is a run of one of these, so
each job's page in the UI lists its history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from configuration.families import BY_KEY

if TYPE_CHECKING:
    import dagster as dg

# family -> (items, responses, metrics) asset names, in the order the command runs the families
FAMILIES: dict[str, tuple[str, str, str]] = {key: family.assets for key, family in BY_KEY.items()}
# family -> its release asset, written by the family's score job beside its metrics
RELEASES: dict[str, str] = {key: family.release for key, family in BY_KEY.items() if family.release}
FIRST = ("probe_models", ["models"])
LAST = ("summarise", ["llm_call_summary", "model_report"])
STAGES = {"items": "build", "responses": "evaluate", "metrics": "score"}  # stage -> job name prefix


def job_name(family: str, stage: str) -> str:
    return f"{STAGES[stage]}_{family}"

_DESCRIPTIONS = {
    "items": "{family}: build the items, one run per {unit}.",
    "responses": "{family}: the evaluated models' answers, one run per {unit} x model slice.",
    "metrics": "{family}: metrics and the paper's tables over every stored slice{release}.",
}

def job_names() -> list[str]:
    return [FIRST[0], *(job_name(f, stage) for f in FAMILIES for stage in STAGES), LAST[0]]


def define_jobs() -> list[dg.UnresolvedAssetJobDefinition]:
    import dagster as dg  # only here: the command plans its steps without Dagster (assets.partitions)

    jobs = [dg.define_asset_job(FIRST[0], selection=dg.AssetSelection.assets(*FIRST[1]),
                                description="Probe every configured model's endpoint (run first by the command).")]
    for family in FAMILIES:
        name, unit = BY_KEY[family].title, BY_KEY[family].unit
        for stage in STAGES:
            selected = stage_assets(family, stage)
            release = ", and its release folder" if len(selected) > 1 else ""
            jobs.append(dg.define_asset_job(job_name(family, stage), selection=dg.AssetSelection.assets(*selected),
                                            description=_DESCRIPTIONS[stage].format(family=name, unit=unit,
                                                                                    release=release)))
    jobs.append(dg.define_asset_job(LAST[0], selection=dg.AssetSelection.assets(*LAST[1]),
                                    description="The call-ledger summary and the per-model HTML reports."))
    return jobs


def stage_assets(family: str, stage: str) -> tuple[str, ...]:
    """The assets of a family's stage job: its one asset; the metrics with the release beside them
    (written after every scoring, so a full run leaves no release asset unmaterialised)."""
    asset = dict(zip(STAGES, FAMILIES[family]))[stage]
    return (asset, RELEASES[family]) if stage == "metrics" and family in RELEASES else (asset,)


@dataclass(frozen=True)
class Step:
    job: str
    family: str  # a key of configuration/families.py; or '' for the models probe and the summary
    assets: tuple[str, ...]
    partition: str | None  # the Dagster partition key ('fld|smollm2' for a slice)
    base: str | None = None  # dataset or level of a partition
    model: str | None = None  # model of a slice

    @property
    def label(self) -> str:
        return ", ".join(self.assets) + (f" [{self.partition}]" if self.partition else "")


def stage_of(step: Step) -> str | None:
    """'items', 'responses' or 'metrics' for a family's step; None for the models probe and the summary."""
    return next((stage for stage in STAGES if step.family and step.job == job_name(step.family, stage)), None)


def reads(step: Step, other: Step) -> bool:
    """Whether `step` reads the tables `other` writes, from the asset graph: a slice reads its
    dataset's or level's items (a family with one item set: that item set), a family's metrics each
    of its items and slices, the summary and the reports every other step (the models probe too).
    The probe and the items read no step's tables."""
    stage = stage_of(step)
    if step.job == LAST[0]:
        return other.job != LAST[0]
    if stage == "metrics":
        return other.family == step.family and stage_of(other) in ("items", "responses")
    if stage == "responses":
        return other.family == step.family and stage_of(other) == "items" and other.base == step.base
    return False


def waits_for(steps: Sequence[Step]) -> list[frozenset[int]]:
    """For each of `steps` (as `plan_steps` orders them), the earlier steps it reads, by index; the
    command starts a step once those have ended (ok or not) and runs the rest at once. From the
    asset graph: a slice reads its dataset's or level's items (a family with one item set: that
    item set), a family's metrics read each of its items and slices, the summary and the reports
    read every other step (`reads`). Nothing else orders them: the probe reads
    nothing, one family's steps read nothing of another's, and a slice reads no other slice, so
    every slice of a run shares its models' concurrency instead of waiting for the slice before it."""
    return [frozenset(j for j in range(i) if reads(step, steps[j])) for i, step in enumerate(steps)]


def run_tags(step: Step, config) -> dict[str, str]:
    """What the Runs page filters by: the family (none for the probe, the summary and the reports,
    which serve every family), the partition, the models, the configuration (the command's runs, and
    the UI's through `runner.ui_runs`, which adds `benchsmith/job`)."""
    tags = {"benchsmith/config": config.source, "benchsmith/models": step.model or ",".join(config.evaluate)}
    if step.family:  # the probe, the summary and the reports belong to no one family: the job names them
        tags["benchsmith/family"] = step.family
    if step.partition:
        tags["benchsmith/partition"] = step.partition
    return tags


def step_of(assets: Sequence[str], partition: str | None, model: str | None = None) -> Step | None:
    """The step of the command whose job materialises `assets` (its whole selection, or the part
    the UI chose, e.g. the metrics without the release), or None."""
    wanted = set(assets)
    for family in FAMILIES:
        for stage in STAGES:
            job_assets = stage_assets(family, stage)
            if wanted and wanted <= set(job_assets):  # the job's assets, or some of them (the UI's choice)
                return Step(job_name(family, stage), family, tuple(a for a in job_assets if a in wanted), partition,
                            model=model)
    for job, names in (FIRST, LAST):
        if wanted and wanted <= set(names):
            return Step(job, "", tuple(sorted(wanted)), partition)
    return None
