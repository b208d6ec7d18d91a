"""A rerun skips the steps that are up to date (runner/up_to_date.py): the rule on made-up records,
the inputs' digest, and the command itself twice on a stub endpoint."""

import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
import yaml

from assets.definitions import build_definitions
from assets.jobs import Step, waits_for
from configuration import CONFIG_ENV_VAR, load_config
from llm_calls.stub_server import StubServer
from runner import up_to_date
from tests.conftest import stub_config
from warehouse import Warehouse

PROBE = Step("probe_models", "", ("models",), None)
ITEMS = {d: Step("build_ib", "ib", ("ib_items",), d, d) for d in ("fld", "arith")}
SLICE = {d: Step("evaluate_ib", "ib", ("ib_responses",), f"{d}|m", d, "m") for d in ("fld", "arith")}
METRICS = Step("score_ib", "ib", ("ib_metrics",), None)
W_ITEMS = Step("build_waken", "waken", ("waken_items",), "fld", "fld")
W_METRICS = Step("score_waken", "waken", ("waken_metrics",), None)
SUMMARY = Step("summarise", "", ("llm_call_summary", "model_report"), None)
STEPS = [PROBE, ITEMS["fld"], ITEMS["arith"], SLICE["fld"], SLICE["arith"], METRICS, W_ITEMS, W_METRICS, SUMMARY]
T0 = datetime(2026, 12, 1, 12, 0)


def recs(steps=STEPS, digest="d"):
    """A record per step, each started and ended a minute after the one before, all ok on digest `d`."""
    return {s.label: {"step": s.label, "job": s.job, "family": s.family, "partition": s.partition, "base": s.base,
                      "inputs": digest, "ok": True,
                      "started_at": T0 + timedelta(minutes=k), "finished_at": T0 + timedelta(minutes=k, seconds=30)}
            for k, s in enumerate(steps)}


def fresh_labels(steps, records, digest="d"):
    return {steps[i].label for i in up_to_date.fresh(steps, waits_for(steps), records, digest)}


def test_every_step_is_up_to_date_when_each_ran_ok_on_these_inputs_after_what_it_reads():
    assert fresh_labels(STEPS, recs()) == {s.label for s in STEPS}
    assert fresh_labels(STEPS, recs(), digest="other") == set()  # code, configuration or files changed
    assert fresh_labels(STEPS, {}) == set()  # a new warehouse has no records


def test_a_step_not_ok_runs_again_with_what_reads_it_and_the_probe_other_families_stay_skipped():
    records = recs()
    records[SLICE["arith"].label]["ok"] = False  # failed, had a failed call, or was a batch export
    assert fresh_labels(STEPS, records) == {ITEMS["fld"].label, ITEMS["arith"].label, SLICE["fld"].label,
                                            W_ITEMS.label, W_METRICS.label}
    del records[SLICE["arith"].label]  # never recorded (killed, or a run before this table)
    assert SLICE["arith"].label not in fresh_labels(STEPS, records)


def test_only_a_step_that_ended_with_nothing_failed_and_not_as_an_export_is_up_to_date_next_time():
    assert up_to_date.ended_ok(True, 0, [], False)
    assert not up_to_date.ended_ok(False, 0, [], False)  # the run failed
    assert not up_to_date.ended_ok(True, 1, [], False)  # a failed call: the next run asks it again
    assert not up_to_date.ended_ok(True, 0, ["every_model_setting_form"], False)  # shown again, not hidden
    assert not up_to_date.ended_ok(True, 0, [], True)  # a batch export stopped at a turn


def test_a_step_whose_input_ran_again_since_it_started_is_not_up_to_date_whoever_ran_it():
    records = recs()
    # another command rebuilt the fld items after the slice had started: the slice, the metrics, the summary run
    records[ITEMS["fld"].label]["finished_at"] = records[SLICE["fld"].label]["started_at"] + timedelta(seconds=1)
    assert fresh_labels(STEPS, records) == {ITEMS["fld"].label, ITEMS["arith"].label, SLICE["arith"].label,
                                            W_ITEMS.label, W_METRICS.label}
    # a command of one partition: the metrics read every slice of the family, also one not in this command
    only_fld = [PROBE, ITEMS["fld"], SLICE["fld"], METRICS, SUMMARY]
    records = recs()
    records[SLICE["arith"].label]["finished_at"] = records[METRICS.label]["started_at"] + timedelta(seconds=5)
    assert fresh_labels(only_fld, records) == {ITEMS["fld"].label, SLICE["fld"].label}
    # a failed rebuild of the items counts too: it may have written before it failed
    records = recs()
    records[ITEMS["arith"].label].update(ok=False, finished_at=T0 + timedelta(hours=1))
    assert fresh_labels(only_fld, records) == {ITEMS["fld"].label, SLICE["fld"].label}


