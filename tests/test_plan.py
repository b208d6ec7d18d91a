"""The capacity plan (`materialize_all --plan`): its counts are the calls a run then makes.

A small configuration of all four families runs end to end against the stub server. Every step
the plan counts as exact made exactly that many calls, every bounded step stayed within its
bound, no call was made that the plan did not foresee, and after the run the plan finds the exact
steps in the cache."""

import json
import zlib
from collections import Counter

import pytest

from assets.materialize_all import main as materialize_all
from evaluations import ib as ib_protocol
from reporting import plan
from tests.conftest import stub_config
from warehouse import Warehouse

SMALL = {
    "scale": "demo",
    "reply_checks": {"failed_calls": 0.05, "undecided_replies": 1.0, "truncated_replies": 1.0},
    "muso": {"quota": {"demo": 1, "paper": 1}, "timetabling": {"bins": [[1, 50], [51, 100]]},
             "subsetsum": {"bins": [[1, 50]]}, "temperature": [0.0, 0.5],
             "solve_max_tokens": {"demo": 32, "paper": 32}, "confidence_max_tokens": {"demo": 8, "paper": 8}},
    "waken": {"datasets": {"fld": {"kind": "fld", "form": "fact", "generator": {"depth": [1, 2], "max_distractors": 2},
                                   "count": {"demo": 4, "paper": 4}}},
              "misguiding_rates": [1.0, 0.0], "baselines": ["cot", "self_reflection"],
              "max_tokens": {"demo": 32, "paper": 32}},
    "ib": {"datasets": {"arithmetic": {"form": "single", "generator": "arithmetic", "count": {"demo": 2, "paper": 2}},
                        "fld": {"form": "judging", "generator": "fld", "count": {"demo": 2, "paper": 2}}},
           "miscellany": {"form": "single", "generator": "arithmetic10", "count": {"demo": 1, "paper": 1}},
           "max_tokens": {"demo": 16, "paper": 16}},
    "s1": {"demo_subcategories": ["scientific notation"], "languages": ["en"], "temperatures": [0.0],
           "samples_per_temperature": 2, "k": 2, "max_rounds": {"demo": 1, "paper": 1},
           "validator_max_tokens": {"demo": 16, "paper": 16}, "eval_max_tokens": {"demo": 24, "paper": 24}},
}


def _answer(body):
    """Replies that take a variety of branches (labels, Unknown, free text), each one different, as
    a model's would be (equal replies would make equal follow-up requests, which the ledger merges)."""
    text = body["messages"][-1]["content"]
    tag = f"(reply {zlib.crc32(json.dumps(body['messages']).encode())})"
    if "True, False, or Unknown" in text:  # WakenLLM: every item looks vague, so the stages run
        return "Final answer: Unknown " + tag
    return "I am not sure. " + tag


def _made(cfg):
    rows = Warehouse(cfg.warehouse_path()).rows(
        "SELECT model, purpose, count(*) AS n FROM llm.calls WHERE status = 'ok' GROUP BY ALL")
    return Counter({(r["model"], r["purpose"]): r["n"] for r in rows})


@pytest.fixture
def small(tmp_path, monkeypatch):
    from llm_calls.stub_server import StubServer

    with StubServer(responder=_answer) as stub:
        cfg = stub_config(stub, tmp_path, **SMALL)
        monkeypatch.setenv("BENCHSMITH_CONFIG", cfg.source)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
        yield cfg


