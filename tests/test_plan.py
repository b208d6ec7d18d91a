"""The capacity plan (`materialize_all --plan`): its counts are the calls a run then makes.

A small configuration of all four families runs end to end against the stub server. Every step
the plan counts as exact made exactly that many calls, every bounded step stayed within its
bound, no call was made that the plan did not foresee, and after the run the plan finds the exact
steps in the cache."""

import json
import zlib
from collections import Counter

import pytest

from assets import plan
from assets.materialize_all import main as materialize_all
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


def test_the_plan_counts_the_calls_the_run_makes(small):
    cfg = small
    before = plan.plan_lines(cfg, Warehouse(cfg.warehouse_path()))
    assert materialize_all([]) == 0
    made = _made(cfg)

    planned: Counter = Counter()
    bounds: Counter = Counter()
    for ln in before:
        key = (ln.model, ln.step.split(" (")[0])
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


def test_after_a_run_the_plan_finds_the_exact_steps_cached(small):
    cfg = small
    assert materialize_all(["--select", "muso", "--select", "ib"]) == 0
    wh = Warehouse(cfg.warehouse_path())
    rows = plan.with_cache(plan.plan_lines(cfg, wh, ["llm", "muso", "ib"]), plan.stored_calls(cfg, wh))
    exact = [r for r in rows if r.line.kind == plan.EXACT]
    assert exact and all(r.new == 0 and r.cached == r.line.calls for r in exact)
    assert {r.line.source for r in exact if r.line.family != "llm"} == {"warehouse"}


def test_the_plan_command_prints_time_at_the_model_concurrency(small, capsys):
    assert materialize_all(["--plan", "--latency", "2", "--select", "muso"]) == 0
    out = capsys.readouterr().out
    # 3 instances x 2 temperatures = 6 solve calls (exact), then 6 confidence and 6 recheck turns (at
    # most); each turn a batch of ceil(6 / 4) = 2 waves at the model's concurrency 4, 2 s a wave
    assert "muso    stub                             6 + 12        18     4    2.00s  12 s  (latency given)" in out


def test_hours_rounds_up_to_whole_waves():
    assert plan.hours(9, 4, 3600) == 3
    assert plan.hours(8, 4, 3600) == 2


def test_without_a_latency_the_plan_measures_one_from_probe_calls_then_from_stored_calls(small, capsys):
    cfg = small
    assert materialize_all(["--plan", "--select", "llm"]) == 0
    assert "(latency median of 3 probe calls)" in capsys.readouterr().out
    probes = Warehouse(cfg.warehouse_path()).rows(
        "SELECT count(*) AS n FROM llm.calls WHERE purpose = 'plan.latency_probe' AND status = 'ok'")
    assert probes == [{"n": 3}]
    assert materialize_all(["--plan", "--select", "llm"]) == 0
    assert "(latency median of 3 stored calls)" in capsys.readouterr().out
