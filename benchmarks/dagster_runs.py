"""Dagster's own cost per run: its SQLite storage against the project's, side by side in one run.

One partitioned asset with one check that does nothing (a metadata entry and a passed check), run
with `execute_in_process` as `python -m assets.materialize_all` runs each step, one partition per
run, into two Dagster instances in two fresh folders: Dagster's own SQLite storage (what the UI
opens from dagster.yaml) and `runner.instance_storage.LocalSqliteStorage` (what
`runner.compute_logs.open_instance` opens for the command). Both capture compute logs with the
project's `ThreadComputeLogManager`, so only the storage of the runs' records and events differs.
The runs alternate between the two, so the machine's drift falls on both alike; the first run of
each is left out (the index file and the first run file are made then).

Printed: the median wall and CPU seconds per run of each side, their ratios, and what a run saves.

    python benchmarks/dagster_runs.py [--runs 40]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def instances(folder: Path) -> dict[str, object]:
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    from runner.compute_logs import ThreadComputeLogManager, open_instance

    out = {}
    for name in ("dagster", "project"):
        home = folder / name
        home.mkdir()
        (home / "dagster.yaml").write_text(
            f"storage:\n  sqlite:\n    base_dir: {home / 'storage'}\n"
            f"compute_logs:\n  module: runner.compute_logs\n  class: {ThreadComputeLogManager.__name__}\n"
            f"  config:\n    base_dir: {home / 'logs'}\ntelemetry:\n  enabled: false\n")
        if name == "dagster":
            out[name] = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
        else:
            out[name], _ = open_instance(str(home))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="runs per side (default 40)")
    args = parser.parse_args()
    import dagster as dg

    from runner.command import QUIET  # the command's run configuration: the events stored, not printed
    from runner.instance_storage import RunEventLogStorage, RunStorage

    keys = [str(i) for i in range(args.runs + 1)]

    @dg.asset(partitions_def=dg.StaticPartitionsDefinition(keys), check_specs=[dg.AssetCheckSpec("ok", asset="step")])
    def step():  # no annotations: Dagster resolves them in this module, where `dg` is local
        return dg.MaterializeResult(metadata={"rows": 1}, check_results=[dg.AssetCheckResult(passed=True)])

    job = dg.Definitions(assets=[step], jobs=[dg.define_asset_job("one_step", selection=[step])]).resolve_job_def(
        "one_step")
    with tempfile.TemporaryDirectory() as tmp:
        sides = instances(Path(tmp))
        assert isinstance(sides["project"].event_log_storage, RunEventLogStorage)
        assert isinstance(sides["project"].run_storage, RunStorage)
        assert not isinstance(sides["dagster"].event_log_storage, RunEventLogStorage)
        assert not isinstance(sides["dagster"].run_storage, RunStorage)
        spent: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for i, key in enumerate(keys):
            for name, instance in sides.items() if i % 2 else reversed(sides.items()):
                w, c = time.perf_counter(), time.process_time()
                assert job.execute_in_process(instance=instance, partition_key=key, run_config=QUIET).success
                if i:
                    spent[name].append((time.perf_counter() - w, time.process_time() - c))
        events = len(sides["project"].all_logs(sides["project"].get_runs(limit=1)[0].run_id))
    wall = {n: statistics.median(w for w, _ in s) for n, s in spent.items()}
    cpu = {n: statistics.median(c for _, c in s) for n, s in spent.items()}
    print(f"Dagster's cost per run, {args.runs} runs per side, alternating ({events} events a run)")
    print(f"{'storage':<32}{'wall s':>9}{'CPU s':>9}")
    print(f"{'Dagster DagsterSqliteStorage':<32}{wall['dagster']:>9.3f}{cpu['dagster']:>9.3f}")
    print(f"{'the project LocalSqliteStorage':<32}{wall['project']:>9.3f}{cpu['project']:>9.3f}")
    print(f"project / Dagster: wall {wall['project'] / wall['dagster']:.2f}, CPU {cpu['project'] / cpu['dagster']:.2f}; "
          f"saved per run: {wall['dagster'] - wall['project']:.3f} s wall, {cpu['dagster'] - cpu['project']:.3f} s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