@pytest.mark.slow
def test_the_plan_counts_the_calls_the_run_makes(small):
    cfg = small
    before = plan.plan_lines(cfg, Warehouse(cfg.warehouse_path()))
    assert materialize_all([]) == 0
    made = _made(cfg)

    planned: Counter = Counter()
    bounds: Counter = Counter()
    for ln in before:
        key = (ln.model, ln.purpose)
        (planned if ln.kind == plan.EXACT else bounds)[key] += ln.calls
    exact_steps = {k for k in planned if k not in bounds}
    assert exact_steps >= {("stub", "models.probe"), ("stub", "muso.standard.solve"), ("stub", "waken.direct"),
                           ("stub", "waken.baseline.cot"), ("stub", "ib.vanilla"), ("stub", "ib.conformity"),
                           ("stub", "ib.disturbing_miscellany"), ("stub", "ib.missing_choices")}
    for key in exact_steps:
        assert made[key] == planned[key], key
    for key in bounds:
        assert made[key] <= planned[key] + bounds[key], key
    assert set(made) <= set(planned) | set(bounds), set(made) - set(planned) - set(bounds)
    # the bounded steps were reached at all: the plan is not counting steps the run never takes
    assert made[("stub", "waken.stage1.vanilla")] > 0 and made[("stub", "s1.validate")] > 0
    # with every reply different, the later turns of a conversation reach their bound
    for key in [("stub", "muso.standard.confidence"), ("stub", "ib.multi_turn"), ("stub", "ib.prompt_polishing")]:
        assert made[key] == bounds[key] > 0, key


@pytest.mark.slow
def test_after_a_run_the_plan_finds_the_exact_steps_cached(small):
    import dagster as dg

    cfg = small
    assert materialize_all(["--select", "muso", "--select", "ib"]) == 0
    # the run's MuSoBench levels were generated ahead, in the worker process (runner.command.built_ahead)
    with dg.DagsterInstance.get() as instance:
        records = instance.fetch_materializations(dg.AssetKey("muso_instances"), limit=100).records
        ahead = {r.partition_key: r.asset_materialization.metadata["generated_ahead"].value for r in records}
    assert ahead and all(ahead.values()), ahead
    wh = Warehouse(cfg.warehouse_path())
    rows = plan.with_cache(plan.plan_lines(cfg, wh, ["llm", "muso", "ib"]), plan.stored_calls(cfg, wh))
    exact = [r for r in rows if r.line.kind == plan.EXACT]
    assert exact and all(r.new == 0 and r.cached == r.line.calls for r in exact)
    assert {r.line.source for r in exact if r.line.family != "llm"} == {"warehouse"}


def test_the_plan_command_prints_time_at_the_model_concurrency(small, capsys):
    assert materialize_all(["--plan", "--latency", "2", "--select", "muso"]) == 0
    out = capsys.readouterr().out
    # 3 instances x 2 temperatures = 6 solve calls (exact), then 6 confidence and 6 recheck turns (at
    # most); each turn a batch of ceil(6 / 4) = 2 waves at the model's concurrency 4, 2 s a wave: 4 s
    # for the exact solve turns alone, 12 s when every later turn is asked too
    assert "muso    stub                             6 + 12        18     4    2.00s  4 s - 12 s  (latency given)" in out
    assert "Total for the new calls, families and slices at once: 4 s if no reply takes a bounded branch, " \
           "at most 12 s" in out


def test_hours_rounds_up_to_whole_waves():
    assert plan.hours(9, 4, 3600) == 3
    assert plan.hours(8, 4, 3600) == 2


@pytest.mark.slow
def test_without_a_latency_the_plan_measures_one_from_probe_calls_then_from_stored_calls(small, capsys):
    cfg = small
    assert materialize_all(["--plan", "--select", "llm"]) == 0
    assert "(latency median of 3 probe calls)" in capsys.readouterr().out
    probes = Warehouse(cfg.warehouse_path()).rows(
        "SELECT count(*) AS n FROM llm.calls WHERE purpose = 'plan.latency_probe' AND status = 'ok'")
    assert probes == [{"n": 3}]
    assert materialize_all(["--plan", "--select", "llm"]) == 0
    assert "(latency median of 3 stored calls)" in capsys.readouterr().out


