"""The steps of the run command (`python -m assets.materialize_all`, `runner/command.py`), planned from
the configuration: each a run of one named job (`assets/jobs.py`) on one partition."""

from __future__ import annotations

from collections.abc import Sequence

from assets.jobs import FAMILIES, FIRST, LAST, Step, job_name, stage_assets
from assets.partitions import slice_keys
from configuration import Config


class SelectionError(ValueError):
    """A --select, --partition or --model value that names nothing in the configuration."""


def plan_steps(cfg: Config, families: Sequence[str] | None = None, partitions: Sequence[str] | None = None,
               models: Sequence[str] | None = None, materialized: dict[str, set[str]] | None = None) -> list[Step]:
    """The steps of a run, in order: the models probe; per family its items (each dataset or
    level), its responses (each slice), its metrics; the summary. The partitions are the
    configuration's (`assets.partitions`, as the asset definitions' are). `families`, `partitions`
    (a dataset, level or whole slice key) and `models` narrow it. With `models`, items already
    materialised (`materialized`: asset name -> partition keys) are not rebuilt: evaluating an
    added model runs only its slices, then the metrics and the summary."""
    unknown = sorted(set(families or ()) - set(FAMILIES))
    if unknown:
        raise SelectionError(f"--select {unknown[0]!r}: not a family; expected one of {sorted(FAMILIES)}")
    chosen = [f for f in FAMILIES if not families or f in families]
    steps: list[Step] = []
    matched_partitions: set[str] = set()
    all_models = set(cfg.evaluate)
    for family in chosen:
        items, responses, metrics = FAMILIES[family]
        item_keys = cfg.item_partitions(family)
        family_steps: list[Step] = []
        for stage, name, keys in (("items", items, [(k, k, None) for k in item_keys or [None]]),
                                  ("responses", responses, slice_keys(cfg, family))):
            for key, base, model in keys:
                if partitions and not ({base, key} & set(partitions)):
                    continue
                matched_partitions |= {base, key} & set(partitions or ())
                if models and model is not None and model not in models:
                    continue
                if models and stage == "items" and (key or "") in (materialized or {}).get(name, set()):
                    continue
                family_steps.append(Step(job_name(family, stage), family, (name,), key, base, model))
        if partitions and not family_steps:
            continue  # a family without the partitions asked for
        steps += family_steps
        steps.append(Step(job_name(family, "metrics"), family, stage_assets(family, "metrics"), None))
    missing = sorted(set(partitions or ()) - matched_partitions)
    for family in chosen:
        left = [k for k in missing if k in cfg.left_out_partitions(family)]
        if left:
            section = getattr(cfg, family)
            number = next(n for (_, n, _, _), key in zip(section.levels("paper"), section.item_partitions("paper"))
                          if key == left[0])
            wanted = sorted({*(n for _, n, _, _ in section.levels(cfg.scale)), number})
            raise SelectionError(
                f"--partition {left[0]!r}: a configured level the demo scale does not build ({family}.demo_levels: "
                f"{section.demo_levels}); build it at demo scale with {family}.demo_levels: {wanted} (level "
                f"{number} of its task), or run at scale: paper")
    if missing:
        raise SelectionError(f"--partition {missing[0]!r}: no such dataset, level or slice in "
                             f"{', '.join(chosen) or 'the selected families'}")
    absent = sorted(set(models or ()) - all_models)
    if absent:
        raise SelectionError(f"--model {absent[0]!r}: not an evaluated model; add it to `evaluate` in the "
                             f"configuration (evaluated: {', '.join(sorted(all_models))})")
    return [Step(FIRST[0], "", tuple(FIRST[1]), None), *steps, Step(LAST[0], "", tuple(LAST[1]), None)]
