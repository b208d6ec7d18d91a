"""Materialise the whole asset graph into the Dagster instance, step by step, through the named jobs.

    python -m assets.materialize_all [--select FAMILY ...] [--partition KEY ...] [--model NAME ...]
    python -m assets.materialize_all --plan [--latency SECONDS] [--select FAMILY ...]
    python -m assets.materialize_all --export-batch DIR [--select FAMILY ...]   # calls as batch files
    python -m assets.materialize_all --import-batch FILE [--import-batch FILE ...]

FAMILY is a key of configuration/families.py; KEY a dataset or level (`fld`, `timetabling_1-50`) or one
slice (`fld|smollm2`); NAME an evaluated model. The steps (assets/jobs.py): the models probe,
then per family its items, its (dataset, model) slices and its metrics, then the ledger summary
and the per-model reports. A step starts as soon as the steps it reads have ended
(`assets.jobs.waits_for`), up to `--parallel` (8) at once, each in a thread: every slice of every
family starts once its items are built and shares its models' concurrency with the others; items
are built one at a time (MuSoBench's levels generated ahead, in their order, by a worker process
while the steps before them run: `built_ahead`). Each step is a run of a named job (`evaluate_waken`, ...), tagged with
the family, partition, models and configuration, recorded in the instance named by DAGSTER_HOME,
so the UI's Runs page and each job's page show it. `--model` evaluates only that model's slices
(items already built are not rebuilt) and refreshes the metrics and reports. A step that is up to
date (it last ran to the end on the same code, configuration and files, after the steps it reads:
runner/up_to_date.py) is skipped; when all are, the command prints its summary without importing
Dagster or the model client (the steps come from the configuration: `assets.jobs.plan_steps`);
`--all` runs every selected step.

While it runs, one progress line: steps done of all, calls done of those the configuration fixes
(`+<=N`: the most that replies may add, e.g. WakenLLM's stages), elapsed time and an estimate of
the time left (the fixed calls still to make at the rate so far: a lower bound) (Dagster's own log goes to
the instance; `--verbose` prints it).
At the end, a summary per family: items, calls (cached, new, failed), failed steps and checks,
time, the headline numbers per model, and where to look next. Every step runs even when an
earlier one failed; the command exits 1 if any step failed. `--plan` makes no run: it prints the
calls the configured run will make per family and model, cached and new, and their time.

Batch mode (llm_calls/batch.py): `--export-batch DIR` makes every model call of the run a line of a
batch input file under DIR instead of a request; each step writes the turn it has reached (its
independent parts together) and stops, and the summary lists the files. Run them where the model is served (vLLM's `run_batch`), then
`--import-batch FILE` reads each output file into the ledger (refusing a file with a line that is not a
request this configuration exported, with its line number; skipping, and naming, a line that is no
result), and the same command run again continues
with the next turn. A model with `batch: {mode: api}` in the configuration goes through its
provider's Batch API within the run instead.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from assets import step_records
from assets.jobs import FAMILIES, LAST, Step, run_tags, stage_of, waits_for
from configuration.families import BY_KEY
from configuration.families import FAMILIES as FAMILY_LIST
from generators import ahead
from llm_calls import EXPORT_ENV, TOTALS, BatchImportError, exported, import_file, round_files, usable_cores
from reporting.summary import Done, Progress, clock, left_out_at_demo, stored_items, summary
from runner import command_records, up_to_date
from runner.steps import SelectionError, plan_steps
from warehouse import Warehouse, open_warehouse
from warehouse.connection import WarehouseVersionError, duckdb_threads
from warehouse.lake import LakeError

if TYPE_CHECKING:  # Dagster, the model client and the cost tables are imported where steps run:
    import dagster as dg  # a run whose steps are all up to date prints its summary without them

# Dagster's console log stays quiet (the event log in the instance keeps everything; --verbose prints
# it): a failed step is reported by this command in one line, with its cause.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def raw_assets(defs: dg.Definitions) -> list[dg.AssetsDefinition]:
    """The asset definitions as passed to `Definitions`, before resources are bound."""
    import dagster as dg

    return [a for a in (defs.assets or []) if isinstance(a, dg.AssetsDefinition)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Materialise every asset at the configured scale.")
    parser.add_argument("--select", action="append", metavar="FAMILY",
                        help=f"only this family ({', '.join(FAMILIES)}); repeatable. The models probe, the "
                             "ledger summary and the reports always run")
    parser.add_argument("--partition", action="append", metavar="KEY",
                        help="only this dataset or level (fld, timetabling_1-50) or slice (fld|smollm2); repeatable")
    parser.add_argument("--model", action="append", metavar="NAME",
                        help="only this evaluated model's slices (items already built are kept); repeatable")
    parser.add_argument("--all", action="store_true",
                        help="run every selected step, also those up to date (by default a step that last ran to the "
                             "end on the same code, configuration and files, after the steps it reads, is skipped)")
    parser.add_argument("--verbose", action="store_true", help="print Dagster's event log as it runs")
    parser.add_argument("--parallel", type=int, default=8, metavar="N",
                        help="steps that may run at once (default 8): a step starts once the steps it reads "
                             "have ended, so every slice shares its models' concurrency; 1 runs them one by one")
    parser.add_argument("--plan", action="store_true",
                        help="print the calls the configured run will make (cached / new) and their time; run nothing")
    parser.add_argument("--latency", type=float, metavar="SECONDS",
                        help="with --plan: seconds per call for every model (default: the median of its stored "
                             "calls, else measured from --probe-calls calls)")
    parser.add_argument("--probe-calls", type=int, default=3, metavar="N",
                        help="with --plan: short calls that measure a model's latency when none is stored (0: none)")
    parser.add_argument("--export-batch", metavar="DIR",
                        help="write the run's model calls as OpenAI batch input files under DIR instead of calling; "
                             "each step writes the turn it has reached, then stops")
    parser.add_argument("--import-batch", action="append", metavar="FILE_OR_FOLDER",
                        help="read a batch output file (OpenAI's or vLLM run_batch's layout), or every .jsonl "
                             "file of a folder, into the ledger; run nothing")
    args = parser.parse_args(argv)
    if args.import_batch:
        return _import_batches(args.import_batch)
    if not args.export_batch:
        return _run(args, parser)
    previous = os.environ.get(EXPORT_ENV)
    os.environ[EXPORT_ENV] = str(Path(args.export_batch).resolve())  # the ledgers of this process read it
    try:
        return _run(args, parser)
    finally:
        if previous is None:
            os.environ.pop(EXPORT_ENV, None)
        else:
            os.environ[EXPORT_ENV] = previous


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from configuration import load_config

    config = load_config()  # the file named now (BENCHSMITH_CONFIG); a bad one stops here, naming its key
    try:  # a bad selection fails before any run, and the plan refuses what the run refuses
        steps_planned = plan_steps(config, [f for f in args.select or () if not (args.plan and f == "llm")] or None,
                                   args.partition, args.model)
    except SelectionError as exc:
        parser.error(str(exc))
    if args.plan:
        return _plan(args, steps_planned, config)
    wh = open_warehouse(config)
    unusable = _unusable(wh)
    if unusable:
        print(f"materialize_all: {unusable}", file=sys.stderr)
        return 2
    exporting = bool(os.environ.get(EXPORT_ENV))
    digest = up_to_date.inputs_digest(config, exporting)
    if args.model:  # the steps follow from what Dagster's instance has materialised: planned again there
        return _run_steps(args, parser, config, wh, digest, exporting)
    skip = up_to_date.skipped(steps_planned, wh, digest, args.all or exporting)
    if len(skip) == len(steps_planned):
        # nothing to run: the summary without importing Dagster or the model client (1.5-2 s of a 2.5-3 s rerun)
        now = time.monotonic()
        return _finish([Done(s, True, 0.0, (0, 0, 0), started=now, skipped=True) for s in steps_planned], [], wh,
                       config)
    # items built ahead (MuSoBench's levels) in a worker process while the steps before each run
    # (started first: the worker's start overlaps Dagster's imports)
    with built_ahead(config, _to_build_ahead(config, steps_planned, skip)):
        return _run_steps(args, parser, config, wh, digest, exporting, (steps_planned, skip))


def _to_build_ahead(config, steps: Sequence[Step], skip: Collection[int]) -> dict[str, list[str]]:
    """Per family whose items are built ahead (its `Parts.ahead`), the partitions the run builds, in
    the order their steps start (items steps run one at a time, in `start_order`): those not up to
    date, when no release is read instead (`assets.release.released_tables`)."""
    order = start_order(steps)
    return {f.key: [steps[i].partition for i in order if i not in skip and _items_of(steps[i], f.key)]
            for f in FAMILY_LIST if f.parts.ahead and not config.release.load.get(f.key)}


def _items_of(step: Step, family: str) -> bool:
    return step.family == family and stage_of(step) == "items"


def start_order(steps: Sequence[Step]) -> list[int]:
    """The order `run_steps` tries the steps in (by index): the plan's, with the items steps of a
    family built ahead taking one another's places in its `ItemsAhead.order` (MuSoBench's two tasks
    alternating, so that the worker generating them ahead and the steps storing them are both kept
    busy)."""
    order = list(range(len(steps)))
    for f in FAMILY_LIST:
        if f.parts.ahead is None:
            continue
        places = [i for i, s in enumerate(steps) if _items_of(s, f.key)]
        index = {steps[i].partition: i for i in places}
        for place, key in zip(places, ahead.ahead_of(f).order([steps[i].partition for i in places])):
            order[place] = index[key]
    return order


@contextmanager
def built_ahead(config, partitions: Mapping[str, Sequence[str]]) -> Iterator[None]:
    """Each family's `partitions` (family key -> partition keys, in build order) built, with their
    rows, in a worker process (`generators.ahead`) while the block runs their steps, each step
    taking its partition's result from it; this process's DuckDB leaves the workers a core
    meanwhile. Nothing started where there are no partitions."""
    with ExitStack() as stack:
        workers = []
        for key, keys in partitions.items():
            part = ahead.ahead_of(BY_KEY[key])
            workers.append(stack.enter_context(ahead.building_ahead(part.build, [part.job(config, k) for k in keys])))
        if any(w is not None for w in workers):
            stack.enter_context(duckdb_threads(max(1, usable_cores() - 1)))
        yield


def _run_steps(args: argparse.Namespace, parser: argparse.ArgumentParser, config, wh: Warehouse, digest: str,
               exporting: bool, planned: tuple[list[Step], set[int]] | None = None) -> int:
    """Run the selected steps that are not up to date, each as a run of its Dagster job, and print the
    summary. `planned`: the steps and those up to date (by index), when `_run` has them (not with
    `--model`)."""

    from assets.definitions import build_definitions
    from runner.compute_logs import open_instance

    defs = build_definitions()  # from the configuration named now (BENCHSMITH_CONFIG), not at first import
    if not os.environ.get("DAGSTER_HOME"):  # `make` sets it; else the runs go beside the configuration file
        os.environ["DAGSTER_HOME"] = str(Path(config.source).resolve().parent)
        print(f"DAGSTER_HOME not set: recording runs in {os.environ['DAGSTER_HOME']}", file=sys.stderr)
    instance, concurrent = open_instance(os.environ["DAGSTER_HOME"]) if planned is None else (None, True)
    if planned is None:  # --model: the items the instance has materialised are not built again
        try:
            steps = plan_steps(config, args.select, args.partition, args.model, _items_built(config, wh, instance))
        except SelectionError as exc:
            parser.error(str(exc))
        planned = (steps, up_to_date.skipped(steps, wh, digest, args.all or exporting))
    steps = planned[0]
    waits = waits_for(steps)
    skip = {steps[i] for i in planned[1]}
    if instance is None and len(skip) < len(steps):  # Dagster's instance only for steps that run (1-1.5 s)
        instance, concurrent = open_instance(os.environ["DAGSTER_HOME"])
    planned = _planned_calls(config, wh, args.select) if len(skip) < len(steps) else None  # none to make
    progress = Progress(len(steps), planned)
    parallel = args.parallel if concurrent and not exporting else 1
    if not concurrent and args.parallel > 1:
        print("materialize_all: steps run one at a time: the Dagster instance's compute-log manager captures by "
              "the process's file descriptors (compute_logs: runner.compute_logs.ThreadComputeLogManager allows "
              "steps at once)", file=sys.stderr)
    settle_heap()
    load_avg = command_records.load_now()
    TOTALS.reset()
    progress.start()
    run_ended = threading.Event()
    if any(s not in skip and (stage_of(s) == "metrics" or s.job == LAST[0]) for s in steps):  # they draw figures
        releasing = any(s not in skip and stage_of(s) == "metrics" for s in steps)  # and write releases
        threading.Thread(target=warm_figures_while_waiting, args=(run_ended,), kwargs={"writes_releases": releasing},
                         name="figures-warm-up", daemon=True).start()
    # each step's record is written beside the steps that follow it: a write waits while another
    # step's ledger holds the file, and the next step need not wait with it
    recorder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="record")
    def execute(step: Step) -> tuple[Done, str]:
        if step in skip:  # up to date: no run
            return Done(step, True, 0.0, (0, 0, 0), started=time.monotonic(), skipped=True), ""
        return _execute(defs, instance, step, config, args.verbose, wh, digest, recorder)

    try:
        done, run_ids = run_steps(steps, waits, parallel, execute, progress, start_order(steps))
    finally:
        run_ended.set()
        recorder.shutdown(wait=True)
        progress.stop()
    if not exporting:  # what the client's own work cost, for the plan (a batch export makes no call)
        command_records.record(wh, done, load_avg)
    return _finish(done, run_ids, wh, config)


def _items_built(config, wh: Warehouse, instance) -> dict[str, set[str]]:
    """Per family's items asset, the partitions built: those the Dagster instance remembers AND the
    warehouse holds (a deleted or new warehouse file has no items, whatever the instance says)."""
    import dagster as dg

    stored = stored_items(wh)
    built = {}
    for name, family in FAMILIES.items():
        key = dg.AssetKey(family[0])
        if config.item_partitions(name) is None:
            recorded = {""} if instance.get_latest_materialization_event(key) else set()
        else:
            recorded = set(instance.get_materialized_partitions(key))
        built[family[0]] = recorded & stored[name]
    return built


def settle_heap() -> None:
    """In the command's own process (whose `__main__` block turns the cyclic garbage collector off
    before `main`), once the code its work needs is loaded (the steps', the plan's, the batch
    import's): everything alive now moves to the collector's permanent generation (`gc.freeze`),
    and the collector is turned back on. Elsewhere (a test calling `main`, the collector on)
    nothing. A command with every step up to date ends with the collector off.

    By then the process holds Dagster, DuckDB, polars, openai and the definitions: about a million
    objects that live until it ends. Each full collection walks all of them; in a WakenLLM FLD
    paper run (2 cores of an AMD EPYC) there were nine, of 0.1-0.24 s each, 1.2 s in all: four
    while the command imported, one as the first requests were about to go out, one as the first
    wave's replies came back, two more in the middle. With this the collector skips what the
    imports made (the few cycles they left are kept), and collects only what the run makes."""
    if gc.isenabled():
        return
    gc.freeze()
    gc.enable()


def warm_figures_while_waiting(ended: threading.Event, poll_s: float = 0.1, *, writes_releases: bool = False) -> bool:
    """Once the process waits on an endpoint (`TOTALS.waiting`: a model has its whole concurrency
    out), draw a first figure (`reporting.figures.warm_up`), and with `writes_releases` import what a
    family's release is written with (`releases.warm_up`), unless `ended` is set first; whether
    it did. The 0.3 s a process's first figure costs are so taken from time the interpreter lock
    is free (the first wave's wait for its replies), not from after the last answer, where the
    metrics and report steps draw theirs. Drawn at the first answer instead (the models probe's,
    in a WakenLLM FLD paper run), it held up the first slice's start by about 0.2 s, and the
    call loop reading the first wave's replies. A run that never has a whole concurrency out
    draws its first figure in the step that needs it. A failure here is left to the step that
    draws to meet and report."""
    while not ended.is_set():
        if TOTALS.waiting.wait(poll_s):
            if ended.is_set():
                return False
            from reporting import figures

            try:
                figures.warm_up()
                if writes_releases and not ended.is_set():
                    import releases

                    releases.warm_up()
            except Exception:  # noqa: BLE001 (the steps that draw or write report it)
                return False
            return True
    return False


def _finish(done: list[Done], run_ids: Sequence[str], wh: Warehouse, config) -> int:
    """Print the summary, what the runs spent and the batch files waiting; the command's exit code."""
    gone = bool(done) and not wh.exists()  # before the summary reads it (reading a file may create it)
    try:
        # one attach of the file for the summary's dozen reads: each would attach and detach it again
        # (about 10 ms apiece on a warehouse of every family's tables and views)
        with wh.connect():
            print(summary(done, wh, config, wh.where))  # printed first, as before: a later read may fail
            paid = _spent(config, wh, [r for r in run_ids if r])
            waiting = exported(wh)
        if paid:
            print(paid)
        if waiting:
            rounds = round_files(waiting)
            print(f"\nwaiting on batch files: {sum(n for _, _, n in rounds)} requests of {len(waiting)} step(s), one "
                  "file per model holding every step's pending requests; run each (e.g. vLLM: python -m "
                  "vllm.entrypoints.openai.run_batch -i FILE -o OUT --model M), put the outputs in one folder, "
                  "then --import-batch FOLDER, then this command again:")
            for model, path, n in rounds:
                print(f"  {path}  ({model}, {n} requests)")
            print(f"  (each step's own file is beside them: {', '.join(sorted({Path(w['input_file']).name for w in waiting})[:3])}"
                  f"{', ...' if len(waiting) > 3 else ''})")
    except Exception as exc:  # the warehouse cannot be read: the steps' own outcomes still stand
        print(f"\nno summary: the warehouse {wh.where} could not be read "
              f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
              f"{sum(d.ok for d in done)} of {len(done)} steps ok", file=sys.stderr)
        return 1
    if gone:  # removed while the run went on: what it stored is not there
        print(f"the warehouse {wh.where} does not exist at the end of the run (removed while it ran?): what "
              "the steps stored is not there; run again", file=sys.stderr)
        return 1
    return 0 if all(d.ok for d in done) else 1


def _spent(config, wh: Warehouse, run_ids: Sequence[str]) -> str | None:
    """What the runs `run_ids` spent (reporting/cost.py); None when they made no call."""
    if not run_ids:
        return None
    from reporting import cost

    return cost.spent(config, wh, run_ids)


def run_steps(steps: Sequence[Step], waits: Sequence[frozenset[int]], parallel: int,
              execute: Callable[[Step], tuple[Done, str]], progress: Progress | None = None,
              order: Sequence[int] | None = None) -> tuple[list[Done], list[str]]:
    """Run every step, each once the steps it waits for (`waits`, by index) have ended, ok or not,
    up to `parallel` at once, each in a thread of its own (a Dagster run executes in the thread
    that starts it); items steps one at a time, since building items is the process's own CPU work
    (generation, solvers) that running two at once would only share out. `execute` runs one step
    and returns its `Done` and run id; `order` (by index), the order steps are tried in (default:
    theirs). Returns them in the steps' order."""
    done: dict[int, tuple[Done, str]] = {}
    left = list(order) if order is not None else list(range(len(steps)))
    running: dict[Future, int] = {}
    with ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix="step") as pool:
        while left or running:
            for i in startable(steps, waits, parallel, left, done.keys(), running.values()):
                left.remove(i)
                if progress is not None:
                    progress.begin(steps[i].label)
                running[pool.submit(execute, steps[i])] = i
            if not running:
                raise RuntimeError(f"steps waiting for steps that never run: {[steps[i].label for i in left]}")
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                i = running.pop(future)
                done[i] = future.result()
                if progress is not None:
                    progress.finish(steps[i].label)
    ordered = [done[i] for i in range(len(steps))]
    return [d for d, _ in ordered], [r for _, r in ordered]


def startable(steps: Sequence[Step], waits: Sequence[frozenset[int]], parallel: int, left: Sequence[int],
              ended: Collection[int], running: Collection[int]) -> list[int]:
    """Of the steps not yet started (`left`, by index, in order), those `run_steps` starts now,
    with `ended` and `running` as they are: each whose steps it waits for have all ended, in order,
    while fewer than `parallel` run, and an items step only while no other items step runs."""
    room, ended = max(1, parallel) - len(running), set(ended)
    building = any(stage_of(steps[i]) == "items" for i in running)
    out: list[int] = []
    for i in left:
        if len(out) >= room:
            break
        if not waits[i] <= ended:
            continue
        if stage_of(steps[i]) == "items":
            if building:
                continue
            building = True
        out.append(i)
    return out


def chain_length(steps: Sequence[Step], waits: Sequence[frozenset[int]], parallel: int) -> int:
    """How many steps run one after another when `run_steps` runs `steps` and every step takes the
    same time: the runs on the critical path (the rest run beside them). With one dataset: the
    items (the probe beside them), its slices, the metrics, the summary: 4."""
    left, ended, rounds = list(range(len(steps))), set(), 0
    while left:
        now = startable(steps, waits, parallel, left, ended, ())  # they all end together
        if not now:
            raise RuntimeError(f"steps waiting for steps that never run: {[steps[i].label for i in left]}")
        for i in now:
            left.remove(i)
        ended |= set(now)
        rounds += 1
    return rounds


def _execute(defs: dg.Definitions, instance: dg.DagsterInstance, step: Step, config, verbose: bool,
             wh: Warehouse, digest: str, recorder: ThreadPoolExecutor) -> tuple[Done, str]:
    """One step as one run of its job, in this thread; its calls counted by its run id; what it ran
    with recorded by `recorder` (`runner.up_to_date`): up to date next time only if it succeeded
    with no failed call or failed ERROR check, and not as a batch export."""
    import dagster as dg

    t0, started = time.monotonic(), datetime.now(UTC).replace(tzinfo=None)
    result = defs.resolve_job_def(step.job).execute_in_process(
        instance=instance, partition_key=step.partition, raise_on_error=False,
        tags=run_tags(step, config), run_config=None if verbose else QUIET)
    evals = result.get_asset_check_evaluations()
    done = Done(step, result.success, time.monotonic() - t0, TOTALS.of(result.run_id),
                [e.check_name for e in evals if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR],
                [e.check_name for e in evals if not e.passed and e.severity == dg.AssetCheckSeverity.WARN], t0)
    if not result.success:
        sys.stderr.write(f"\nFAILED: {step.label} (run {result.run_id[:8]}): {_failure(result, wh)}\n")
    ok = up_to_date.ended_ok(result.success, done.calls[2], done.failed_checks, bool(os.environ.get(EXPORT_ENV)))
    finished = datetime.now(UTC).replace(tzinfo=None)

    def record() -> None:
        try:
            step_records.record(wh, step, digest, ok, result.run_id, started, finished)
        except Exception as exc:  # the step stands; without its record it only runs again next time
            sys.stderr.write(f"\n{step.label}: not recorded in {step_records.TABLE} ({type(exc).__name__}: {exc}); "
                             "the next run runs it again\n")

    recorder.submit(record)
    return done, result.run_id


def _import_batches(files: list[str]) -> int:
    """`--import-batch`: each file read into the ledger, or refused whole with its bad lines; lines that
    are no result (not JSON, not UTF-8) are named and skipped, and the exit status is 1."""
    from configuration import ConfigError, load_config
    from llm_calls import ModelRegistry
    from reporting import cost

    settle_heap()

    try:
        config = load_config()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    wh = open_warehouse(config)
    status = 0
    paths: list[Path] = []
    for name in files:  # a folder: every .jsonl output file in it, in name order
        p = Path(name)
        if p.is_dir():
            found = sorted(x for x in p.glob("*.jsonl") if x.is_file())
            if not found:
                print(f"{p}: a folder with no .jsonl file in it", file=sys.stderr)
                status = 1
            paths += found
        else:
            paths.append(p)
    run_ids: list[str] = []
    with ModelRegistry(config) as registry:  # identities only: no endpoint is called, no server started
        for name in paths:
            try:
                report = import_file(wh, registry, Path(name))
                print(report.line())
                for line in report.unreadable[:20]:  # skipped, their requests pending: said, and the exit says so
                    print(f"unreadable, skipped: {line}", file=sys.stderr)
                if report.unreadable:
                    status = 1
                paid = cost.spent(config, wh, [report.run_id])
                if paid:
                    print(paid.replace("Spent by this run", "Results read"))
                run_ids.append(report.run_id)
            except BatchImportError as exc:
                print(exc, file=sys.stderr)
                status = 1
    if len(run_ids) > 1:
        total = cost.spent(config, wh, run_ids)
        if total:
            print(total.replace("Spent by this run", f"Results read from the {len(run_ids)} files in total"))
    return status


def _failure(result: dg.ExecuteInProcessResult, wh: Warehouse) -> str:
    """Why a step failed, in one line: the failing checks and the first failed call's error, or the
    step's own error."""
    import dagster as dg

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


def _unusable(wh: Warehouse) -> str | None:
    """Why the warehouse cannot be used at all (a file of a newer DuckDB, an unreachable lake), said
    once before any step instead of by every step; None when it can."""
    try:
        if wh.exists():
            with wh.connect(read_only=True):
                pass
    except (WarehouseVersionError, LakeError) as exc:
        return str(exc)
    return None


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


def _plan(args: argparse.Namespace, steps: list[Step], cfg) -> int:
    """Print the capacity plan (no asset runs; calls only the latency probes it needs)."""
    import dagster as dg

    from reporting import cost, plan

    settle_heap()
    wh = open_warehouse(cfg)
    lines = plan.plan_lines(cfg, wh, args.select, args.partition, args.model)
    runs = None
    if (args.partition or args.model) and os.environ.get("DAGSTER_HOME"):
        with dg.DagsterInstance.from_config(os.environ["DAGSTER_HOME"]) as instance:
            runs = plan.selected_runs(instance, args.partition, args.model)
    answered = plan.stored_calls(cfg, wh, runs)
    rows = plan.with_cache(lines, answered)
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
    parallel = 1 if args.export_batch else args.parallel
    skip = up_to_date.skipped(steps, wh, up_to_date.inputs_digest(cfg), args.all or bool(args.export_batch))
    running = [s for i, s in enumerate(steps) if i not in skip]
    text, steps_s = _overhead(len(running), chain_length(running, waits_for(running), parallel), len(skip))
    # How often replies take the bounded branches is a property of the steps, not of the runs the
    # selection would find cached: a --model or --partition plan rates them on every stored run.
    rates = plan.branch_rates(rows, answered if runs is None else plan.stored_calls(cfg, wh))
    # the calls of steps up to date are not read again: no client time where none runs (with some up
    # to date, their cached calls are counted: an upper bound)
    client = plan.client_cpu(wh, command_records.load_now(), usable_cores()) if running else None
    print(plan.render(cfg, rows, latency, by_step, text, rates, steps_s, client))
    estimates = cost.estimates(cfg, wh, plan.query_of(wh), {(r.line.model, r.line.purpose) for r in rows})
    print(cost.render(cfg, cost.step_costs(cfg, rows, estimates)))
    batched = sorted({r.line.model for r in rows if cfg.model(r.line.model).batch is not None})
    if batched:
        print(f"Batch mode for {', '.join(batched)}: their time is the provider's or the cluster's (each turn of a "
              "step waits for its batch, up to its completion_window), not the waves above.")
    for line in left_out_at_demo(cfg):
        print(f"Left out at demo scale: {line}")
    return 0


def _overhead(steps: int, chain: int, skipped: int = 0) -> tuple[str, float | None]:
    """The run's own time beside its calls, as a line of the plan and in seconds (None when not
    measured): each of its `steps` that will run is a Dagster run (created, started, its events
    written), and `chain` of them run one after another as `run_steps` schedules them
    (`chain_length`); the others run beside those and the calls; the `skipped` steps are up to
    date (`runner.up_to_date`) and cost nothing. A run's time is measured from the instance's
    earlier runs of steps that call no model."""
    import statistics

    import dagster as dg

    home = os.environ.get("DAGSTER_HOME")
    seconds = []
    fresh = f" ({skipped} more up to date, not run: --all runs them)" if skipped else ""
    if not steps:
        return f"Besides the calls: no step to run{fresh}; the command's own start.", 0.0
    runs = f"{steps} steps, each a Dagster run, {chain} of them one after another{fresh}"
    if home:
        try:
            with dg.DagsterInstance.from_config(home) as instance:
                for rec in instance.get_run_records(limit=200):
                    if rec.dagster_run.job_name.startswith("score_") and rec.start_time and rec.end_time:
                        seconds.append(rec.end_time - rec.start_time)
        except Exception as exc:  # the plan is an estimate: an unreadable instance costs only this line
            return f"Besides the calls: {runs} (instance not read: {exc}).", None
    if not seconds:
        return (f"Besides the calls: {runs}, each with its own start-up time (not measured: no earlier runs "
                "in this instance), and the command's own start."), None
    each = statistics.median(seconds)
    return (f"Besides the calls: {runs}; a step that calls no model took {each:.1f} s (median of {len(seconds)} "
            f"earlier runs): about {clock(chain * each)} more, and the command's own start."), chain * each


def exit_fast(code: int) -> None:
    """End this command's process once its work is done, without the interpreter's teardown.

    After a run the process holds Dagster, DuckDB, pyarrow, polars, openai and matplotlib: about
    1,500 modules and the objects they made. Python's finalisation frees all of them one by one,
    which took 1.1-1.4 s after a cached WakenLLM FLD run on a 2-core machine (from `main`'s return
    to the process's end; 0.05 s with this) and does nothing for a command whose files are closed.
    Everything a normal exit does first still happens, in the same order: the threads that are
    not daemons are joined (`threading._shutdown`, which also stops idle thread pools), every atexit
    handler runs (logging's flush, Dagster's and filelock's clean-ups), stdout and stderr are
    flushed; only then `os._exit`. Where either hook is missing (another Python), a normal exit."""
    import atexit
    import threading

    shutdown, run_exitfuncs = getattr(threading, "_shutdown", None), getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exitfuncs is None:
        sys.exit(code)
    shutdown()
    run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing left to say
            pass
    os._exit(code)


def run_as_main() -> None:
    """The command as a program (`python -m assets.materialize_all`, `python -m runner.command`):
    the cyclic collector off while it imports and plans (`settle_heap` turns it on again), and
    the process ended by `exit_fast`. A module that hands the command over calls this, not
    `sys.exit(main())`: that would leave both out, 1.1-2.2 s of a cached IB partition's rerun
    (2 cores)."""
    gc.disable()
    exit_fast(main())


if __name__ == "__main__":
    run_as_main()