IB_ONLY = {"ib": {"datasets": {"fld": {"form": "judging", "generator": "fld", "count": {"demo": 8, "paper": 8}},
                               "arithmetic": {"form": "single", "generator": "arithmetic",
                                              "count": {"demo": 2, "paper": 2}}},
                  "settings": ["vanilla", "few_shot"]}}


def _seconds(text: str) -> float:
    """A duration as the plan prints it: `14 s`, `3.2 min`, `1.2 h` or a clock `0:07`."""
    import re

    if m := re.fullmatch(r"(\d+):(\d\d)(?::(\d\d))?", text):
        parts = [int(p) for p in m.groups() if p is not None]
        return sum(p * 60 ** k for k, p in enumerate(reversed(parts)))
    number, unit = text.split()
    return float(number) * {"s": 1, "min": 60, "h": 3600}[unit]


@pytest.mark.slow
def test_at_a_paper_like_latency_the_plan_foresees_the_run_within_a_quarter(tmp_path, monkeypatch, capsys):
    """A small run whose time is its calls (1.5 s each, two at a time) and its steps: the plan,
    made after an earlier run in the same instance, gives the calls exactly and the time within
    25 % of the run's own wall time."""
    import re
    import time

    from llm_calls.stub_server import StubServer

    with StubServer(responder=lambda body: "Answer: 1", delay_s=1.5) as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "concurrency": 2}},
                          ledger={"timeout_s": 30.0}, **IB_ONLY)
        monkeypatch.setenv("BENCHSMITH_CONFIG", cfg.source)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
        assert materialize_all(["--select", "ib", "--partition", "arithmetic"]) == 0  # the instance's history
        capsys.readouterr()
        assert materialize_all(["--plan", "--latency", "1.5", "--select", "ib", "--partition", "fld"]) == 0
        out = capsys.readouterr().out
        before = _made(cfg)
        t0 = time.monotonic()
        assert materialize_all(["--select", "ib", "--partition", "fld"]) == 0
        wall = time.monotonic() - t0
    made = _made(cfg) - before
    planned = {m.group(1): int(m.group(2)) for m in re.finditer(r"^ib +stub +(ib\.\w+) +exact +\d+ +\d+ +(\d+)", out,
                                                                re.M)}
    assert planned == {"ib.vanilla": 8, "ib.few_shot": 8} and {k[1]: v for k, v in made.items()} == planned
    low = _seconds(re.search(r"at once: (.+?) if no reply", out).group(1))
    steps = _seconds(re.search(r"about (\S+) more", out).group(1))
    assert low == 12  # 8 calls a setting, both settings' flows at once two at a time, 1.5 s each: 8 waves x 1.5 s
    assert abs((low + steps) - wall) <= 0.25 * wall, (low, steps, wall, out)


def test_the_plan_refuses_what_the_run_refuses_and_counts_only_the_models_asked(tmp_path, monkeypatch, capsys):
    from llm_calls.stub_server import StubServer

    with StubServer(responder=lambda body: "Answer: True") as stub:
        models = {m: {"base_url": stub.base_url, "model": f"stub-{m}"} for m in ("alpha", "beta")}
        cfg = stub_config(stub, tmp_path, models=models, evaluate=["alpha", "beta"], judge="alpha", **IB_ONLY)
        monkeypatch.setenv("BENCHSMITH_CONFIG", cfg.source)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
        for bad in (["--partition", "nope"], ["--model", "gamma"]):
            with pytest.raises(SystemExit) as exit_plan:
                materialize_all(["--plan", "--select", "ib", *bad])
            plan_err = capsys.readouterr().err
            with pytest.raises(SystemExit) as exit_run:
                materialize_all(["--select", "ib", *bad])
            assert exit_plan.value.code == exit_run.value.code == 2
            assert plan_err.splitlines()[-1] == capsys.readouterr().err.splitlines()[-1]
        lines = plan.plan_lines(cfg, Warehouse(cfg.warehouse_path()), ["ib"], models=["beta"])
    callers = {ln.model for ln in lines if ln.family == "ib"}
    assert callers == {"beta", "alpha"}  # beta's answers, and alpha judging beta's replies
    assert sum(ln.calls for ln in lines if ln.model == "beta") == 2 * (8 + 2)  # two settings, two datasets
    judged = sum(ln.calls for ln in lines if ln.model == "alpha")
    assert judged == 2 * (8 + 2)  # at most every one of beta's replies, and none of alpha's own


