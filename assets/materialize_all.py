"""Materialise the whole asset graph into the Dagster instance, step by step, through the named jobs.

    python -m assets.materialize_all [--select FAMILY ...] [--partition KEY ...] [--model NAME ...]
    python -m assets.materialize_all --plan [--latency SECONDS] [--select FAMILY ...]

FAMILY is a key of configuration/families.py; KEY a dataset or level (`fld`, `timetabling_1-50`) or one
slice (`fld|smollm2`); NAME an evaluated model. The steps (assets/jobs.py): the models probe,
then per family its items, its (dataset, model) slices and its metrics, then the ledger summary
and the per-model reports. Each step is a run of a named job (`evaluate_waken`, ...), tagged with
the family, partition, models and configuration, recorded in the instance named by DAGSTER_HOME,
so the UI's Runs page and each job's page show it. `--model` evaluates only that model's slices
(items already built are not rebuilt) and refreshes the metrics and reports.

While it runs, one progress line: steps done of all, calls done of those the configuration fixes
(`+<=N`: the most that replies may add, e.g. WakenLLM's stages), elapsed time and an estimate of
the time left (the fixed calls still to make at the rate so far: a lower bound) (Dagster's own log goes to
the instance; `--verbose` prints it).
At the end, a summary per family: items, calls (cached, new, failed), failed steps and checks,
time, the headline numbers per model, and where to look next. Every step runs even when an
earlier one failed; the command exits 1 if any step failed. `--plan` makes no run: it prints the
calls the configured run will make per family and model, cached and new, and their time.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from assets.jobs import FAMILIES, SelectionError, Step, plan_steps, run_tags
from configuration.families import FAMILIES as FAMILY_LIST
from configuration.families import title
from llm_calls.ledger import TOTALS
from warehouse import Warehouse

# Dagster's console log stays quiet (the event log in the instance keeps everything; --verbose prints
# it): a failed step is reported by this command in one line, with its cause.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
# Each family's items table and the column naming its partition (None: one unpartitioned table).
ITEMS = {f.key: (f.items_table, f.partition_column) for f in FAMILY_LIST}
ITEMS_SQL = {family: f"SELECT count(*) FROM {table}" for family, (table, _) in ITEMS.items()}
NAMES = {**{f.key: f.title for f in FAMILY_LIST}, "": title("")}


def raw_assets(defs: dg.Definitions) -> list[dg.AssetsDefinition]:
    """The asset definitions as passed to `Definitions`, before resources are bound."""
    return [a for a in (defs.assets or []) if isinstance(a, dg.AssetsDefinition)]


@dataclass
class Done:
    step: Step
    ok: bool
    seconds: float
    calls: tuple[int, int, int]  # cached, answered, failed
    failed_checks: list[str] = field(default_factory=list)
    warned_checks: list[str] = field(default_factory=list)


class Progress:
    """One line for the whole run, rewritten in place on a terminal (a line per step and every
    `every_s` seconds otherwise): steps, calls against the plan, elapsed, estimated time left."""

    def __init__(self, total_steps: int, planned: tuple[int, int, int] | None = None,
                 stream=sys.stdout, every_s: float | None = None):
        self.total_steps = total_steps
        # calls the configuration fixes, of them not cached, and the most that replies may add
        self.exact, self.exact_new, self.bounded = planned or (0, 0, 0)
        self.stream = stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.every_s = every_s if every_s is not None else (1.0 if self.tty else 30.0)
        self.steps_done = 0
        self.current = ""
        self.t0 = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def line(self) -> str:
        elapsed = time.monotonic() - self.t0
        calls = f"calls {TOTALS.done}" + (f"/{self.exact}" if self.exact else "")
        calls += f"+<={self.bounded}" if self.bounded else ""
        calls += f" ({TOTALS.cached} cached, {TOTALS.failed} failed)"
        new = TOTALS.answered + TOTALS.failed
        if self.exact_new and new and new < self.exact_new:
            # the calls the configuration fixes, at the rate so far; replies may add more: at least this
            eta = f">={_clock((self.exact_new - new) * elapsed / new)} left"
        elif self.steps_done:
            eta = f"~{_clock((self.total_steps - self.steps_done) * elapsed / self.steps_done)} left"
        else:
            eta = "time left: measuring"
        return (f"[{self.steps_done}/{self.total_steps} steps] {calls} | {_clock(elapsed)} elapsed, {eta} | "
                f"{self.current}")

    def start(self) -> None:
        self._thread.start()

    def begin(self, label: str) -> None:
        self.current = label
        self.show(force=True)

    def finish(self) -> None:
        self.steps_done += 1
        self.show()

    def show(self, force: bool = False) -> None:
        if self.tty:
            self.stream.write("\r\033[K" + self.line()[:200])
        elif force:
            self.stream.write(self.line() + "\n")
        self.stream.flush()

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.show(force=True)

    def stop(self) -> None:
        self._stop.set()
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Materialise every asset at the configured scale.")
    parser.add_argument("--select", action="append", metavar="FAMILY",
                        help=f"only this family ({', '.join(FAMILIES)}); repeatable. The models probe, the "
                             "ledger summary and the reports always run")
    parser.add_argument("--partition", action="append", metavar="KEY",
                        help="only this dataset or level (fld, timetabling_1-50) or slice (fld|smollm2); repeatable")
    parser.add_argument("--model", action="append", metavar="NAME",
                        help="only this evaluated model's slices (items already built are kept); repeatable")
    parser.add_argument("--verbose", action="store_true", help="print Dagster's event log as it runs")
    parser.add_argument("--plan", action="store_true",
                        help="print the calls the configured run will make (cached / new) and their time; run nothing")
    parser.add_argument("--latency", type=float, metavar="SECONDS",
                        help="with --plan: seconds per call for every model (default: the median of its stored "
                             "calls, else measured from --probe-calls calls)")
    parser.add_argument("--probe-calls", type=int, default=3, metavar="N",
                        help="with --plan: short calls that measure a model's latency when none is stored (0: none)")
    args = parser.parse_args(argv)
    from assets.definitions import build_definitions

    defs = build_definitions()  # from the configuration named now (BENCHSMITH_CONFIG), not at first import
    by_name = {k.path[-1]: a for a in raw_assets(defs) for k in a.keys}
    try:  # a bad selection fails before any run, and the plan refuses what the run refuses
        steps_planned = plan_steps(by_name, [f for f in args.select or () if not (args.plan and f == "llm")] or None,
                                   args.partition, args.model)
    except SelectionError as exc:
        parser.error(str(exc))
    if args.plan:
        return _plan(args, len(steps_planned))
    config = defs.resources["settings"].load()
    if not os.environ.get("DAGSTER_HOME"):  # `make` sets it; else the runs go beside the configuration file
        os.environ["DAGSTER_HOME"] = str(Path(config.source).resolve().parent)
        print(f"DAGSTER_HOME not set: recording runs in {os.environ['DAGSTER_HOME']}", file=sys.stderr)
    instance = dg.DagsterInstance.get()
    materialized = {}
    if args.model:
        stored = _stored_items(Warehouse(defs.resources["warehouse"].path))
        for name, family in FAMILIES.items():
            key = dg.AssetKey(family[0])
            if by_name[family[0]].partitions_def is None:
                recorded = {""} if instance.get_latest_materialization_event(key) else set()
            else:
                recorded = set(instance.get_materialized_partitions(key))
            # built only if the instance remembers it AND the warehouse holds it (a deleted or new
            # warehouse file has no items, whatever the instance says)
            materialized[family[0]] = recorded & stored[name]
    try:
        steps = plan_steps(by_name, args.select, args.partition, args.model, materialized)
    except SelectionError as exc:
        parser.error(str(exc))
    wh = Warehouse(defs.resources["warehouse"].path)
    planned = _planned_calls(config, wh, args.select)
    progress = Progress(len(steps), planned)
    TOTALS.reset()
    progress.start()
    done: list[Done] = []
    try:
        for step in steps:
            progress.begin(step.label)
            before = (TOTALS.cached, TOTALS.answered, TOTALS.failed)
            t0 = time.monotonic()
            result = defs.resolve_job_def(step.job).execute_in_process(
                instance=instance, partition_key=step.partition, raise_on_error=False,
                tags=run_tags(step, config), run_config=None if args.verbose else QUIET)
            evals = result.get_asset_check_evaluations()
            calls = (TOTALS.cached - before[0], TOTALS.answered - before[1], TOTALS.failed - before[2])
            done.append(Done(step, result.success, time.monotonic() - t0, calls,
                             [e.check_name for e in evals if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR],
                             [e.check_name for e in evals if not e.passed and e.severity == dg.AssetCheckSeverity.WARN]))
            if not result.success:
                sys.stderr.write(f"\nFAILED: {step.label} (run {result.run_id[:8]}): {_failure(result, wh)}\n")
            progress.finish()
    finally:
        progress.stop()
    try:
        print(summary(done, wh, config, defs.resources["warehouse"].path))
    except Exception as exc:  # the warehouse cannot be read: the steps' own outcomes still stand
        print(f"\nno summary: the warehouse {defs.resources['warehouse'].path} could not be read "
              f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
              f"{sum(d.ok for d in done)} of {len(done)} steps ok", file=sys.stderr)
        return 1
    return 0 if all(d.ok for d in done) else 1


def _stored_items(wh: Warehouse) -> dict[str, set[str]]:
    """Per family, the item partitions the warehouse holds ('' for an unpartitioned family)."""
    if not Path(wh.path).exists():
        return {family: set() for family in ITEMS}
    empty = "''"  # an unpartitioned family's one partition
    return {family: {r["p"] for r in wh.rows(f"SELECT DISTINCT {column or empty} AS p FROM {table}")}
            for family, (table, column) in ITEMS.items()}


def _failure(result: dg.ExecuteInProcessResult, wh: Warehouse) -> str:
    """Why a step failed, in one line: the failing checks and the first failed call's error, or the
    step's own error."""
    failed = [e for e in result.get_asset_check_evaluations()
              if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR]
    if failed:
        why = "; ".join(f"{e.check_name}: {e.description}" for e in failed)
        error = wh.scalar("SELECT min(error) FROM llm.calls WHERE run_id = ? AND status = 'failed'", [result.run_id])
        return f"checks failed: {why}" + (f"; first failed call: {error[:200]}" if error else "")
    for e in result.all_events:
        if e.event_type_value == "STEP_FAILURE" and e.step_failure_data and e.step_failure_data.error:
            err = e.step_failure_data.error
            while err.cause is not None and err.message.startswith("dagster."):
                err = err.cause
            return err.message.strip().splitlines()[0][:300]
    return "see the run in the UI"


