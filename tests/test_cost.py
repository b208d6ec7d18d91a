"""Tokens and cost before a run (`--plan`) and what a run spent (reporting/cost.py)."""

from __future__ import annotations

import json

import pytest
import yaml

from assets.materialize_all import main as materialize_all
from configuration import Price, load_config
from llm_calls import CallRequest
from llm_calls.stub_server import StubServer
from reporting import cost, plan
from tests.conftest import stub_config, user
from tests.test_plan import SMALL, _answer, small  # noqa: F401  (`small` is a fixture)
from warehouse import Warehouse

PRICE = {"input_per_mtok": 2.0, "output_per_mtok": 8.0, "cached_input_per_mtok": 0.5, "batch_discount": 0.5}


@pytest.fixture
def two_models(small):  # noqa: F811  (the fixture of tests/test_plan.py)
    """The small configuration run for model `stub`; a second model `second` configured, not yet run."""
    assert materialize_all([]) == 0
    data = yaml.safe_load(open(small.source))
    data["models"]["second"] = {"base_url": small.models["stub"].base_url, "model": "second-model", "price": PRICE,
                                "sampling": {"temperature": 0.0, "max_tokens": 64}, "system_prompt": "You are careful."}
    data["evaluate"].append("second")
    open(small.source, "w").write(yaml.safe_dump(data, sort_keys=False))
    return load_config(small.source)


@pytest.mark.slow
def test_the_plan_counts_the_prompt_tokens_of_the_requests_the_run_then_sends(two_models, capsys):
    cfg = two_models
    wh = Warehouse(cfg.warehouse_path())
    rows = plan.with_cache(plan.plan_lines(cfg, wh, models=["second"]), plan.stored_calls(cfg, wh))
    est = cost.estimates(cfg, wh, plan.query_of(wh), {(r.line.model, r.line.step) for r in rows})
    planned = {(c.model, c.step): c for c in cost.step_costs(cfg, rows, est)}
    counted = {k: c for k, c in planned.items() if c.prompt_source == "counted" and k[0] == "second"}
    # every family's first turns are counted from its own request builders
    assert {"muso.standard.solve", "waken.direct", "ib.vanilla", "ib.conformity"} <= {s for _, s in counted}
    # S1-Bench's evaluation is counted once items are accepted (the stub's replies accept none here)
    assert (("second", "s1.evaluate") in counted) == bool(wh.scalar("SELECT count(*) FROM s1.items"))
    assert materialize_all(["--model", "second"]) == 0
    sent: dict[str, list[int]] = {}
    for r in wh.rows("SELECT purpose, request FROM llm.calls WHERE model = 'second' AND purpose NOT LIKE 'models.%'"):
        sent.setdefault(r["purpose"], []).append(cost.request_tokens(json.loads(r["request"])["messages"]))
    compared = [step for _, step in counted if step in sent]  # vanilla and multi-turn's first turn are one request
    assert {"muso.standard.solve", "waken.direct", "ib.vanilla"} <= set(compared)
    for step in compared:
        c = counted[("second", step)]
        assert len(sent[step]) == c.new, step
        assert c.prompt_tokens == pytest.approx(sum(sent[step])), step  # the system prompt included
    # the second turns were estimated from the stored requests of the first model's run
    later = planned[("second", "muso.standard.confidence")]
    assert later.prompt_source == "stored requests" and later.completion_source == "budget"
    # the plan's text carries the table and the total
    capsys.readouterr()
    assert materialize_all(["--plan", "--latency", "1"]) == 0
    text = capsys.readouterr().out
    assert "prompt tokens" in text and "Total cost of the new calls:" in text


@pytest.mark.slow
def test_completion_tokens_are_the_observed_mean_where_the_ledger_holds_calls_of_the_model(two_models):
    cfg = two_models
    wh = Warehouse(cfg.warehouse_path())
    est = cost.estimates(cfg, wh, plan.query_of(wh), {("stub", "waken.direct"), ("second", "waken.direct")})
    mean = wh.scalar("SELECT avg(completion_tokens) FROM llm.calls WHERE model = 'stub' AND purpose = 'waken.direct' "
                     "AND status = 'ok'")
    assert est[("stub", "waken.direct")].completion_source == "observed"
    assert est[("stub", "waken.direct")].completion == pytest.approx(mean)
    assert est[("second", "waken.direct")].completion_source == "budget"
    assert est[("second", "waken.direct")].completion == SMALL["waken"]["max_tokens"]["demo"]


def test_a_price_charges_input_cached_input_output_and_the_batch_discount(tmp_path):
    with StubServer() as stub:
        cfg = stub_config(stub, tmp_path)
    m = cfg.model("stub").model_copy(update={"price": Price(**PRICE)})
    # 1M prompt tokens, a quarter from the cache, and 0.5M completion tokens
    assert cost.price_of(m, 1e6, 5e5, 0.25) == pytest.approx(0.75 * 2.0 + 0.25 * 0.5 + 0.5 * 8.0)
    assert cost.price_of(m, 1e6, 5e5, 0.25, in_batch=True) == pytest.approx((0.75 * 2.0 + 0.25 * 0.5 + 0.5 * 8.0) / 2)
    assert cost.price_of(cfg.model("stub"), 1e6, 1e6) is None  # no price, no cost


@pytest.mark.slow
def test_the_run_summary_says_what_the_run_spent_from_the_stored_usage(tmp_path, monkeypatch, capsys):
    with StubServer(responder=_answer) as stub:
        small = {**SMALL, "ib": {**SMALL["ib"], "settings": ["vanilla"]}}
        cfg = stub_config(stub, tmp_path, **small)
        data = yaml.safe_load(open(cfg.source))
        data["models"]["stub"]["price"] = PRICE
        open(cfg.source, "w").write(yaml.safe_dump(data, sort_keys=False))
        monkeypatch.setenv("BENCHSMITH_CONFIG", cfg.source)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
        assert materialize_all(["--select", "ib"]) == 0
        out = capsys.readouterr().out
        wh = Warehouse(cfg.warehouse_path())
        t = wh.rows("SELECT count(*) AS n, sum(prompt_tokens) AS p, sum(completion_tokens) AS c FROM llm.calls")[0]
        line = next(x for x in out.splitlines() if x.startswith("Spent by this run: "))
        assert f"stub: {t['n']} calls, {t['p']:,} prompt (0 from the provider's prompt cache) + {t['c']:,} completion tokens" in line
        spent = (t['p'] * 2.0 + t['c'] * 8.0) / 1e6
        assert f"= {spent:,.{2 if spent >= 1 else 4}f} USD" in line
        # a rerun answered from the ledger spends nothing
        assert materialize_all(["--select", "ib"]) == 0
        assert "Spent by this run" not in capsys.readouterr().out


def test_the_ledger_stores_the_prompt_tokens_a_provider_served_from_its_cache(stub_ledger):
    stub_ledger.complete("stub", [CallRequest(user("A long shared prefix. [[stub: cached=3]]"))], purpose="t")
    assert stub_ledger.warehouse.scalar("SELECT cached_prompt_tokens FROM llm.calls") == 3