def test_the_inputs_digest_follows_the_configuration_and_the_files_it_names_not_the_outputs(tmp_path):
    data = tmp_path / "folio.jsonl"
    data.write_text('{"a": 1}\n')
    path = tmp_path / "benchsmith.yaml"
    base = {"warehouse": {"path": str(tmp_path / "wh.duckdb")}, "release": {"dir": str(tmp_path / "out")},
            "ib": {"datasets": {"folio": {"form": "judging", "count": {"demo": 2, "paper": 2},
                                         "source": {"kind": "folio", "path": "folio.jsonl", "split": "train"}}}}}
    path.write_text(yaml.safe_dump(base))
    first = up_to_date.inputs_digest(load_config(path))
    assert up_to_date.inputs_digest(load_config(path)) == first
    (tmp_path / "wh.duckdb").write_bytes(b"x")  # what a run writes is no input
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "release.json").write_text("{}")
    assert up_to_date.inputs_digest(load_config(path)) == first
    assert up_to_date.inputs_digest(load_config(path), export=True) != first
    data.write_text('{"a": 2}\n{"b": 3}\n')  # the named dataset file changed
    changed = up_to_date.inputs_digest(load_config(path))
    assert changed != first
    path.write_text(yaml.safe_dump({**base, "seed": 7}))  # the configuration changed
    assert up_to_date.inputs_digest(load_config(path)) not in (first, changed)


@pytest.mark.slow
def test_the_inputs_digest_reads_the_project_s_packages_wherever_the_command_starts(tmp_path):
    """A process started outside the project's root finds another package named like one of the
    project's first on its path (PyPI's `validators` is installed beside it): the digest still
    reads the project's own files, so the same command gives the same digest from any folder."""
    root = Path(__file__).resolve().parent.parent
    shadow = tmp_path / "shadow" / "validators"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("# another package of the same name\n")
    (tmp_path / "benchsmith.yaml").write_text("scale: demo\n")
    code = ("from runner.up_to_date import inputs_digest; from configuration import load_config; "
            f"print(inputs_digest(load_config({str(tmp_path / 'benchsmith.yaml')!r})))")
    digests = [subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path / 'shadow'}:{root}"})
               for cwd in (root, tmp_path)]
    assert [d.returncode for d in digests] == [0, 0], digests[1].stderr[-2000:]
    assert digests[0].stdout == digests[1].stdout and len(digests[0].stdout.strip()) == 32