def _planned_calls(config, wh: Warehouse, families) -> tuple[int, int, int] | None:
    """(calls the configuration fixes, of them not cached, the most that replies may add) from the
    capacity plan (reporting/plan.py); None if it cannot say."""
    from reporting import plan

    try:
        fams = [f for f in plan.FAMILIES if not families or f in families or f == "llm"]
        rows = plan.with_cache(plan.plan_lines(config, wh, fams), plan.stored_calls(config, wh))
    except Exception:  # the plan is an estimate: never a reason not to run
        return None
    exact = [r for r in rows if r.line.kind == plan.EXACT]
    return (sum(r.line.calls for r in exact), sum(r.new for r in exact),
            sum(r.line.calls for r in rows if r.line.kind != plan.EXACT))


def _plan(args: argparse.Namespace, steps: int) -> int:
    """Print the capacity plan (no asset runs; calls only the latency probes it needs)."""
    from configuration import load_config
    from reporting import plan

    cfg = load_config()
    wh = Warehouse(cfg.warehouse_path())
    lines = plan.plan_lines(cfg, wh, args.select, args.partition, args.model)
    runs = None
    if (args.partition or args.model) and os.environ.get("DAGSTER_HOME"):
        with dg.DagsterInstance.from_config(os.environ["DAGSTER_HOME"]) as instance:
            runs = plan.selected_runs(instance, args.partition, args.model)
    rows = plan.with_cache(lines, plan.stored_calls(cfg, wh, runs))
    latency: dict[str, tuple[float, str]] = {}
    stored, per_step = plan.stored_latency(cfg, wh)
    for model in sorted({r.line.model for r in rows}):
        if args.latency is not None:
            latency[model] = (args.latency, "given")
        elif model in stored:
            latency[model] = (stored[model][0], f"median of {stored[model][1]} stored calls")
        elif args.probe_calls > 0 and any(r.new for r in rows if r.line.model == model):
            measured = plan.probe_latency(cfg, wh, model, args.probe_calls)
            if measured is not None:
                latency[model] = (measured, f"median of {args.probe_calls} probe calls")
    by_step = {} if args.latency is not None else per_step
    print(plan.render(cfg, rows, latency, by_step, _overhead(steps)))
    for line in left_out_at_demo(cfg):
        print(f"Left out at demo scale: {line}")
    return 0


