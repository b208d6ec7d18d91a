"""Materialise the whole asset graph into the Dagster instance, partition by partition.

A Dagster job cannot mix assets with different partitions, so the demo command
runs this: unpartitioned assets first in one run, then each partitioned asset
group once per partition key, then the downstream summaries. Runs are recorded
in the instance named by DAGSTER_HOME, so they show up in the UI.

    python -m assets.materialize_all [--select FAMILY ...] [--partition KEY ...]
    python -m assets.materialize_all --plan [--latency SECONDS] [--select FAMILY ...]

FAMILY is an asset group (llm: the models probe and the call summary; muso, waken, ib, s1); KEY a partition key
(`timetabling_1-50`, `fld`, ...). Every step runs even when an earlier one
failed; the command ends with a table of the steps (time, failed and warning
checks) and exits 1 if any step failed. `--plan` makes no run: it prints the calls the
configured run will make per family and model, cached and new, and their time (assets/plan.py).
"""

from __future__ import annotations

import argparse
import sys
import time
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
    parser.add_argument("--select", action="append", metavar="FAMILY",
                        help="only the assets of this group (llm, muso, waken, ib, s1); repeatable")
    parser.add_argument("--partition", action="append", metavar="KEY",
                        help="only these partition keys of the partitioned assets; repeatable")
    parser.add_argument("--plan", action="store_true",
                        help="print the calls the configured run will make (cached / new) and their time; run nothing")
    parser.add_argument("--latency", type=float, metavar="SECONDS",
                        help="with --plan: seconds per call for every model (default: the median of its stored "
                             "calls, else measured from --probe-calls calls)")
    parser.add_argument("--probe-calls", type=int, default=3, metavar="N",
                        help="with --plan: short calls that measure a model's latency when none is stored (0: none)")
    args = parser.parse_args(argv)
    if args.plan:
        return _plan(args)
    from assets.definitions import build_definitions

    defs = build_definitions()  # from the configuration named now (BENCHSMITH_CONFIG), not at first import

    resources = defs.resources
    all_assets = raw_assets(defs)
    checks = list(defs.asset_checks or [])
    groups = {a.group_names_by_key[k] for a in all_assets for k in a.keys}
    unknown = sorted(set(args.select or []) - groups)
    if unknown:
        parser.error(f"--select {unknown[0]!r}: not an asset group; expected one of {sorted(groups)}")
    instance = dg.DagsterInstance.get()
    steps = plan(defs)
    config = resources["settings"].load()
    summary = []
    for group, partition_key in steps:
        keys = [k for a in group for k in a.keys if not args.select or a.group_names_by_key[k] in args.select]
        if not keys or (args.partition and partition_key is not None and partition_key not in args.partition):
            continue
        label = ", ".join(k.to_user_string() for k in keys) + (f" [{partition_key}]" if partition_key else "")
        print(f"materialising {label}", flush=True)
        t0 = time.monotonic()
        result = dg.materialize(
            [*all_assets, *checks],
            selection=dg.AssetSelection.assets(*keys) | dg.AssetSelection.checks_for_assets(*keys),
            instance=instance,
            resources=resources,
            partition_key=partition_key,
            raise_on_error=False,
            tags=_run_tags(group, keys, partition_key, config),
        )
        evals = result.get_asset_check_evaluations()
        failed = [e.check_name for e in evals if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR]
        warned = [e.check_name for e in evals if not e.passed and e.severity == dg.AssetCheckSeverity.WARN]
        summary.append((label, result.success, time.monotonic() - t0, failed, warned))
        if not result.success:
            print(f"FAILED: {label}" + (f" (checks: {', '.join(failed)})" if failed else ""), file=sys.stderr)
    _print_summary(summary)
    wh_path = resources["warehouse"].path
    print(f"\nWarehouse: {wh_path}")
    n = Warehouse(wh_path).scalar("SELECT count(*) FROM llm.calls")
    print(f"llm.calls rows: {n}")
    return 0 if all(ok for _, ok, _, _, _ in summary) else 1


def _plan(args: argparse.Namespace) -> int:
    """Print the capacity plan (no asset runs; calls only the latency probes it needs)."""
    from assets import plan
    from configuration import load_config

    cfg = load_config()
    known = set(plan.FAMILIES)
    unknown = sorted(set(args.select or []) - known)
    if unknown:
        print(f"--select {unknown[0]!r}: not a family; expected one of {sorted(known)}", file=sys.stderr)
        return 2
    wh = Warehouse(cfg.warehouse_path())
    lines = plan.plan_lines(cfg, wh, args.select)
    rows = plan.with_cache(lines, plan.stored_calls(cfg, wh))
    latency: dict[str, tuple[float, str]] = {}
    stored = plan.stored_latency(cfg, wh)
    for model in sorted({r.line.model for r in rows}):
        if args.latency is not None:
            latency[model] = (args.latency, "given")
        elif model in stored:
            latency[model] = (stored[model][0], f"median of {stored[model][1]} stored calls")
        elif args.probe_calls > 0 and any(r.new for r in rows if r.line.model == model):
            measured = plan.probe_latency(cfg, wh, model, args.probe_calls)
            if measured is not None:
                latency[model] = (measured, f"median of {args.probe_calls} probe calls")
    print(plan.render(cfg, rows, latency))
    return 0


def _run_tags(group: list[dg.AssetsDefinition], keys: list[dg.AssetKey], partition_key: str | None,
              config: object) -> dict[str, str]:
    """What the Runs page filters by: the families, the partition, the evaluated models, the config."""
    families = sorted({a.group_names_by_key[k] for a in group for k in a.keys if k in keys})
    tags = {"benchsmith/family": ",".join(families), "benchsmith/models": ",".join(config.evaluate),
            "benchsmith/config": config.source}
    if partition_key:
        tags["benchsmith/partition"] = partition_key
    return tags


def _print_summary(summary: list[tuple[str, bool, float, list[str], list[str]]]) -> None:
    print("\nstep" + " " * 60 + "status   seconds  checks")
    for label, ok, seconds, failed, warned in summary:
        notes = "; ".join(x for x in (f"failed: {', '.join(failed)}" if failed else "",
                                      f"warnings: {', '.join(sorted(set(warned)))}" if warned else "") if x)
        print(f"{label[:62]:<64}{'ok' if ok else 'FAILED':<9}{seconds:>7.1f}  {notes}")


if __name__ == "__main__":
    sys.exit(main())