@pytest.mark.slow
def test_a_plan_for_a_new_model_expects_its_branches_at_the_rates_other_models_runs_took_them(
        tmp_path, monkeypatch, capsys):
    """`--plan --model beta` after a run of alpha alone: beta has no run of its own, but alpha's runs
    of the same steps show how often replies reach the judge, so the plan gives an expected time
    instead of saying it has no stored run (issue 50)."""
    import re

    from llm_calls.stub_server import StubServer

    with StubServer(responder=lambda body: "Answer: True") as stub:
        models = {m: {"base_url": stub.base_url, "model": f"stub-{m}", "concurrency": 2} for m in ("alpha", "beta")}
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
        alone = stub_config(stub, tmp_path, models=models, evaluate=["alpha"], judge="alpha", **IB_ONLY)
        monkeypatch.setenv("BENCHSMITH_CONFIG", alone.source)
        materialize_all(["--select", "ib"])  # the single-form replies are undecided: alpha's judge runs
        both = stub_config(stub, tmp_path, models=models, evaluate=["alpha", "beta"], judge="alpha", **IB_ONLY)
        monkeypatch.setenv("BENCHSMITH_CONFIG", both.source)
        capsys.readouterr()
        assert materialize_all(["--plan", "--select", "ib", "--model", "beta", "--latency", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^ib +beta +ib\.vanilla +exact +10 +0 +10", out, re.M), out
    assert "no stored run of these steps" not in out
    expected = re.search(r"^Expected: (\d+) s for about (\d+) new calls", out, re.M)
    assert expected and 20 < int(expected.group(2)) <= 40, out  # beta's 20 answers and some of them judged


def test_the_plan_says_the_time_is_unknown_rather_than_zero(small, capsys):
    assert materialize_all(["--plan", "--select", "ib", "--probe-calls", "0"]) == 0
    out = capsys.readouterr().out
    assert "Total time unknown: no latency for stub" in out and "at most 0 s" not in out


@pytest.mark.slow
def test_items_another_scale_built_are_not_the_items_the_plan_counts(tmp_path, monkeypatch):
    """A demo warehouse planned at paper scale: the stored demo items are not this run's."""
    from llm_calls.stub_server import StubServer

    ib = {"ib": {**IB_ONLY["ib"], "datasets": {"fld": {"form": "judging", "generator": "fld",
                                                       "count": {"demo": 2, "paper": 6}}}}}
    with StubServer(responder=lambda body: "Answer: True") as stub:
        cfg = stub_config(stub, tmp_path, **ib)
        monkeypatch.setenv("BENCHSMITH_CONFIG", cfg.source)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
        assert materialize_all(["--select", "ib", "--partition", "fld"]) == 0
        paper = stub_config(stub, tmp_path, scale="paper", **ib)
    wh = Warehouse(paper.warehouse_path())
    demo_counts, paper_counts = ib_protocol.item_counts(cfg, plan.query_of(wh)), ib_protocol.item_counts(paper, plan.query_of(wh))
    assert demo_counts.by_partition["fld"]["complete"] == 2 and demo_counts.source["fld"] == "warehouse"
    assert paper_counts.by_partition["fld"]["complete"] == 6
    assert paper_counts.source["fld"] == "configuration (warehouse holds 2 complete: another scale or configuration)"


def test_a_flows_familys_steps_share_the_concurrency_and_a_stepwise_familys_wait_for_each_other(tmp_path):
    """Two steps of 3 new calls each, two at a time, 1 s a call. IB runs as per-item flows: the 6
    calls pool into 3 waves (3 s), and at most its chain's tail (FLOW_DEPTH - 1 calls) after them.
    MuSoBench runs its steps one batch after another: 2 waves each (4 s). Both families at once
    on the one model take its 12 calls' time at its concurrency."""
    from llm_calls.stub_server import StubServer

    with StubServer() as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "concurrency": 2}})
    rows = [plan.Row(plan.Line(family, "stub", f"{family}.step{k}", 3), 0) for family in ("ib", "muso")
            for k in (1, 2)]
    text = plan.render(cfg, rows, {"stub": (1.0, "given")})
    ib_line = next(ln for ln in text.splitlines() if ln.startswith("ib ") and "exact steps only" not in ln
                   and "+" in ln)
    muso_line = next(ln for ln in text.splitlines() if ln.startswith("muso ") and "+" in ln)
    assert ib_line.rstrip().endswith(f"3 s - {3 + ib_protocol.FLOW_DEPTH - 1} s  (latency given)")
    assert muso_line.rstrip().endswith("4 s - 4 s  (latency given)")
    # the two families run at once on one model: neither alone (4 s) nor one after the other (7 s),
    # but every call it is asked for over its concurrency, 12 x 1 s / 2
    assert "families and slices at once: 6 s if no reply takes a bounded branch, at most 6 s" in text


