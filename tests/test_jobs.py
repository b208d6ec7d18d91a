"""The named jobs and the steps of the main command: order, selection by family, partition and
model, and evaluating an added model without rebuilding items."""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import pytest

from assets.definitions import build_definitions
from assets.jobs import FAMILIES, Step, job_names, waits_for
from configuration import CONFIG_ENV_VAR, ConfigError
from llm_calls.stub_server import StubServer
from reporting.summary import Done
from runner.command import chain_length, raw_assets, run_steps
from runner.steps import SelectionError, plan_steps
from tests.conftest import stub_config
from warehouse import Warehouse

IB = {"datasets": {"fld": {"form": "judging", "generator": "fld", "count": {"demo": 2, "paper": 2}},
                   "arithmetic": {"form": "single", "generator": "arithmetic", "count": {"demo": 2, "paper": 2}}},
      "settings": ["vanilla"]}
WAKEN = {"datasets": {"fld": {"kind": "fld", "form": "fact", "generator": {"depth": [1, 2], "max_distractors": 2},
                              "count": {"demo": 2, "paper": 2}}}}


def two_models(stub, tmp_path, **overrides):
    models = {name: {"base_url": stub.base_url, "model": f"stub-{name}"} for name in ("alpha", "beta")}
    return stub_config(stub, tmp_path, models=models, evaluate=["alpha", "beta"], judge="alpha", **overrides)


def assets_of(cfg):
    return {k.path[-1]: a for a in raw_assets(build_definitions(cfg.source)) for k in a.keys}


def test_the_steps_run_the_probe_then_each_family_items_slices_metrics_then_the_summary(stub, tmp_path):
    cfg = two_models(stub, tmp_path, ib=IB)
    steps = plan_steps(cfg)
    assert steps[0].job == "probe_models" and steps[-1].job == "summarise"
    assert steps[-1].assets == ("llm_call_summary", "model_report")
    families = [s.family for s in steps[1:-1]]
    assert list(dict.fromkeys(families)) == list(FAMILIES)  # each family's steps together, in order
    ib = [(s.job, s.partition) for s in steps if s.family == "ib"]
    assert ib == [("build_ib", "fld"), ("build_ib", "arithmetic"), ("build_ib", "miscellany"),
                  ("evaluate_ib", "fld|alpha"), ("evaluate_ib", "fld|beta"),
                  ("evaluate_ib", "arithmetic|alpha"), ("evaluate_ib", "arithmetic|beta"),
                  ("evaluate_ib", "miscellany|alpha"), ("evaluate_ib", "miscellany|beta"), ("score_ib", None)]
    s1 = [(s.job, s.partition) for s in steps if s.family == "s1"]
    assert s1 == [("build_s1", None), ("evaluate_s1", "alpha"), ("evaluate_s1", "beta"), ("score_s1", None)]
    assert {s.job for s in steps} <= set(job_names())


@pytest.mark.slow
@pytest.mark.parametrize("scale", ["demo", "paper"])
def test_the_steps_partitions_are_the_asset_definitions_partitions_in_their_order(stub, tmp_path, scale):
    """The command plans its steps from the configuration without importing Dagster
    (`Config.item_partitions`, `assets.partitions.slice_keys`); the asset definitions read the same
    keys: every family's items and slices, in Dagster's order, at either scale."""
    cfg = two_models(stub, tmp_path, ib=IB, waken=WAKEN, scale=scale, muso={"demo_levels": 2})
    assets, steps = assets_of(cfg), plan_steps(cfg)
    for family, names in FAMILIES.items():
        for name in names[:2]:
            pdef = assets[name].partitions_def
            assert [s.partition for s in steps if s.assets == (name,)] == (
                pdef.get_partition_keys() if pdef is not None else [None]), (family, name)
    levels = [s.partition for s in steps if s.assets == ("muso_instances",)]
    assert len(levels) == (4 if scale == "demo" else 17) and levels[:2] == ["timetabling_1-50", "timetabling_51-100"]