def _overhead(steps: int) -> str:
    """The run's own time beside its calls: each of its steps is a Dagster run (created, started,
    its events written), measured from the instance's earlier runs of steps that call no model."""
    import statistics

    home = os.environ.get("DAGSTER_HOME")
    seconds = []
    if home:
        try:
            with dg.DagsterInstance.from_config(home) as instance:
                for rec in instance.get_run_records(limit=200):
                    if rec.dagster_run.job_name.startswith("score_") and rec.start_time and rec.end_time:
                        seconds.append(rec.end_time - rec.start_time)
        except Exception as exc:  # the plan is an estimate: an unreadable instance costs only this line
            return f"Besides the calls: {steps} steps, each a Dagster run (instance not read: {exc})."
    if not seconds:
        return (f"Besides the calls: {steps} steps, each a Dagster run with its own start-up time (not measured: "
                "no earlier runs in this instance).")
    each = statistics.median(seconds)
    return (f"Besides the calls: {steps} steps, each a Dagster run; a step that calls no model took {each:.1f} s "
            f"(median of {len(seconds)} earlier runs): about {_clock(steps * each)} more.")


def left_out_at_demo(config) -> list[str]:
    """What the demo scale leaves out of the configuration, one line each (the summary and the plan
    print them): MuSoBench levels beyond `muso.demo_levels`, S1-Bench subcategories other than
    `demo_subcategories`."""
    from assets.muso import partitions, task_bins

    if config.scale != "demo":
        return []
    built = {(task, b) for task, _, b in partitions(config).values()}
    out = []
    for task in ("timetabling", "subsetsum"):
        left = [b.label for b in task_bins(config, task) if (task, b) not in built]
        if left:
            out.append(f"MuSoBench {task}: levels {', '.join(left)} not built (muso.demo_levels: "
                       f"{config.muso.demo_levels}; scale: paper builds every level)")
    others = [x for x in (config.s1.subcategories or []) if x not in config.s1.demo_subcategories]
    if others:
        out.append(f"S1-Bench: subcategories {', '.join(others)} not built (demo scale builds "
                   f"s1.demo_subcategories: {', '.join(config.s1.demo_subcategories)})")
    return out