def test_the_expected_count_takes_each_bounded_step_at_its_stored_rate_within_its_bound():
    """Stored: 20 calls of the exact step, 5 of the judge, 4 of a second turn whose first 10 are
    exact. Planned: 100 exact calls, so the judge is expected 25 times (5 per 20), the second turn
    20 times in all (10 exact, 10 of its bound); a step stored more often than its bound allows
    stays at its bound, and without stored exact calls there is no expectation at all."""
    L, R = plan.Line, plan.Row
    rows = [R(L("ib", "m", "ib.vanilla", 100), 0), R(L("ib", "m", "ib.judge", 100, plan.AT_MOST), 0),
            R(L("ib", "m", "ib.follow_up", 10), 0), R(L("ib", "m", "ib.follow_up (later turns)", 50, plan.AT_MOST), 0),
            R(L("ib", "j", "ib.judge", 300, plan.AT_MOST), 0)]
    rates = plan.branch_rates(rows, {("m", "ib.vanilla"): 20, ("m", "ib.judge"): 5, ("m", "ib.follow_up"): 4})
    assert rates.basis == {"ib": 20} and rates.per_exact[("ib", "ib.judge")] == 0.25
    expected = plan.expected_calls(rows, rates)
    # the judge's 25 shared by its two rows as their bounds are (100 : 300)
    assert expected == [100, 6.25, 10, 10, 18.75]
    too_often = plan.branch_rates(rows, {("m", "ib.vanilla"): 20, ("m", "ib.judge"): 200})
    assert plan.expected_calls(rows, too_often)[1] == 100 and plan.expected_calls(rows, too_often)[4] == 300
    assert plan.expected_calls(rows, plan.branch_rates(rows, {("m", "ib.judge"): 5})) is None
    text = plan.render(stub_like_config(), rows, {"m": (1.0, "given"), "j": (1.0, "given")},
                       rates=rates, steps_s=3.0)
    # m: 100 + 6.25 + 10 + 10 expected new calls, j: 18.75, each at concurrency 4 in whole waves of 1 s
    assert "Expected: 32 s for about 145 new calls" in text and "with the steps below, about 35 s" in text


def stub_like_config():
    from configuration import parse_config

    return parse_config({"models": {m: {"base_url": "http://127.0.0.1:9/v1", "model": m, "concurrency": 4}
                                    for m in ("m", "j")}, "evaluate": ["m"], "judge": "j"}, "test")


