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
    """(assets, partition key) steps: unpartitioned assets upstream of any partitioned one, then
    each partitions definition's assets together once per key (one run per key does a whole
    slice, e.g. a level's instances and responses), then the remaining unpartitioned assets."""
    graph = defs.get_repository_def().asset_graph
    by_key = {key: a for a in raw_assets(defs) for key in a.keys}
    order = [k for level in graph.toposorted_asset_keys_by_level for k in level]
    partitioned = [k for k in order if by_key[k].partitions_def is not None]
    downstream = set()
    for k in partitioned:
        downstream |= graph.get(k).child_keys
    frontier = list(downstream)
    while frontier:
        for child in graph.get(frontier.pop()).child_keys:
            if child not in downstream:
                downstream.add(child)
                frontier.append(child)

    def unique(keys: list[dg.AssetKey]) -> list[dg.AssetsDefinition]:
        out: list[dg.AssetsDefinition] = []
        for k in keys:
            if by_key[k] not in out:
                out.append(by_key[k])
        return out

    steps: list[tuple[list[dg.AssetsDefinition], str | None]] = []
    before = [k for k in order if by_key[k].partitions_def is None and k not in downstream]
    if before:
        steps.append((unique(before), None))
    groups: dict[object, list[dg.AssetKey]] = defaultdict(list)
    for k in partitioned:
        groups[by_key[k].partitions_def].append(k)
    for partitions_def, keys in groups.items():
        for pk in partitions_def.get_partition_keys():  # type: ignore[union-attr]
            steps.append((unique(keys), pk))
    after = [k for k in order if by_key[k].partitions_def is None and k in downstream]
    if after:
        steps.append((unique(after), None))
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