def test_each_step_waits_only_for_the_steps_whose_assets_it_reads(stub, tmp_path):
    cfg = two_models(stub, tmp_path, ib=IB)
    steps = plan_steps(cfg, ["ib", "s1"])
    waits = waits_for(steps)
    at = {(s.job, s.partition): i for i, s in enumerate(steps)}

    def named(indexes):
        return {(steps[j].job, steps[j].partition) for j in indexes}

    assert waits[at[("probe_models", None)]] == frozenset()
    assert all(not waits[i] for i, s in enumerate(steps) if s.job.startswith("build_"))
    # a slice reads its dataset's items, and no other slice
    assert named(waits[at[("evaluate_ib", "arithmetic|beta")]]) == {("build_ib", "arithmetic")}
    assert named(waits[at[("evaluate_s1", "beta")]]) == {("build_s1", None)}  # one item set
    assert named(waits[at[("score_ib", None)]]) == {(s.job, s.partition) for s in steps
                                                      if s.family == "ib" and s.job != "score_ib"}
    assert waits[at[("summarise", None)]] == frozenset(range(len(steps) - 1))


def _fake_steps():
    return [Step("probe_models", "", ("models",), None),
            Step("build_ib", "ib", ("ib_items",), "a", "a"), Step("build_ib", "ib", ("ib_items",), "b", "b"),
            Step("evaluate_ib", "ib", ("ib_responses",), "a|m", "a", "m"),
            Step("evaluate_ib", "ib", ("ib_responses",), "b|m", "b", "m"),
            Step("score_ib", "ib", ("ib_metrics",), None), Step("summarise", "", ("llm_call_summary",), None)]


def test_steps_start_once_what_they_read_has_ended_slices_at_once_items_one_at_a_time():
    steps = _fake_steps()
    lock = threading.Lock()
    running: set[str] = set()
    seen: dict[str, tuple[set[str], set[str]]] = {}  # label -> (running when it started, ended before it)
    ended: set[str] = set()
    slices_together = threading.Barrier(2, timeout=10)  # broken unless both slices run at once

    def execute(step):
        with lock:
            seen[step.label] = (set(running), set(ended))
            running.add(step.label)
        if step.job == "evaluate_ib":
            slices_together.wait()
        time.sleep(0.02)
        with lock:
            running.discard(step.label)
            ended.add(step.label)
        return Done(step, step.partition != "a", 0.02, (0, 0, 0)), f"run {step.label}"

    done, runs = run_steps(steps, waits_for(steps), 8, execute)
    assert [d.step for d in done] == steps and runs == [f"run {s.label}" for s in steps]  # the plan's order
    assert not any(label.startswith("ib_items") for label in seen["ib_items [b]"][0])  # items one at a time
    assert "ib_items [a]" in seen["ib_responses [a|m]"][1]  # a failed step still lets its readers run
    assert {"ib_responses [a|m]", "ib_responses [b|m]"} <= seen["ib_metrics"][1]
    assert seen["llm_call_summary"][1] == {s.label for s in steps[:-1]}


def test_the_first_figure_is_drawn_once_the_process_waits_on_an_endpoint_and_never_after_the_run_ended(monkeypatch):
    """The run command draws a first figure while it waits on the endpoint (`TOTALS.waiting`: set
    once a model's whole concurrency is out, `tests/test_flows.py`): not while nothing, only the
    cache or a model has answered (a call answered early is the models probe's, beside the items),
    once the process waits, and not at all when the run ends first."""
    from llm_calls.totals import TOTALS
    from reporting import figures
    from runner import command as materialize_all

    drawn, result = [], []
    monkeypatch.setattr(figures, "warm_up", lambda: drawn.append(TOTALS.answered))
    TOTALS.reset()
    ended = threading.Event()
    waiting = threading.Thread(target=lambda: result.append(materialize_all.warm_figures_while_waiting(ended, 0.01)))
    waiting.start()
    try:
        time.sleep(0.2)
        assert drawn == []
        TOTALS.add("run", cached=5)
        time.sleep(0.2)
        assert drawn == [] and not TOTALS.waiting.is_set()
        TOTALS.add("run", answered=1)
        time.sleep(0.2)
        assert drawn == [] and not TOTALS.waiting.is_set()
        TOTALS.waiting.set()  # the whole concurrency out
        waiting.join(timeout=10)
        assert drawn == [1] and result == [True]
        TOTALS.reset()  # a new run: not waiting until its own calls are out
        assert not TOTALS.waiting.is_set()
        ended.set()
        assert materialize_all.warm_figures_while_waiting(ended, 0.01) is False and drawn == [1]
    finally:
        ended.set()
        TOTALS.reset()