@pytest.mark.slow
def test_after_a_demo_run_the_plan_expects_the_judge_calls_the_paper_run_makes(tmp_path, monkeypatch, capsys):
    """The replies to few-shot prompts need the judge, the others do not: a demo run shows the
    judge one call per two exact calls, and the plan at paper scale expects that many; the paper
    run (other items: another seed) makes exactly them."""
    import re

    from llm_calls.stub_server import StubServer

    def answer(body):
        text = body["messages"][-1]["content"]
        tag = zlib.crc32(json.dumps(body["messages"]).encode())
        return f"I cannot tell ({tag})" if "examples to learn from" in text else f"Answer: True ({tag})"

    ib = {"ib": {"datasets": {"fld": {"form": "judging", "generator": "fld", "count": {"demo": 2, "paper": 6}}},
                 "settings": ["vanilla", "few_shot"]},
          "reply_checks": {"failed_calls": 0.0, "undecided_replies": 1.0, "truncated_replies": 1.0}}
    with StubServer(responder=answer) as stub:
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
        demo = stub_config(stub, tmp_path, seed=1, **ib)
        monkeypatch.setenv("BENCHSMITH_CONFIG", demo.source)
        assert materialize_all(["--select", "ib", "--partition", "fld"]) == 0
        piloted = _by_step(_made(demo))
        assert piloted["ib.judge"] == piloted["ib.few_shot"] == piloted["ib.vanilla"] > 0
        paper = stub_config(stub, tmp_path, scale="paper", seed=2, **ib)
        monkeypatch.setenv("BENCHSMITH_CONFIG", paper.source)
        wh = Warehouse(paper.warehouse_path())
        rows = plan.with_cache(plan.plan_lines(paper, wh, ["ib"]), {})
        rates = plan.branch_rates(rows, plan.stored_calls(paper, wh))  # the demo run's calls alone
        expected = plan.expected_calls(rows, rates)
        capsys.readouterr()
        assert materialize_all(["--plan", "--latency", "1", "--select", "ib", "--partition", "fld"]) == 0
        out = capsys.readouterr().out
        before = _made(paper)
        assert materialize_all(["--select", "ib", "--partition", "fld"]) == 0
    made = _by_step(_made(paper) - before)
    assert rates.per_exact[("ib", "ib.judge")] == 0.5 and rates.basis == {"ib": 2 * piloted["ib.vanilla"]}
    judge = sum(e for r, e in zip(rows, expected, strict=True) if r.line.step == "ib.judge")
    assert made["ib.judge"] == judge == (made["ib.vanilla"] + made["ib.few_shot"]) / 2 > piloted["ib.judge"]
    assert re.search(r"^Expected: \d+ s for about \d+ new calls, each bounded step at the rate the stored runs took "
                     r"it .*; with the steps below, about \d+ s\.$", out, re.M), out


def _by_step(made: Counter) -> Counter:
    return Counter({purpose: n for (_, purpose), n in made.items()})


def _commands(tmp_path, rows):
    """A warehouse whose `runs.commands` holds `rows`: (calls, new calls, CPU seconds in the calls' span)."""
    from datetime import datetime, timedelta

    wh = Warehouse(tmp_path / "wh.duckdb")
    start = datetime(2026, 12, 1)
    wh.upsert("runs.commands", [
        {"command_id": f"c{i}", "started_at": start + timedelta(hours=i), "finished_at": start + timedelta(hours=i, minutes=1),
         "wall_s": 60.0, "cpu_s": cpu + 2.0, "steps": 3, "calls": calls, "new_calls": new, "calls_s": 50.0,
         "calls_cpu_s": cpu, "cores": 2, "load_avg": 0.0} for i, (calls, new, cpu) in enumerate(rows)])
    return wh


