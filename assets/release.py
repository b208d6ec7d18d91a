"""The release assets: each family's built items written as a release folder (releases/), and the
items assets' way of reading a release back instead of building (`release.load`)."""

from collections.abc import Iterator
from typing import Any

import dagster as dg

import releases
from assets.resources import SettingsResource, WarehouseResource
from configuration import Config
from configuration.families import Family
from releases import s1 as s1_release


def release_asset(family: Family) -> dg.AssetsDefinition:
    """`<key>_release`: the family's stored items as a release folder (Parquet per configuration,
    dataset card, Croissant), written by the family's score job beside its metrics (so by every
    `materialize_all` run that scores the family), or alone from the UI or `python -m releases`.

    A release the project refuses to write (a source whose licence is unknown or forbids it, no
    items stored) is no failure of the run that scored the family: the step logs why and the asset
    stays unmaterialised, as `python -m releases` would say it."""

    @dg.asset(name=f"{family.key}_release", group_name=family.key, deps=[dg.AssetKey(family.items)],
              kinds={"parquet"}, output_required=False,
              description=f"{family.title}'s items as a release folder others load with `datasets` (releases/); "
                          "written with the metrics.")
    def _release(context: dg.AssetExecutionContext, settings: SettingsResource,
                 warehouse: WarehouseResource) -> Iterator[dg.MaterializeResult]:
        try:
            written = releases.write(settings.load(), warehouse.get(), family.key)
        except releases.ReleaseError as exc:
            context.log.warning(f"no release written: {exc}")
            return
        yield dg.MaterializeResult(metadata={
            "dagster/row_count": written.rows, "path": dg.MetadataValue.path(str(written.folder)),
            "license": written.license, "configs": dg.MetadataValue.json(list(written.parts))})

    return _release


def released_s1_items(cfg: Config) -> list[dict[str, Any]] | None:
    """S1-Bench's items of every configured language from the release `release.load.s1` names (None:
    none named, the items are built), marked as read from a release."""
    folder = cfg.release.load.get("s1")
    if not folder:
        return None
    path = cfg.beside(folder)
    rows = [r for lang in cfg.s1.languages for r in releases.read_part(path, "s1", lang)["s1.items"]]
    return s1_release.as_source(rows, path.name)


def released_tables(cfg: Config, key: str, partition: str) -> dict[str, list[dict[str, Any]]] | None:
    """The tables of `partition` from the release folder `release.load` names for family `key`, or
    None when it names none (the items are built)."""
    folder = cfg.release.load.get(key)
    if not folder:
        return None
    return releases.read_part(cfg.beside(folder), key, partition)