def summary(done: list[Done], wh: Warehouse, config, warehouse_path: str) -> str:
    """The end-of-run table per family, the headline numbers per model, and where to look next."""
    out = ["", f"{'family':<22}{'items':>7}{'cached':>8}{'new':>7}{'failed':>8}  {'time':>7}  status"]
    by_family: dict[str, list[Done]] = {}
    for d in done:
        by_family.setdefault(d.step.family, []).append(d)
    for family, ds in by_family.items():
        items = wh.scalar(ITEMS_SQL[family]) if family in ITEMS_SQL else ""
        cached, answered, failed = (sum(d.calls[i] for d in ds) for i in range(3))
        bad = [d for d in ds if not d.ok]
        warned = sorted({c for d in ds for c in d.warned_checks})
        status = "ok" if not bad else "FAILED: " + ", ".join(
            d.step.label + (f" (checks: {', '.join(d.failed_checks)})" if d.failed_checks else "") for d in bad)[:200]
        # a failed check that does not stop its step (coverage: a partial selection fails it too) still shows
        unmet = sorted({c for d in ds if d.ok for c in d.failed_checks})
        if unmet:
            status += f" (failed checks: {', '.join(unmet)})"
        if warned:
            status += f" (warnings: {', '.join(warned)})"
        out.append(f"{NAMES[family]:<22}{items!s:>7}{cached:>8}{answered + failed:>7}{failed:>8}  "
                   f"{_clock(sum(d.seconds for d in ds)):>7}  {status}")
    out.append(f"{'total':<22}{'':>7}{sum(d.calls[0] for d in done):>8}"
               f"{sum(d.calls[1] + d.calls[2] for d in done):>7}{sum(d.calls[2] for d in done):>8}  "
               f"{_clock(sum(d.seconds for d in done)):>7}")
    out += ["", "headline numbers (report.headline; fractions unless named):"]
    families = [f for f in by_family if f in FAMILIES]
    rows = wh.rows("SELECT * FROM report.headline WHERE family IN (SELECT unnest(?::VARCHAR[])) "
                   "ORDER BY family, model, scope, metric", [families]) if families else []
    if not rows:
        out.append("  none: no metrics were computed")
    for family in families:
        cells: dict[str, list[str]] = {}
        gone: set[str] = set()
        for r in rows:
            if r["family"] == family:
                value = "NULL" if r["value"] is None else (f"{r['value']:.3g}")
                cells.setdefault(r["model"], []).append(f"{r['scope']} {r['metric']}={value}")
                if not r["configured"]:
                    gone.add(r["model"])
        for model, parts in cells.items():
            shown = "; ".join(parts[:6]) + (f"; ... {len(parts) - 6} more" if len(parts) > 6 else "")
            mark = " (no longer configured: rows of an earlier configuration)" if model in gone else ""
            out.append(f"  {NAMES[family]} [{model}]{mark}: {shown}")
    stale = wh.rows("SELECT * FROM report.stale WHERE family IN (SELECT unnest(?::VARCHAR[]))",
                    [families]) if families else []
    if stale:
        out += ["", "stale replies, left out of every metric (report.stale): made on items since rebuilt "
                    "differently or removed; run those slices again (--model NAME):"]
        out += [f"  {NAMES[r['family']]} [{r['model']}] {r['scope']}: {r['replies']} replies in {r['table']} "
                f"({r['item_changed']} on changed items, {r['item_gone']} on items no longer stored)" for r in stale]
    missed = wh.rows("SELECT * FROM report.mechanisms WHERE family IN (SELECT unnest(?::VARCHAR[])) AND NOT reached",
                     [families]) if families else []
    measured = {r["family"] for r in wh.rows("SELECT DISTINCT family FROM report.mechanisms")} if families else set()
    nothing = [f for f in families if f not in measured]
    if families:
        out += ["", "mechanisms not exercised (report.mechanisms):" if missed or nothing else
                "every family's main mechanism was exercised (report.mechanisms)"]
        out += [f"  {NAMES[r['family']]} [{r['model']}] {r['scope']}: {r['mechanism']}: {r['detail']}" for r in missed]
        out += [f"  {NAMES[f]}: nothing measured (no current replies or items)" for f in nothing]
    left_out = left_out_at_demo(config)
    if left_out:
        out += ["", "left out at demo scale (configured, not built):"] + [f"  {line}" for line in left_out]
    reports = wh.path.parent / "reports"
    out += ["", "where to look next:",
            f"  reports:   {reports / 'index.html'}" + ("" if (reports / "index.html").exists() else " (not built)"),
            f"  warehouse: {warehouse_path}   (python -m warehouse.query \"SELECT * FROM report.headline\")",
            "  Dagster UI: make ui, then http://127.0.0.1:3000 (runs, check verdicts per partition)"]
    failed = [d for d in done if not d.ok]
    if failed:
        out += ["", f"{len(failed)} step(s) failed: " + ", ".join(d.step.label for d in failed[:10])]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
