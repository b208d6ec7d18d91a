"""Runs tell the truth: a model-calling asset whose calls failed makes its run fail, per partition,
and says which endpoint; warnings stay visible without stopping the run."""

import socket

import dagster as dg
import pytest
from dagster._core.definitions.data_version import StaleStatus

from assets.definitions import build_definitions
from configuration import CONFIG_ENV_VAR
from llm_calls.stub_server import StubServer
from runner.command import raw_assets
from tests.conftest import materialize, stub_config
from warehouse import Warehouse

IB = {"datasets": {"fld": {"form": "judging", "generator": "fld", "count": {"demo": 2, "paper": 2}},
                   "arithmetic": {"form": "single", "generator": "arithmetic", "count": {"demo": 2, "paper": 2}}},
      "settings": ["vanilla"]}


def evaluations(result):
    return {c.check_name: c for c in result.get_asset_check_evaluations()}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_an_endpoint_that_is_down_fails_the_run_and_names_the_endpoint(tmp_path):
    port = closed_port()
    with StubServer() as judge:  # only the evaluated model is down
        cfg = stub_config(judge, tmp_path, ib=IB, ledger={"max_attempts": 1},
                          models={"stub": {"base_url": judge.base_url, "model": "stub-model"},
                                  "down": {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m"}},
                          evaluate=["down"])
        result = materialize(build_definitions(cfg.source), ["ib_items", "ib_responses"], "fld")
    assert not result.success  # not green
    failed = evaluations(result)["failed_calls"]
    assert not failed.passed and failed.severity == dg.AssetCheckSeverity.ERROR
    assert failed.metadata["share"].value == 1.0 and failed.partition == "fld|down"
    errors = {r["error"] for r in Warehouse(cfg.warehouse_path()).rows("SELECT error FROM llm.calls")}
    assert errors and all(f"127.0.0.1:{port}" in e for e in errors)


@pytest.mark.slow
def test_a_server_that_stops_midway_fails_only_the_partitions_it_left_unanswered(tmp_path):
    stub = StubServer(responder=lambda body: "Answer: 1").start()
    cfg = stub_config(stub, tmp_path, ib=IB, ledger={"max_attempts": 1})
    defs = build_definitions(cfg.source)
    with dg.instance_for_test() as instance:
        first = materialize(defs, ["ib_items", "ib_responses"], "fld", instance=instance)
        stub.stop()  # the server goes away between the backfill's partitions
        second = materialize(defs, ["ib_items", "ib_responses"], "arithmetic", instance=instance)
        history = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey("ib_responses"), "failed_calls"), limit=10)
        verdicts = {r.partition: r.status.value for r in history}
    assert first.success and evaluations(first)["failed_calls"].passed
    assert not second.success and not evaluations(second)["failed_calls"].passed
    assert evaluations(second)["failed_calls"].partition == "arithmetic|stub"
    assert evaluations(second)["failed_calls"].metadata["partition"].value == "arithmetic|stub"
    # the instance keeps each partition's verdict, not only the last run's
    assert verdicts == {"fld|stub": "SUCCEEDED", "arithmetic|stub": "FAILED"}


@pytest.mark.slow
def test_a_few_failures_below_the_threshold_warn_without_failing_the_run(tmp_path):
    # enough distinct prompts (16) that a 30% share of failing ones is some but not all, whatever the items
    ib = {**IB, "datasets": {**IB["datasets"], "fld": {**IB["datasets"]["fld"], "count": {"demo": 8, "paper": 8}}}}
    with StubServer(fail_share=0.3, responder=lambda body: "Answer: 1") as flaky:
        cfg = stub_config(flaky, tmp_path, ib=ib, ledger={"max_attempts": 1},
                          reply_checks={"failed_calls": 0.9})
        result = materialize(build_definitions(cfg.source), ["ib_items", "ib_responses"], "fld")
    check = evaluations(result)["failed_calls"]
    assert result.success and not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert 0 < check.metadata["share"].value <= 0.9