def test_a_run_that_writes_releases_imports_their_libraries_while_it_waits_and_one_that_does_not_leaves_them(monkeypatch):
    """With `writes_releases` (a score step will write a family's release), the wait on the endpoint also
    imports what a release is written with (`releases.warm_up`), after the first figure."""
    import releases
    from llm_calls.totals import TOTALS
    from reporting import figures
    from runner import command as materialize_all

    done = []
    monkeypatch.setattr(figures, "warm_up", lambda: done.append("figure"))
    monkeypatch.setattr(releases, "warm_up", lambda: done.append("release"))
    ended = threading.Event()
    TOTALS.reset()
    TOTALS.waiting.set()
    try:
        assert materialize_all.warm_figures_while_waiting(ended, 0.01, writes_releases=True) is True
        assert done == ["figure", "release"]
        assert materialize_all.warm_figures_while_waiting(ended, 0.01) is True
        assert done == ["figure", "release", "figure"]
    finally:
        ended.set()
        TOTALS.reset()


def test_the_release_warm_up_imports_the_card_and_croissant_libraries():
    code = ("import sys, releases; before = 'mlcroissant' in sys.modules or 'datasets' in sys.modules; "
            "releases.warm_up(); print(before, 'mlcroissant' in sys.modules and 'datasets' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.stdout.split() == ["False", "True"]


def test_the_commands_heap_is_frozen_once_its_code_is_loaded_and_a_process_with_the_collector_on_is_left_alone():
    """`settle_heap`: in the command's process (its `__main__` turns the collector off while it
    imports) the objects alive move to the permanent generation and the collector is on again;
    where the collector is on (a test calling `main`), nothing is frozen."""
    import gc

    from runner import command as materialize_all

    before = gc.get_freeze_count()
    materialize_all.settle_heap()
    assert gc.isenabled() and gc.get_freeze_count() == before
    gc.disable()
    try:
        kept = [[] for _ in range(1000)]  # alive now: frozen with the rest
        materialize_all.settle_heap()
        assert gc.isenabled() and gc.get_freeze_count() >= before + len(kept)
    finally:
        gc.unfreeze()
        gc.enable()


def test_one_step_at_a_time_runs_them_in_the_plans_order():
    steps = _fake_steps()
    order: list[str] = []

    def execute(step):
        order.append(step.label)
        return Done(step, True, 0.0, (0, 0, 0)), "run"

    run_steps(steps, waits_for(steps), 1, execute)
    assert order == [s.label for s in steps]


def test_the_run_builds_musobench_s_levels_with_the_tasks_alternating_and_everything_else_in_the_plans_order(
        stub, tmp_path):
    """`start_order` (what `run_steps` tries first) changes only the MuSoBench levels: they take one
    another's places so that TimeTabling and SubsetSum alternate, each task's levels still in their
    bins' order; the worker that generates them ahead is given them in that order."""
    from runner.command import _to_build_ahead, start_order

    cfg = two_models(stub, tmp_path, ib=IB, waken=WAKEN, scale="paper")
    steps = plan_steps(cfg)
    order = start_order(steps)
    assert sorted(order) == list(range(len(steps)))
    levels = [steps[i].partition for i in order if steps[i].assets == ("muso_instances",)]
    assert levels[:5] == ["timetabling_1-50", "subsetsum_1-50", "timetabling_51-100", "subsetsum_51-100",
                          "timetabling_101-150"]
    assert levels[-2:] == ["timetabling_451-500", "subsetsum_301+"]
    for task in ("timetabling", "subsetsum"):
        assert [k for k in levels if k.startswith(task)] == [
            s.partition for s in steps if s.assets == ("muso_instances",) and s.partition.startswith(task)]
    moved = {i for i, j in enumerate(order) if i != j}
    assert moved and all(steps[i].assets == ("muso_instances",) for i in moved)
    assert _to_build_ahead(cfg, steps, set()) == {"muso": levels}
    skip = {steps.index(next(s for s in steps if s.partition == "subsetsum_1-50"))}
    assert _to_build_ahead(cfg, steps, skip) == {"muso": [k for k in levels if k != "subsetsum_1-50"]}

    ran: list[str] = []

    def execute(step):
        ran.append(step.partition)
        return Done(step, True, 0.0, (0, 0, 0)), "run"

    done, _ = run_steps(steps, waits_for(steps), 1, execute, order=order)
    assert [k for k in ran if k in set(levels)] == levels and [d.step for d in done] == steps


def test_the_plans_chain_of_runs_follows_the_schedule_run_steps_keeps():
    steps = _fake_steps()
    # items a (the probe beside it), items b (slice a beside it), slice b, the metrics, the summary
    assert chain_length(steps, waits_for(steps), 8) == 5
    assert chain_length(steps, waits_for(steps), 1) == len(steps)  # one at a time: every run in turn
    one = [steps[0], steps[1], steps[3], steps[5], steps[6]]  # one dataset
    assert chain_length(one, waits_for(one), 8) == 4
    # two items steps never share a round, however many may run at once
    only_items = [steps[1], steps[2]]
    assert chain_length(only_items, waits_for(only_items), 8) == 2


def test_the_readmes_name_of_the_command_runs_it_with_the_collector_off_and_ends_it_through_exit_fast(tmp_path):
    """The README's `python -m assets.materialize_all` is the program `runner/command.py` is:
    `main` runs with the cyclic collector off (`settle_heap` turns it on once the code is loaded)
    and its status leaves by `exit_fast` (a handed-over `sys.exit(main())` lost both)."""
    module = "assets.materialize_all"
    script = tmp_path / "as_main.py"
    script.write_text(f"""
import gc, runpy, sys
import runner.command as command
seen = {{}}
def main(argv=None):
    seen["collector on"] = gc.isenabled()
    return 5
def exit_fast(code):
    print(seen["collector on"], code)
    sys.stdout.flush()
    raise SystemExit(0)
command.main, command.exit_fast = main, exit_fast
runpy.run_module({module!r}, run_name="__main__", alter_sys=True)
print("not through exit_fast")
""")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "5"]


