"""The MuSoBench build path against its generation alone, side by side in one run.

Generation alone: `generators.muso.generate_level` for every paper-scale level (TimeTabling 10 x
100, SubsetSum 7 x 100), in this process, once before and once after the build (the machine's
speed drifts; both are printed and the ratio uses their mean).

The build: the `build_muso` job for each level, one Dagster run per level as
`python -m assets.materialize_all` runs it (in process, against a fresh warehouse and Dagster
instance), twice: with the levels generated ahead in a worker process as `materialize_all` does
(`built_ahead`), then inline, each into a warehouse of its own. Each run's `build_seconds`
metadata says where its time went: generation, the rows (the solutions' JSON, the question and
reference answer texts), the validation (every solution re-checked from its text by the
independent validator), the write (one transaction, DuckDB's checkpoint when the file is
released), the quality checks (solution counts in SQL, CP-SAT re-enumerating the level's sample);
built ahead, the first two are the worker's and `waited` is the step's wait for it. The rest of
each run's wall time is Dagster's (creating the run, its events in the instance's SQLite storage).

Memory: the process's peak resident set, the resident set right after the imports, and what is
left resident after the last level once Python's garbage is collected and glibc's `malloc_trim`
hands freed arenas back (the difference is freed memory the allocator keeps, not live data).

    python benchmarks/muso_build.py [--quota 100]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def resident_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generation_alone(cfg) -> float:
    from generators import muso as gen

    t0 = time.perf_counter()
    for task, level, _ in gen.partitions(cfg).values():
        gen.generate_level(task, gen.task_bins(cfg, task), level, cfg.muso.quota.at(cfg.scale), cfg.seed,
                           gen.task_params(cfg, task))
    return time.perf_counter() - t0


def build(job, instance, keys: list[str], config_file: Path) -> tuple[float, Counter, int, bool]:
    """One build of every level (one run each) into the warehouse `config_file` names: its wall
    time, the seconds per phase summed over the levels, the solutions, and whether every level was
    generated ahead."""
    from runner.command import QUIET

    os.environ["BENCHSMITH_CONFIG"] = str(config_file)
    phases: Counter = Counter()
    solutions, every_ahead = 0, True
    t0 = time.perf_counter()
    for key in keys:
        result = job.execute_in_process(instance=instance, partition_key=key, run_config=QUIET)
        meta = result.asset_materializations_for_node("muso_instances")[0].metadata
        phases.update(meta["build_seconds"].value)
        solutions += meta["solutions"].value
        every_ahead &= meta["generated_ahead"].value
    return time.perf_counter() - t0, phases, solutions, every_ahead


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quota", type=int, default=100, help="instances per level (the paper's 100)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="muso-build-"))
    data = yaml.safe_load((ROOT / "benchsmith.yaml").read_text())
    data.update({"scale": "paper"})
    data["muso"] = {**data["muso"], "quota": {"demo": 1, "paper": args.quota}}
    configs = {}
    for name in ("ahead", "inline"):  # each build into a fresh warehouse of its own
        configs[name] = folder / f"{name}.yaml"
        configs[name].write_text(yaml.safe_dump({**data, "warehouse": {"path": str(folder / f"{name}.duckdb")}},
                                                 sort_keys=False))
    (folder / "dagster").mkdir()
    (folder / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    os.environ.update({"BENCHSMITH_CONFIG": str(configs["ahead"]), "DAGSTER_HOME": str(folder / "dagster")})

    import dagster as dg

    from assets.definitions import build_definitions
    from configuration import load_config
    from configuration.muso import build_order
    from runner.command import built_ahead
    from runner.compute_logs import open_instance

    cfg = load_config()
    defs = build_definitions()
    instance, _ = open_instance(os.environ["DAGSTER_HOME"])  # as the command opens it (its compute logs)
    job = defs.resolve_job_def("build_muso")
    # every level, in the order `materialize_all` builds them (the tasks alternating)
    keys = build_order([k for a in defs.assets if isinstance(a, dg.AssetsDefinition)
                        and a.key == dg.AssetKey("muso_instances") for k in a.partitions_def.get_partition_keys()])
    after_imports = resident_mib()

    before = generation_alone(cfg)
    # as `materialize_all` builds them: each level generated ahead in a worker process (started here,
    # inside the timed build) while this process runs the levels before it, its DuckDB on one thread
    t0 = time.perf_counter()
    with built_ahead(cfg, {"muso": keys}):
        wall, phases, solutions, every_ahead = build(job, instance, keys, configs["ahead"])
    ahead_wall = time.perf_counter() - t0  # with the worker's shutdown
    peak_ahead = peak_mib()
    worker_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    inline_wall, inline_phases, _, _ = build(job, instance, keys, configs["inline"])
    after = generation_alone(cfg)
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    live = resident_mib()

    alone = (before + after) / 2
    print(f"\nMuSoBench paper build: {len(keys)} levels x {args.quota} instances, {solutions:,} solutions; "
          f"{os.cpu_count()} CPUs\n")
    print(f"generation alone: {before:.1f} s before the builds, {after:.1f} s after (mean {alone:.1f} s)")
    print(f"the build, levels generated ahead: {ahead_wall:.1f} s = {ahead_wall / alone:.2f} x generation alone "
          f"(goal: at most 1.3 x){'' if every_ahead else '  (NOT every level came from the worker)'}")
    print(f"  in the worker: generation {phases['generation']:.1f} s, rows {phases['rows']:.1f} s")
    here = phases["waited"] + phases["validation"] + phases["write"] + phases["checks"]
    print(f"  in this process: waiting for the worker {phases['waited']:.1f} s, validation {phases['validation']:.1f} s, "
          f"write {phases['write']:.1f} s, "
          f"checks {phases['checks']:.1f} s, Dagster {wall - here:.1f} s ({(wall - here) / len(keys):.2f} s a run), "
          f"the worker's start and stop {ahead_wall - wall:.1f} s")
    print(f"the build, inline:  {inline_wall:.1f} s = {inline_wall / alone:.2f} x generation alone")
    for name in ("generation", "rows", "validation", "write", "checks"):
        print(f"  {name:<11} {inline_phases[name]:6.1f} s  ({inline_phases[name] / inline_wall:5.1%})")
    dagster = inline_wall - sum(inline_phases.values())
    print(f"  {'Dagster':<11} {dagster:6.1f} s  ({dagster / inline_wall:5.1%}; {len(keys)} runs, "
          f"{dagster / len(keys):.2f} s each)")
    print(f"memory: {after_imports:.0f} MiB resident after the imports; peak {peak_ahead:.0f} MiB after the build "
          f"ahead (the worker's own peak {worker_peak:.0f} MiB), {peak_mib():.0f} MiB after the inline build; "
          f"{live:.0f} MiB resident at the end once freed memory is handed back (malloc_trim)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
