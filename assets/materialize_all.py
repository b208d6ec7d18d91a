"""Materialise the whole asset graph into the Dagster instance, partition by partition.

A Dagster job cannot mix assets with different partitions, so the demo command
runs this: unpartitioned assets first in one run, then each partitioned asset
group once per partition key, then the downstream summaries. Runs are recorded
in the instance named by DAGSTER_HOME, so they show up in the UI.

    python -m assets.materialize_all [--select GROUP ...]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import dagster as dg

from warehouse import Warehouse


def raw_assets(defs: dg.Definitions) -> list[dg.AssetsDefinition]:
    """The asset definitions as passed to `Definitions`, before resources are bound."""
    return [a for a in (defs.assets or []) if isinstance(a, dg.AssetsDefinition)]


def plan(defs: dg.Definitions) -> list[tuple[list[dg.AssetsDefinition], str | None]]:
    """(assets, partition key) steps in dependency order; topological by asset graph level."""
    graph = defs.get_repository_def().asset_graph
    assets_defs = {key: a for a in raw_assets(defs) for key in a.keys}
    levels = graph.toposorted_asset_keys_by_level
    steps: list[tuple[list[dg.AssetsDefinition], str | None]] = []
    for level in levels:
        by_partitions: dict[object, list[dg.AssetsDefinition]] = defaultdict(list)
        for key in level:
            a = assets_defs[key]
            if a not in by_partitions[a.partitions_def]:
                by_partitions[a.partitions_def].append(a)
        for partitions_def, group in by_partitions.items():
            if partitions_def is None:
                steps.append((group, None))
            else:
                for pk in partitions_def.get_partition_keys():
                    steps.append((group, pk))
    return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Materialise every asset at the configured scale.")
    parser.parse_args(argv)
    from assets.definitions import defs

    instance = dg.DagsterInstance.get()
    resources = defs.resources
    all_assets = raw_assets(defs)
    checks = list(defs.asset_checks or [])
    for group, partition_key in plan(defs):
        keys = [a.key for a in group]
        label = ", ".join(k.to_user_string() for k in keys) + (f" [{partition_key}]" if partition_key else "")
        print(f"materialising {label}", flush=True)
        result = dg.materialize(
            [*all_assets, *checks],
            selection=dg.AssetSelection.assets(*keys) | dg.AssetSelection.checks_for_assets(*keys),
            instance=instance,
            resources=resources,
            partition_key=partition_key,
            raise_on_error=False,
        )
        if not result.success:
            print(f"FAILED: {label}", file=sys.stderr)
            return 1
    wh_path = resources["warehouse"].path
    print(f"\nWarehouse: {wh_path}")
    n = Warehouse(wh_path).scalar("SELECT count(*) FROM llm.calls")
    print(f"llm.calls rows: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