def test_the_commands_exit_joins_its_threads_runs_the_atexit_handlers_and_flushes_its_output(tmp_path):
    """`exit_fast` skips only the interpreter's teardown: a thread still working finishes, the
    atexit handlers run, buffered output arrives, and the exit status is the command's."""
    script = tmp_path / "ends.py"
    script.write_text(f"""
import atexit, sys, threading, time
from runner.command import exit_fast
out = {str(tmp_path)!r}
atexit.register(lambda: open(out + "/atexit", "w").write("ran"))
def late():
    time.sleep(0.3)
    open(out + "/thread", "w").write("done")
threading.Thread(target=late).start()
sys.stdout.write("no newline, still buffered")
exit_fast(3)
print("never")
""")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout buffered, as on a pipe
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 3
    assert done.stdout == "no newline, still buffered"
    assert (tmp_path / "thread").read_text() == "done" and (tmp_path / "atexit").read_text() == "ran"


@pytest.mark.slow
def test_the_commands_slices_run_at_once_sharing_the_models_concurrency(tmp_path):
    """Two models' slices of one dataset: both are sent requests before the first slice ends
    (they used to run one after the other), and each step's calls are counted by its own run."""
    probe = "Reply with OK."

    def slow(body):
        if body["messages"][-1]["content"] != probe:
            time.sleep(1.5)
        return "Answer: 1"

    with StubServer(responder=slow) as stub:
        home = tmp_path / "home"
        home.mkdir()
        models = {name: {"base_url": stub.base_url, "model": name, "concurrency": 8} for name in ("alpha", "beta")}
        cfg = stub_config(stub, tmp_path, ib={**IB, "datasets": {"fld": IB["datasets"]["fld"]}}, models=models,
                          evaluate=["alpha", "beta"], judge="alpha", probe_prompt=probe, ledger={"timeout_s": 20})
        env = {"PATH": "/usr/bin:/bin", CONFIG_ENV_VAR: cfg.source, "DAGSTER_HOME": str(home)}
        done = subprocess.run([sys.executable, "-m", "assets.materialize_all", "--select", "ib"],
                              cwd=Path(__file__).resolve().parent.parent, env=env, capture_output=True, text=True,
                              timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    wh = Warehouse(cfg.warehouse_path())
    spans = wh.rows("SELECT model, run_id, count(*) AS n, min(finished_at - to_seconds(latency_s)) AS sent, "
                    "max(finished_at) AS answered FROM llm.calls WHERE purpose NOT LIKE 'models.%' "
                    "GROUP BY model, run_id ORDER BY sent")
    assert [r["model"] for r in spans] in (["alpha", "beta"], ["beta", "alpha"])  # one run per slice
    first, second = spans
    assert second["sent"] < first["answered"]  # the second slice did not wait for the first
    with dg.DagsterInstance.from_config(str(home)) as instance:
        slices = {r.tags["benchsmith/partition"]: r.run_id for r in instance.get_runs()
                  if r.job_name == "evaluate_ib" and r.tags["benchsmith/partition"].startswith("fld|")}
    assert {f"fld|{r['model']}": r["run_id"] for r in spans} == slices  # (the miscellany's slices ask nothing)
    # the summary's row counts the family's calls once: each step's by its own run, not by what the
    # process made while it ran (the other slice's calls too)
    row = next(line for line in done.stdout.splitlines() if line.startswith("Instruction Boundary"))
    cached, new = row.split()[3:5]
    assert (int(cached), int(new)) == (0, sum(r["n"] for r in spans)), row


def test_selection_by_family_partition_and_model(stub, tmp_path):
    cfg = two_models(stub, tmp_path, ib=IB, waken=WAKEN)
    one = plan_steps(cfg, ["waken"], ["fld"])
    assert [(s.job, s.partition) for s in one] == [
        ("probe_models", None), ("build_waken", "fld"), ("evaluate_waken", "fld|alpha"),
        ("evaluate_waken", "fld|beta"), ("score_waken", None), ("summarise", None)]
    # a partition without a family: every family that has it (S1-Bench and MuSoBench have no `fld`)
    assert {s.family for s in plan_steps(cfg, None, ["fld"])} == {"", "waken", "ib"}
    # one slice
    assert [s.partition for s in plan_steps(cfg, ["ib"], ["fld|beta"]) if s.partition] == ["fld|beta"]
    # an added model: its slices only; items already built are not rebuilt, missing ones are
    built = {"ib_items": {"fld", "arithmetic"}, "waken_items": {"fld"}, "muso_instances": set(), "s1_items": {""}}
    steps = plan_steps(cfg, ["ib", "s1"], None, ["beta"], built)
    assert [(s.job, s.partition) for s in steps if s.family] == [
        ("build_ib", "miscellany"), ("evaluate_ib", "fld|beta"), ("evaluate_ib", "arithmetic|beta"),
        ("evaluate_ib", "miscellany|beta"), ("score_ib", None), ("evaluate_s1", "beta"), ("score_s1", None)]


@pytest.mark.parametrize("args, message", [
    ((["nope"], None, None), "--select 'nope': not a family"),
    ((["ib"], ["folio"], None), "--partition 'folio': no such dataset, level or slice in ib"),
    ((None, None, ["gamma"]), "--model 'gamma': not an evaluated model; add it to `evaluate`"),
])
@pytest.mark.slow
def test_a_selection_that_names_nothing_is_refused(stub, tmp_path, args, message):
    cfg = two_models(stub, tmp_path, ib=IB)
    with pytest.raises(SelectionError, match=message.replace("(", r"\(").replace("|", r"\|")):
        plan_steps(cfg, *args)


def ib_command(stub, tmp_path):
    """A configuration with model `alpha` on `stub`, and a function running the command on it for IB."""
    root = Path(__file__).resolve().parent.parent
    home = tmp_path / "home"
    home.mkdir()
    cfg = stub_config(stub, tmp_path, ib=IB, models={"alpha": {"base_url": stub.base_url, "model": "a"}},
                      evaluate=["alpha"], judge="alpha")

    def run(*args):
        env = {"PATH": "/usr/bin:/bin", CONFIG_ENV_VAR: cfg.source, "DAGSTER_HOME": str(home)}
        return subprocess.run([sys.executable, "-m", "assets.materialize_all", "--select", "ib", *args],
                              cwd=root, env=env, capture_output=True, text=True, timeout=300)

    return cfg, home, run


@pytest.mark.slow
def test_adding_a_model_evaluates_only_its_slices_and_the_first_models_rows_stay(tmp_path):
    """The README recipe: evaluate one model, add a second to `evaluate`, run `--model` for it."""
    with StubServer(responder=lambda body: "Answer: 1") as stub:
        cfg, home, run = ib_command(stub, tmp_path)
        first = run()
        assert first.returncode == 0, first.stderr[-2000:]
        wh = Warehouse(cfg.warehouse_path())
        alpha_before = wh.rows("SELECT * FROM ib.responses WHERE model = 'alpha' ORDER BY ALL")
        # a second model, added to the configuration
        text = Path(cfg.source).read_text().replace("evaluate:\n- alpha", "evaluate:\n- alpha\n- beta")
        text = text.replace("models:\n", f"models:\n  beta:\n    base_url: {stub.base_url}\n    model: b\n", 1)
        Path(cfg.source).write_text(text)
        second = run("--model", "beta")
    assert second.returncode == 0, second.stderr[-2000:]
    out = second.stdout
    assert "ib_responses [fld|beta]" in out and "|alpha]" not in out and "ib_items [" not in out
    assert wh.rows("SELECT * FROM ib.responses WHERE model = 'alpha' ORDER BY ALL") == alpha_before
    assert wh.scalar("SELECT count(DISTINCT model) FROM ib.metrics") == 2  # the metrics cover both
    with dg.DagsterInstance.from_config(str(home)) as instance:
        jobs = [r.job_name for r in instance.get_runs()]
        slices = instance.get_materialized_partitions(dg.AssetKey("ib_responses"))
    assert jobs.count("build_ib") == 3 and jobs.count("evaluate_ib") == 6  # 3 items, 3 + 3 slices
    assert {str(k) for k in slices} == {f"{d}|{m}" for d in ("fld", "arithmetic", "miscellany")
                                        for m in ("alpha", "beta")}


def test_the_progress_line_counts_steps_and_calls_and_bounds_the_time_left():
    import io

    from llm_calls.totals import TOTALS
    from reporting.summary import Progress

    out = io.StringIO()  # not a terminal: a line per step, none in between
    TOTALS.reset()
    progress = Progress(4, (100, 80, 300), stream=out, every_s=3600)
    progress.t0 -= 60  # a minute in
    progress.begin("ib_items [fld]")
    TOTALS.cached, TOTALS.answered, TOTALS.failed = 20, 15, 5
    progress.finish()
    progress.begin("ib_responses [fld|m]")
    first, second = out.getvalue().splitlines()
    assert first.startswith("[0/4 steps] calls 0/100+<=300 (0 cached, 0 failed) | 1:00 elapsed, time left: measuring")
    # 20 new calls in a minute, 60 fixed ones still to make: at least 3 minutes
    assert second.startswith("[1/4 steps] calls 40/100+<=300 (20 cached, 5 failed) | 1:00 elapsed, >=3:00 left")
    assert second.endswith("| ib_responses [fld|m]")
    TOTALS.reset()


def test_the_summary_has_a_row_per_family_the_headline_and_where_to_look(tmp_path):
    from assets.jobs import Step
    from reporting.summary import Done, summary
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.upsert("ib.items", [{"dataset": "fld", "item_id": f"i{k}", "base_id": f"b{k}", "form": "judging",
                            "label_type": "tense", "variant": "complete", "options": "[]", "gold": "[1]",
                            "n_options": 2, "number_scheme": "arabic", "question": "q", "origin": "test",
                            "extra": "{}", "dataset_seed": 1, "items_version": "ib-2"} for k in range(3)])
    wh.upsert("ib.metrics", [{"model": "m", "setting": "vanilla", "form": "judging", "metric": "Acc", "category": "-",
                              "value": 0.5, "numerator": 1, "denominator": 2, "n_failed": 0}])
    done = [Done(Step("probe_models", "", ("models",), None), True, 2.0, (0, 1, 0)),
            Done(Step("build_ib", "ib", ("ib_items",), "fld", "fld"), True, 1.0, (0, 0, 0)),
            Done(Step("evaluate_ib", "ib", ("ib_responses",), "fld|m", "fld", "m"), False, 30.0, (4, 10, 2),
                 ["failed_calls"], ["truncated_replies"])]
    text = summary(done, wh, type("C", (), {"evaluate": ["m"], "scale": "paper"})(),
                   str(tmp_path / "wh.duckdb"))
    rows = {line.split("  ")[0].strip(): line for line in text.splitlines() if line.startswith(("Instruction", "total"))}
    ib = rows["Instruction Boundary"].split()
    assert ib[2:7] == ["3", "4", "12", "2", "0:31"]  # items, cached, new, failed, time
    assert "FAILED: ib_responses [fld|m] (checks: failed_calls) (warnings: truncated_replies)" in rows["Instruction Boundary"]
    assert "Instruction Boundary [m]: vanilla Acc=0.5" in text
    assert "Instruction Boundary [m] vanilla: decided replies" not in text  # no responses stored: no claim
    assert "1 step(s) failed: ib_responses [fld|m]" in text and "reports:" in text


@pytest.mark.slow
def test_model_run_rebuilds_items_the_warehouse_does_not_hold_whatever_the_instance_remembers(tmp_path):
    """Issue 25: with the warehouse file gone, `--model` used to skip the items on the word of Dagster's
    records and end "0 items, 0 calls, ok"; the items are built again when the warehouse lacks them."""
    with StubServer(responder=lambda body: "Answer: 1") as stub:
        cfg, _, run = ib_command(stub, tmp_path)
        assert run().returncode == 0
        for f in Path(cfg.warehouse_path()).parent.glob(Path(cfg.warehouse_path()).name + "*"):
            f.unlink()  # the warehouse is deleted; the instance still remembers the items
        again = run("--model", "alpha")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "ib_items [fld]" in again.stdout
    wh = Warehouse(cfg.warehouse_path())
    assert wh.scalar("SELECT count(*) FROM ib.items") > 0 and wh.scalar("SELECT count(*) FROM ib.responses") > 0


def test_a_warehouse_that_cannot_be_read_ends_the_run_with_one_line_not_a_traceback(stub, monkeypatch, capsys,
                                                                                     tmp_path):
    from runner import command as materialize_all

    def unreadable(*args, **kwargs):
        raise OSError("Permission denied: wh.duckdb")

    monkeypatch.setattr(materialize_all, "summary", unreadable)
    monkeypatch.setattr(materialize_all, "plan_steps", lambda *a, **k: [])
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.setenv(CONFIG_ENV_VAR, str(stub_config(stub, tmp_path).source))
    assert materialize_all.main([]) == 1
    err = capsys.readouterr().err
    assert "no summary: the warehouse" in err and "OSError: Permission denied" in err and "Traceback" not in err


def test_a_ui_launch_of_one_slice_gets_the_tags_the_command_gives_that_step(tmp_path):
    """What the run coordinator adds when the UI submits a run of the implicit asset job: the family,
    the slice, its model, the configuration, and the named job whose step it is; a run of the
    command (already tagged) and a run of several families' assets get nothing."""
    from dagster._core.storage.dagster_run import DagsterRun

    from runner.ui_runs import ui_tags

    with StubServer(responder=lambda body: "Answer: 1") as stub:
        cfg = two_models(stub, tmp_path, ib=IB)

    def run(assets, **tags):
        return DagsterRun(job_name="__ASSET_JOB", asset_selection=frozenset(dg.AssetKey(a) for a in assets),
                          tags=tags)

    slice_run = run(["ib_responses"], **{"dagster/partition": "fld|beta", "dagster/partition/dataset": "fld",
                                         "dagster/partition/model": "beta"})
    assert ui_tags(slice_run, cfg) == {
        "benchsmith/family": "ib", "benchsmith/partition": "fld|beta", "benchsmith/models": "beta",
        "benchsmith/config": cfg.source, "benchsmith/job": "evaluate_ib", "benchsmith/launched": "ui"}
    assert ui_tags(run(["waken_metrics"]), cfg)["benchsmith/models"] == "alpha,beta"
    assert ui_tags(run(["models"]), cfg)["benchsmith/job"] == "probe_models"
    summary = ui_tags(run(["llm_call_summary", "model_report"]), cfg)
    assert summary["benchsmith/job"] == "summarise" and "benchsmith/family" not in summary  # it serves every family
    assert ui_tags(run(["ib_items", "waken_items"]), cfg) == {}
    assert ui_tags(run(["ib_metrics"], **{"benchsmith/family": "ib"}), cfg) == {}


def test_a_level_added_at_demo_scale_is_built_when_named_and_a_refusal_says_how():
    """Issue 50: `--partition` refused an added level without the reason the plan knows, and the way
    out (`demo_levels: null`) built every level."""
    from configuration import parse_config

    bins = {"timetabling": {"bins": [[1, 50], [51, 100], [101, 150]]}, "subsetsum": {"bins": [[1, 50], [51, 100]]}}
    cfg = parse_config({"scale": "demo", "muso": {"demo_levels": 2, **bins}})
    with pytest.raises(SelectionError, match=r"'timetabling_101-150': a configured level the demo scale does not build "
                                             r"\(muso.demo_levels: 2\); build it at demo scale with muso.demo_levels: "
                                             r"\[1, 2, 3\] \(level 3 of its task\)"):
        plan_steps(cfg, ["muso"], ["timetabling_101-150"])
    one_more = parse_config({"scale": "demo", "muso": {"demo_levels": [1, 2, 3], **bins}})
    assert one_more.item_partitions("muso") == ["timetabling_1-50", "timetabling_51-100", "timetabling_101-150",
                                                "subsetsum_1-50", "subsetsum_51-100"]  # that level, no other
    assert "timetabling_101-150" in {s.partition for s in plan_steps(one_more, ["muso"], ["timetabling_101-150"])}
    with pytest.raises(ConfigError, match="levels are numbered from 1"):
        parse_config({"muso": {"demo_levels": [0, 2]}})