@pytest.mark.slow
def test_undecided_replies_above_the_threshold_fail_the_run(tmp_path):
    with StubServer(responder=lambda body: "Hmm, hard to say.") as vague:
        cfg = stub_config(vague, tmp_path, ib=IB, reply_checks={"undecided_replies": 0.5})
        result = materialize(build_definitions(cfg.source), ["ib_items", "ib_responses"], "fld")
    check = evaluations(result)["undecided_replies"]
    assert not result.success and check.severity == dg.AssetCheckSeverity.ERROR and check.metadata["share"].value == 1.0


@pytest.mark.slow
def test_replies_cut_at_the_budget_are_counted_from_the_ledger(tmp_path):
    with StubServer(responder=lambda body: "Answer: 1", cut_every_reply=True) as cutting:
        cfg = stub_config(cutting, tmp_path, ib=IB)
        result = materialize(build_definitions(cfg.source), ["ib_items", "ib_responses"], "fld")
    check = evaluations(result)["truncated_replies"]
    assert not result.success and check.severity == dg.AssetCheckSeverity.ERROR and check.metadata["share"].value == 1.0


@pytest.mark.slow
def test_the_main_command_selects_a_family_and_partition_and_fails_when_a_step_fails(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    port = closed_port()
    (tmp_path / "good").mkdir()
    (tmp_path / "bad").mkdir()
    with StubServer(responder=lambda body: "Answer: 1") as ok_stub:
        good = stub_config(ok_stub, tmp_path / "good", ib=IB)
        bad = stub_config(ok_stub, tmp_path / "bad", ib=IB, ledger={"max_attempts": 1},
                          models={"stub": {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m"}})
        runs = {}
        for name, cfg in (("good", good), ("bad", bad)):
            env = {**os.environ, CONFIG_ENV_VAR: cfg.source, "DAGSTER_HOME": str(tmp_path / name)}
            runs[name] = subprocess.run([sys.executable, "-m", "assets.materialize_all", "--select", "ib",
                                         "--partition", "fld"], cwd=root, env=env, capture_output=True, text=True,
                                        timeout=300)
    good_out = runs["good"].stdout
    assert runs["good"].returncode == 0, runs["good"].stderr[-2000:]
    assert "ib_items [fld]" in good_out and "ib_responses [fld|stub]" in good_out
    assert "[arithmetic" not in good_out and "muso_" not in good_out
    bad_out = runs["bad"].stdout
    assert runs["bad"].returncode == 1 and "FAILED: ib_responses [fld|stub] (checks: failed_calls" in bad_out
    assert "FAILED: ib_responses [fld|stub]" in runs["bad"].stderr and "127.0.0.1" in runs["bad"].stderr
    with dg.DagsterInstance.from_config(str(tmp_path / "good")) as instance:
        runs_recorded = instance.get_runs()
    # every run is a run of a named job, none of Dagster's ephemeral one
    assert sorted(r.job_name for r in runs_recorded) == sorted(
        ["probe_models", "build_ib", "evaluate_ib", "score_ib", "summarise"])
    by_job = {r.job_name: r for r in runs_recorded}
    assert by_job["build_ib"].tags["benchsmith/partition"] == "fld"
    run = by_job["evaluate_ib"]
    assert run.tags["benchsmith/family"] == "ib" and run.tags["benchsmith/partition"] == "fld|stub"
    assert run.tags["benchsmith/models"] == "stub" and run.tags["benchsmith/config"] == good.source


def test_the_main_command_refuses_an_unknown_family():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "assets.materialize_all", "--select", "nope"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and "--select 'nope': not a family" in out.stderr


def test_a_slice_that_measured_nothing_says_so_instead_of_passing(tmp_path):
    """0 replies of 0 is no evidence of health: the failed-calls check warns that the step measured nothing
    (here the miscellany slice, which no configured setting asks)."""
    with StubServer(responder=lambda body: "Answer: 1") as stub:
        cfg = stub_config(stub, tmp_path, ib=IB)
        defs = build_definitions(cfg.source)
        result = materialize(defs, ["ib_items", "ib_responses"], "miscellany")
    check = evaluations(result)["failed_calls"]
    assert result.success and not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert "measured nothing" in check.description and check.metadata["of"].value == 0


@pytest.mark.slow
def test_replies_made_on_items_another_configuration_rebuilt_are_stale_and_left_out(tmp_path):
    """Issue 25: a second configuration (another seed, another model) rebuilds a dataset's items on
    the same warehouse. The first model's replies point to items that are gone or now hold another
    question: they are listed in `report.stale`, no metric counts them, and the headline marks the
    model that the configuration no longer evaluates."""
    ib = {**IB, "datasets": {"fld": {**IB["datasets"]["fld"], "count": {"demo": 6, "paper": 6}}}}
    with StubServer(responder=lambda body: "Answer: True") as stub:
        models = {"old": {"base_url": stub.base_url, "model": "m-old", "concurrency": 4}}
        first = stub_config(stub, tmp_path, ib=ib, seed=1, models=models, evaluate=["old"], judge="old")
        keys = ["models", "ib_items", "ib_responses", "ib_metrics"]
        assert materialize(build_definitions(first.source), keys, "fld").success
        wh = Warehouse(first.warehouse_path())
        made = wh.scalar("SELECT count(*) FROM ib.responses WHERE model = 'old'")
        assert made > 0 and wh.rows("SELECT * FROM report.stale") == []

        models["new"] = {"base_url": stub.base_url, "model": "m-new", "concurrency": 4}
        second = stub_config(stub, tmp_path, ib=ib, seed=2, models=models, evaluate=["new"], judge="new")
        assert materialize(build_definitions(second.source), keys, "fld").success

    stale = wh.rows("SELECT * FROM report.stale")
    assert [(r["family"], r["model"], r["scope"], r["table"]) for r in stale] == [("ib", "old", "fld", "ib.responses")]
    old_current = made - stale[0]["replies"]
    assert stale[0]["replies"] > 0 and stale[0]["item_gone"] + stale[0]["item_changed"] == stale[0]["replies"]
    # the metrics count the old model's replies on items still stored as they were, and no other
    counted = wh.scalar("SELECT sum(denominator) + sum(n_failed) FROM ib.metrics WHERE model = 'old' "
                        "AND metric = 'Acc' AND category = '-' AND form <> 'all'")
    assert (counted or 0) == old_current
    new_made = wh.scalar("SELECT count(*) FROM ib.responses WHERE model = 'new'")
    assert wh.scalar("SELECT sum(denominator) + sum(n_failed) FROM ib.metrics WHERE model = 'new' "
                     "AND metric = 'Acc' AND category = '-' AND form <> 'all'") == new_made
    configured = {r["model"]: r["configured"] for r in wh.rows("SELECT DISTINCT model, configured FROM report.headline")}
    assert configured["new"] is True and configured.get("old", False) is False


@pytest.mark.slow
def test_in_dagster_the_replies_of_rebuilt_items_are_stale_and_an_identical_rebuild_is_not(tmp_path):
    """The items assets report the digest of what they stored as their data version: rebuilding the
    same items leaves the replies fresh; another seed's items make every model's replies stale in the
    UI (the asset graph's stale status, as the UI computes it)."""
    from dagster._utils.test.data_versions import get_stale_status_resolver

    def status(defs, instance):
        resolver = get_stale_status_resolver(instance, raw_assets(defs))
        return resolver.get_status(dg.AssetKey("ib_responses"), "fld|stub")

    instance = dg.DagsterInstance.ephemeral()
    with StubServer(responder=lambda body: "Answer: True") as stub:
        first = build_definitions(stub_config(stub, tmp_path, ib=IB, seed=1).source)
        assert materialize(first, ["ib_items", "ib_responses"], "fld", instance=instance).success
        assert status(first, instance) == StaleStatus.FRESH
        assert materialize(first, ["ib_items"], "fld", instance=instance).success
        assert status(first, instance) == StaleStatus.FRESH
        (tmp_path / "two").mkdir()
        second = build_definitions(stub_config(stub, tmp_path / "two", ib=IB, seed=2,
                                               warehouse={"path": str(tmp_path / "wh.duckdb")}).source)
        assert materialize(second, ["ib_items"], "fld", instance=instance).success
        assert status(second, instance) == StaleStatus.STALE


def test_metrics_over_an_empty_warehouse_fail_their_coverage_check(tmp_path):
    """The warehouse deleted (or replaced by an empty file) before the metrics step: the coverage
    checks compare with what the configuration builds, so zero items measured is no pass."""
    with StubServer(responder=lambda body: "Answer: 1") as stub:
        cfg = stub_config(stub, tmp_path, ib=IB)
        result = materialize(build_definitions(cfg.source), ["ib_metrics"])
    check = evaluations(result)["every_model_setting_form"]
    assert not check.passed
    assert sorted(check.metadata["missing"].value) == ["stub/vanilla/judging", "stub/vanilla/single"]


@pytest.mark.slow
def test_a_warehouse_deleted_mid_run_is_not_reported_as_a_healthy_run(tmp_path):
    """The file is deleted while the first slice is being answered: the later steps meet a fresh
    empty file. The summary says the metrics' coverage check failed and that the replies written
    after the deletion rest on items no longer stored; no metric counts them."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    deleted = []

    def delete_then_answer(body):
        if not deleted and "options" in body["messages"][-1]["content"].lower():  # the first item, not the probe
            deleted.append(True)
            (tmp_path / "wh.duckdb").unlink(missing_ok=True)  # replies are asked concurrently
        return "Answer: 1"

    with StubServer(responder=delete_then_answer) as stub:
        cfg = stub_config(stub, tmp_path, ib={**IB, "datasets": {"fld": IB["datasets"]["fld"]}})
        env = {**os.environ, CONFIG_ENV_VAR: cfg.source, "DAGSTER_HOME": str(tmp_path)}
        out = subprocess.run([sys.executable, "-m", "assets.materialize_all", "--select", "ib"],
                             cwd=Path(__file__).resolve().parent.parent, env=env, capture_output=True, text=True,
                             timeout=300).stdout
    line = next(x for x in out.splitlines() if x.startswith("Instruction Boundary "))
    assert "failed checks: every_model_setting_form" in line, out
    assert "stale replies, left out of every metric" in out and "on items no longer stored" in out
    assert "Instruction Boundary: nothing measured (no current replies or items)" in out
    assert "every family's main mechanism was exercised" not in out
    wh = Warehouse(cfg.warehouse_path())
    assert wh.scalar("SELECT count(*) FROM ib.metrics WHERE metric = 'Acc' AND denominator > 0") == 0


@pytest.mark.slow
def test_muso_counts_replies_that_end_inside_their_thinking_as_undecided_by_method(tmp_path):
    """MuSoBench's undecided count reads the reading method (validators.outcomes), not the reader's
    error text: a solve reply cut inside its thinking is undecided; a reply with a wrong solution is not."""
    muso = {"timetabling": {"bins": [[1, 50]]}, "subsetsum": {"bins": [[1, 50]]}, "quota": {"demo": 2, "paper": 2}}

    def reply(body):
        last = body["messages"][-1]["content"]
        return "[[CONFIDENCE: \\boxed{50}]]" if "[[CONFIDENCE:" in last else "<think>\nLet me list them all"

    with StubServer(responder=reply) as stub:
        cfg = stub_config(stub, tmp_path, muso=muso, reply_checks={"undecided_replies": 0.5})
        result = materialize(build_definitions(cfg.source), ["muso_instances", "muso_responses"], "subsetsum_1-50")
    check = evaluations(result)["undecided_replies"]
    assert not check.passed and check.metadata["share"].value == 1.0
    wh = Warehouse(cfg.warehouse_path())
    assert {r["parse_method"] for r in wh.rows("SELECT DISTINCT parse_method FROM muso.responses")} == {
        "unfinished_thinking"}


def test_undecided_has_one_definition_for_every_family():
    """A reply read to no answer, not a failed call or judgement: by its method, or by its outcome."""
    from validators import outcomes

    assert outcomes.undecided("empty") and outcomes.undecided("judge_no_answer")
    assert outcomes.undecided("final_answer", outcomes.UNDECIDED)  # read, but to nothing the family takes
    assert not outcomes.undecided(outcomes.CALL_FAILED) and not outcomes.undecided(outcomes.JUDGE_FAILED)
    assert not outcomes.undecided("empty", outcomes.CALL_FAILED)  # a MuSoBench conversation whose call failed
    assert not outcomes.undecided("strict", "correct")