def test_the_client_cpu_per_call_is_the_median_of_the_latest_commands_live_and_cached_apart(tmp_path):
    """Commands mostly of new calls give the CPU per new call, those mostly cached the CPU per cached
    call; each the median of its own; a command with too few calls counts for neither; a kind no
    command shows takes the other's figure; nothing stored: no figure."""
    assert plan.client_cpu(Warehouse(tmp_path / "none.duckdb"), 0.0, 2) is None
    wh = _commands(tmp_path, [(1000, 1000, 2.0), (2000, 1900, 3.0), (1000, 990, 1.6),  # live: 2.0, 1.5, 1.6 ms
                              (10, 10, 5.0),  # too few calls: the start's cost, not the calls'
                              (4000, 0, 2.0), (1000, 100, 0.6)])  # cached: 0.5, 0.6 ms
    client = plan.client_cpu(wh, 0.0, 2)
    assert client.new_s == pytest.approx(0.0016) and client.cached_s == pytest.approx(0.00055)
    assert client.basis == 5
    only_live = plan.client_cpu(_commands(tmp_path / "b", [(1000, 1000, 2.0)]), None, 2)
    assert only_live.cached_s == only_live.new_s == pytest.approx(0.002) and only_live.basis == 1


def test_the_clients_time_is_its_cpu_at_the_share_of_a_core_the_load_leaves():
    """Idle: the whole of one core (the interpreter uses at most one); two CPU-bound processes on 2
    cores: two thirds; load 17 on 2 cores: a ninth; no load figure: one core."""
    c = plan.ClientCpu(new_s=0.002, cached_s=0.0005, basis=3, load=0.3, cores=2)
    assert c.share == 1.0 and c.seconds(cached=1000, new=1000) == pytest.approx(2.5)
    assert plan.ClientCpu(0.002, 0.0005, 3, 2.0, 2).share == pytest.approx(2 / 3)
    assert plan.ClientCpu(0.002, 0.0005, 3, 17.0, 2).seconds(0, 1000) == pytest.approx(18.0)
    assert plan.ClientCpu(0.002, 0.0005, 3, None, 2).share == 1.0


def test_where_the_clients_work_outlasts_the_calls_the_plan_expects_the_clients_time():
    """100 new exact calls at concurrency 4, 1 s each: 25 s at the endpoint. A client of 0.1 s a
    call on a quiet machine needs 10 s: the endpoint bounds the run (the expected time stays 25 s,
    the line says more than half is not reached either way); at load 7 on 2 cores (a quarter of a
    core) it needs 40 s: the client bounds the run and the expected time is its."""
    L, R = plan.Line, plan.Row
    rows = [R(L("ib", "m", "ib.vanilla", 100), 0), R(L("ib", "m", "ib.judge", 100, plan.AT_MOST), 0)]
    rates = plan.branch_rates(rows, {("m", "ib.vanilla"): 20})  # the judge never taken
    quiet = plan.render(stub_like_config(), rows, {"m": (1.0, "given")}, rates=rates, steps_s=3.0,
                        client=plan.ClientCpu(0.1, 0.01, 2, 0.0, 2))
    assert "The client's own work: its call loop's 100.00 ms of CPU per new call, 10.00 per cached" in quiet
    assert "10 s for these calls; at this machine's load 0.0 on 2 cores the command gets about 100% of a core, " \
           "so at least 10 s." in quiet
    assert "bounds this run" not in quiet and "more than half" not in quiet
    assert "Expected: 25 s for about 100 new calls" in quiet and "with the steps below, about 28 s" in quiet
    loaded = plan.render(stub_like_config(), rows, {"m": (1.0, "given")}, rates=rates, steps_s=3.0,
                         client=plan.ClientCpu(0.1, 0.01, 2, 7.0, 2))
    assert "about 25% of a core, so at least 40 s." in loaded
    assert "The client, not the endpoint, bounds this run" in loaded
    assert "Expected: 40 s for about 100 new calls" in loaded and "with the steps below, about 43 s" in loaded
    half = plan.render(stub_like_config(), rows, {"m": (1.0, "given")}, rates=rates,
                       client=plan.ClientCpu(0.15, 0.01, 2, 0.0, 2))
    assert "more than half the calls' time" in half and "bounds this run" not in half