def _run(cfg, home, *args, **environ):
    root = Path(__file__).resolve().parent.parent
    env = {"PATH": "/usr/bin:/bin", CONFIG_ENV_VAR: cfg.source, "DAGSTER_HOME": str(home), **environ}
    return subprocess.run([sys.executable, "-m", "assets.materialize_all", "--select", "ib", *args],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


def _runs(home):
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return [r.job_name for r in instance.get_runs()]


@pytest.mark.slow
def test_a_rerun_asks_again_what_failed_then_with_nothing_changed_runs_no_step(tmp_path):
    ib = {"datasets": {"fld": {"form": "judging", "generator": "fld", "count": {"demo": 2, "paper": 2}}},
          "settings": ["vanilla"]}
    asked = []

    def responder(body):
        asked.append(1)
        return "Answer: 1"

    with StubServer(responder=responder, fail_share=1.0) as stub:  # every request fails
        cfg = stub_config(stub, tmp_path, ib=ib, models={"alpha": {"base_url": stub.base_url, "model": "a"}},
                          evaluate=["alpha"], judge="alpha", reply_checks={"failed_calls": 1.0})
        home = tmp_path / "home"
        home.mkdir()
        # no telemetry: the run made in this process would write it under this process's $DAGSTER_HOME
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        first = _run(cfg, home)
        wh = Warehouse(cfg.warehouse_path())
        assert wh.scalar("SELECT count(*) FROM llm.calls WHERE status = 'failed'") > 0, first.stderr[-2000:]
        assert not wh.scalar("SELECT ok FROM runs.steps WHERE job = 'evaluate_ib'")  # it had failed calls

        stub.fail_share = 0.0  # the endpoint is healthy again; nothing else changed
        before = len(asked)
        second = _run(cfg, home)
        assert second.returncode == 0, second.stderr[-2000:]
        # each command that ran steps stored its own record: the second's calls are the ones it asked
        first_rec, second_rec = wh.rows("SELECT * FROM runs.commands ORDER BY finished_at")
        assert first_rec["new_calls"] > 0 and second_rec["new_calls"] == len(asked) - before
        assert second_rec["calls"] >= second_rec["new_calls"] and second_rec["cpu_s"] >= second_rec["calls_cpu_s"] > 0
        assert "ib_responses [fld|alpha]" in second.stdout  # the slice ran again and asked the failed calls
        assert wh.scalar("SELECT count(*) FROM llm.calls WHERE status = 'failed'") == 0
        assert wh.scalar("SELECT count(*) FROM runs.steps WHERE NOT ok") == 0
        tables = {t: wh.rows(f"SELECT * FROM {t} ORDER BY ALL") for t in ("ib.items", "ib.responses", "ib.metrics")}
        runs, calls = _runs(home), len(asked)

        third = _run(cfg, home, PYTHONPROFILEIMPORTTIME="1")  # each import the process made, on stderr
        assert third.returncode == 0, third.stderr[-2000:]
        steps = wh.scalar("SELECT count(*) FROM runs.steps")
        assert f"{steps} of {steps} steps up to date, not run again" in third.stdout
        assert "Instruction Boundary [alpha]: vanilla Acc=" in third.stdout  # the same summary, headline numbers too
        imported = {line.rsplit("|", 1)[1].strip() for line in third.stderr.splitlines() if line.startswith("import time")}
        assert "warehouse" in imported and not imported & {"dagster", "openai", "pandas"}  # nothing runs: 1-1.5 s
        assert _runs(home) == runs and len(asked) == calls  # no Dagster run, no request
        assert wh.scalar("SELECT count(*) FROM runs.commands") == 2  # and no record of a command that ran nothing
        assert {t: wh.rows(f"SELECT * FROM {t} ORDER BY ALL") for t in tables} == tables
        plan = _run(cfg, home, "--plan", "--latency", "1")  # the plan counts only the runs that will happen
        assert f"Besides the calls: no step to run ({steps} more up to date, not run: --all runs them)" in plan.stdout
        plan = _run(cfg, home, "--plan", "--latency", "1", "--all")
        assert f"Besides the calls: {steps} steps, each a Dagster run, 5 of them one after another" in plan.stdout

        forced = _run(cfg, home, "--all")  # every step runs again, every call from the cache
        assert forced.returncode == 0 and "up to date" not in forced.stdout
        assert len(_runs(home)) == len(runs) + steps and len(asked) == calls

        # the fld items rebuilt outside the command (as the UI's Materialize does): they and what reads
        # them run again; the miscellany's items and slice, which read nothing rebuilt, stay skipped
        defs = build_definitions(cfg.source)
        with dg.DagsterInstance.from_config(str(home)) as instance:
            assert defs.resolve_job_def("build_ib").execute_in_process(instance=instance, partition_key="fld").success
        before = len(_runs(home))
        after_ui = _run(cfg, home)
    assert after_ui.returncode == 0, after_ui.stderr[-2000:]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        ran = sorted((r.job_name, r.tags.get("dagster/partition")) for r in instance.get_runs()[:-before])
    assert ran == [("build_ib", "fld"), ("evaluate_ib", "fld|alpha"), ("probe_models", None), ("score_ib", None),
                   ("summarise", None)]
    assert f"2 of {steps} steps up to date" in after_ui.stdout  # the miscellany's items and slice
