"""Partitions shared by the families: the evaluated models are a partition dimension.

Items are built once per dataset (or level); the model-calling evaluation assets are partitioned
by (dataset, model), so adding a model to `evaluate` adds only that model's slices: the UI shows
them missing, and materialising them leaves every other model's rows alone. A multi-partition
key reads `fld|smollm2` (dimensions in name order: `dataset|model`, `level|model`).
"""

from __future__ import annotations

import dagster as dg

from configuration import Config

MODEL = "model"


def models_partitions(cfg: Config) -> dg.StaticPartitionsDefinition:
    """One partition per evaluated model, in the configured order."""
    return dg.StaticPartitionsDefinition(list(cfg.evaluate))


def by_model(dimension: str, base: dg.StaticPartitionsDefinition, cfg: Config) -> dg.MultiPartitionsDefinition:
    """`base` (datasets or levels, named `dimension`) crossed with the evaluated models. An asset
    with this definition may depend on one partitioned by `base` alone: Dagster maps each
    (dataset, model) slice to its dataset."""
    return dg.MultiPartitionsDefinition({dimension: base, MODEL: models_partitions(cfg)})


def model_slice(context: dg.AssetExecutionContext, dimension: str) -> tuple[str, str]:
    """(dataset or level, model) of the partition a step runs."""
    keys = context.partition_key.keys_by_dimension  # type: ignore[attr-defined]
    return keys[dimension], keys[MODEL]
