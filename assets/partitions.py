"""Partitions shared by the families: the evaluated models are a partition dimension.

Items are built once per dataset (or level); the model-calling evaluation assets are partitioned
by (dataset, model), so adding a model to `evaluate` adds only that model's slices: the UI shows
them missing, and materialising them leaves every other model's rows alone. A multi-partition
key reads `fld|smollm2` (dimensions in name order: `dataset|model`, `level|model`).

The keys are the configuration's (`Config.item_partitions`, crossed with `evaluate` here): the
asset definitions and the run command's steps read them from this module. Dagster is imported
only where a definition is built, so that the command can plan its steps, and find them all up
to date, without importing it (runner/command.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from configuration import Config

if TYPE_CHECKING:
    import dagster as dg

MODEL = "model"


def slice_keys(cfg: Config, family: str) -> list[tuple[str, str | None, str]]:
    """(partition key, dataset or level, model) of each slice of a family's responses, in the
    order Dagster lists them (`by_model`: each dataset or level, each model in it); a family with
    one item set has a slice per model, keyed by the model."""
    bases = cfg.item_partitions(family)
    if bases is None:
        return [(model, None, model) for model in cfg.evaluate]
    return [(f"{base}|{model}", base, model) for base in bases for model in cfg.evaluate]


def items_partitions(cfg: Config, family: str) -> dg.StaticPartitionsDefinition | None:
    """A family's items, one partition per dataset or level (`Config.item_partitions`); None:
    one item set."""
    import dagster as dg

    keys = cfg.item_partitions(family)
    return None if keys is None else dg.StaticPartitionsDefinition(keys)


def models_partitions(cfg: Config) -> dg.StaticPartitionsDefinition:
    """One partition per evaluated model, in the configured order."""
    import dagster as dg

    return dg.StaticPartitionsDefinition(list(cfg.evaluate))


def by_model(dimension: str, base: dg.StaticPartitionsDefinition, cfg: Config) -> dg.MultiPartitionsDefinition:
    """`base` (datasets or levels, named `dimension`) crossed with the evaluated models. An asset
    with this definition may depend on one partitioned by `base` alone: Dagster maps each
    (dataset, model) slice to its dataset. Dagster orders a key's dimensions by name, so
    `dimension` must sort before "model" for the keys to read `base|model` as `slice_keys` makes them."""
    import dagster as dg

    if dimension >= MODEL:
        raise ValueError(f"partition dimension {dimension!r}: must sort before {MODEL!r} (keys read 'base|model')")
    return dg.MultiPartitionsDefinition({dimension: base, MODEL: models_partitions(cfg)})


def model_slice(context: dg.AssetExecutionContext, dimension: str) -> tuple[str, str]:
    """(dataset or level, model) of the partition a step runs."""
    keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
    return keys[dimension], keys[MODEL]
