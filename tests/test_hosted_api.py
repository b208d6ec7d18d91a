"""Hosted APIs as they are: reasoning models that refuse `max_tokens` and any temperature, and hide
their thinking while counting it; per-model `extra_body`; an empty reasoning field."""

import logging

import pytest

from assets.definitions import build_definitions
from configuration import ModelConfig, parse_config
from llm_calls import CallRequest, Ledger, ModelRegistry, call_key
from llm_calls.endpoints import wire_params
from llm_calls.stub_server import StubServer
from tests.conftest import materialize, stub_config, user
from tests.test_s1_assets import knows_the_answers
from validators.s1_read import HIDDEN_REASONING, format_type
from warehouse import Warehouse


def remote(model: str, **extra) -> ModelConfig:
    return ModelConfig(base_url="https://api.openai.com/v1", model=model, **extra)


@pytest.mark.parametrize("model", ["o1", "o3-mini", "o4-mini", "o4-mini-2025-04-16", "gpt-5", "gpt-5-mini",
                                   "gpt-5.1", "openai/o3"])
def test_openai_reasoning_ids_take_max_completion_tokens_and_no_temperature(model):
    m = remote(model)
    assert m.sent_token_param == "max_completion_tokens"
    assert m.refused_params == {"temperature", "top_p"}


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4o-mini", "Qwen/Qwen3-8B", "omni-7b", "o", "gpt-50x"])
def test_other_models_keep_max_tokens_and_every_sampling_parameter(model):
    m = remote(model)
    assert m.sent_token_param == "max_tokens" and m.refused_params == frozenset()


def test_explicit_settings_win_over_the_model_id():
    m = remote("o4-mini", token_param="max_tokens", unsupported_params=["seed"])
    assert m.sent_token_param == "max_tokens" and m.refused_params == {"seed"}


def test_wire_params_rename_the_budget_and_leave_out_refused_parameters():
    params = {"temperature": 0.6, "top_p": 0.95, "max_tokens": 512, "seed": 7}
    assert wire_params(params, "max_completion_tokens", frozenset({"temperature", "top_p"})) == {
        "max_completion_tokens": 512, "seed": 7}
    assert wire_params(params, "max_tokens", frozenset()) == params


def test_extra_body_and_core_fields_are_validated():
    with pytest.raises(ValueError, match="'messages' is set by the ledger"):
        remote("m", extra_body={"messages": []})
    with pytest.raises(ValueError, match="cannot be left out"):
        remote("m", unsupported_params=["model"])


def hosted(stub: StubServer, tmp_path, **model) -> Ledger:
    cfg = stub_config(stub, tmp_path, models={"o4": {"base_url": stub.base_url, "model": "o4-mini",
                                                     "concurrency": 4, **model}},
                      evaluate=["o4"], judge="o4")
    return Ledger(Warehouse(cfg.warehouse_path(), lock_timeout_s=30), ModelRegistry(cfg))


@pytest.mark.slow
def test_a_reasoning_model_is_called_as_it_requires_and_its_hidden_reasoning_recorded(tmp_path):
    with StubServer(hosted_reasoning=True, hidden_reasoning_tokens=96, responder=lambda b: "Paris") as stub:
        ledger = hosted(stub, tmp_path)
        results = ledger.complete("o4", [CallRequest(user(f"Capital of France? ({i})"),
                                                     {"temperature": 0.6, "top_p": 0.95, "max_tokens": 300})
                                         for i in range(3)])
    assert all(r.ok for r in results), [r.error for r in results]
    body = stub.requests[0]["body"]
    assert body["max_completion_tokens"] == 300
    assert not {"max_tokens", "temperature", "top_p"} & body.keys()
    assert all(r.reasoning_hidden and r.reasoning is None and r.reasoning_tokens == 96 for r in results)
    assert results[0].completion_tokens == 96 + 1  # the hidden reasoning is counted in the reply's tokens
    rows = ledger.warehouse.rows("SELECT reasoning_text, reasoning_tokens, request FROM llm.calls")
    assert len(rows) == 3 and all(r["reasoning_text"] is None and r["reasoning_tokens"] == 96 for r in rows)
    assert '"max_completion_tokens": 300' in rows[0]["request"]  # the request as sent


@pytest.mark.slow
def test_a_refused_parameter_is_reported_once_per_model_with_the_fix_not_retried_per_call(tmp_path, caplog):
    with StubServer(hosted_reasoning=True) as stub:
        # the settings of a non-reasoning model, written out: this is what a user's first try sends
        ledger = hosted(stub, tmp_path, token_param="max_tokens", unsupported_params=[], concurrency=2)
        with caplog.at_level(logging.INFO, logger="benchsmith.llm"):
            results = ledger.complete("o4", [CallRequest(user(f"question {i}")) for i in range(20)])
        sent = len(stub.requests)
    assert not any(r.ok for r in results)
    assert sent <= 2  # at most the calls already in flight when the first refusal came back
    assert all("token_param: max_completion_tokens" in r.error and "models.o4" in r.error for r in results)
    assert sum("no request sent" in r.error for r in results) >= 18
    assert all(r.attempts <= 1 for r in results)
    said = [m for m in caplog.messages if "refuses the parameter 'max_tokens'" in m]
    assert len(said) == 1
    # the same run's next batch asks nothing either
    more = ledger.complete("o4", [CallRequest(user("another question"))])
    assert not more[0].ok and len(stub.requests) == sent


def test_a_refused_temperature_names_unsupported_params_as_the_fix(tmp_path):
    with StubServer(hosted_reasoning=True) as stub:
        ledger = hosted(stub, tmp_path, unsupported_params=[], concurrency=1)
        results = ledger.complete("o4", [CallRequest(user(f"q{i}"), {"temperature": 0.6}) for i in range(5)])
    assert len(stub.requests) == 1
    assert all("add temperature to models.o4.unsupported_params" in r.error for r in results)
    assert "Unsupported value: 'temperature' does not support 0.6" in results[0].error


@pytest.mark.slow
def test_extra_body_reaches_the_request_and_the_cache_key(tmp_path):
    with StubServer() as stub:
        cfg = stub_config(stub, tmp_path, models={
            "qwen3": {"base_url": stub.base_url, "model": "Qwen/Qwen3-8B",
                      "extra_body": {"chat_template_kwargs": {"enable_thinking": False}, "reasoning_effort": "low"}},
            "plain": {"base_url": stub.base_url, "model": "Qwen/Qwen3-8B"}}, evaluate=["qwen3"], judge="plain")
        ledger = Ledger(Warehouse(cfg.warehouse_path()), ModelRegistry(cfg))
        [a] = ledger.complete("qwen3", [CallRequest(user("hello"))])
        [b] = ledger.complete("plain", [CallRequest(user("hello"))])
    first, second = (r["body"] for r in stub.requests)
    assert first["chat_template_kwargs"] == {"enable_thinking": False} and first["reasoning_effort"] == "low"
    assert "chat_template_kwargs" not in second
    assert a.key != b.key  # thinking on or off is another request
    assert a.key == call_key(ledger.registry.identity("qwen3"), user("hello"), {
        "temperature": 0.0, "max_tokens": 256, "chat_template_kwargs": {"enable_thinking": False},
        "reasoning_effort": "low"}, 0)


@pytest.mark.slow
def test_an_empty_reasoning_field_is_an_empty_think_block_format_101(tmp_path):
    with StubServer(responder=lambda body: "42") as stub:
        ledger = hosted(stub, tmp_path, token_param="max_tokens", unsupported_params=[])
        # a server whose reasoning parser ran and found nothing: reasoning_content ""
        [r] = ledger.complete("o4", [CallRequest(user("6 x 7? [[stub: empty_reasoning]]"))])
        [plain] = ledger.complete("o4", [CallRequest(user("6 x 7?"))])
    assert r.ok and r.reasoning == "" and not r.reasoning_hidden
    assert format_type(r.reply, r.finish_reason)[0] == 101
    assert ledger.warehouse.scalar("SELECT reasoning_text FROM llm.calls WHERE key = ?", [r.key]) == ""
    # without the field it is a reply with no marker at all
    assert plain.reasoning is None and format_type(plain.reply, plain.finish_reason)[0] == 207


def answers_plainly(body):
    """A hosted reasoning model: the answer alone, its thinking hidden."""
    reply = knows_the_answers(body)
    if reply is not None:
        return reply.split("</think>")[-1].strip()
    return "Answer: 1"


@pytest.mark.slow
def test_s1_bench_and_instruction_boundary_end_to_end_on_a_hosted_reasoning_model(tmp_path):
    with StubServer(responder=knows_the_answers) as builder, \
            StubServer(hosted_reasoning=True, hidden_reasoning_tokens=50, responder=answers_plainly) as o4:
        cfg = stub_config(builder, tmp_path, models={
            "stub": {"base_url": builder.base_url, "model": "stub-model", "concurrency": 4, "reasoning": True},
            "o4": {"base_url": o4.base_url, "model": "o4-mini", "concurrency": 4, "reasoning": True}},
            evaluate=["o4"], judge="stub",
            ib={"datasets": {"arithmetic": {"form": "single", "generator": "arithmetic",
                                            "count": {"demo": 2, "paper": 2}}},
                "settings": ["vanilla", "multi_turn"]})
        defs = build_definitions(cfg.source)
        s1 = [materialize(defs, [key]) for key in ("s1_items", "s1_responses", "s1_metrics")]
        ib = materialize(defs, ["ib_items", "ib_responses"], "arithmetic")
        ib_metrics = materialize(defs, ["ib_metrics"])
    assert all(r.success for r in s1) and ib.success and ib_metrics.success
    assert o4.requests and all("max_tokens" not in r["body"] and "temperature" not in r["body"]
                               and "max_completion_tokens" in r["body"] for r in o4.requests)
    wh = Warehouse(cfg.warehouse_path())
    calls = wh.rows("SELECT status, reasoning_tokens, reasoning_text, completion_tokens FROM llm.calls "
                    "WHERE model = 'o4'")
    assert calls and all(c["status"] == "ok" and c["reasoning_tokens"] == 50 and c["reasoning_text"] is None
                         and c["completion_tokens"] > 50 for c in calls)
    formats = wh.rows("SELECT DISTINCT format_type, well_formatted, method FROM s1.responses WHERE model = 'o4'")
    assert formats == [{"format_type": HIDDEN_REASONING, "well_formatted": True, "method": "exact"}]
    [t3] = wh.rows("SELECT * FROM s1.table3 WHERE lower(model) = 'o4'")
    # scored on its answers, and f-acc 100 as paper 002's table 3 prints it for o4-mini, Claude and Gemini
    assert (t3["pass@1"], t3["acc@k"], t3["f-acc"]) == (100.0, 100.0, 100.0)
    assert wh.scalar("SELECT value FROM s1.metrics WHERE model = 'o4' AND metric = 'reasoning_hidden' "
                     "AND level = 'all'") == 1.0
    # IB: the replies were read and scored (a model that always answers 1 is right where 1 is the gold)
    scored = wh.rows("SELECT r.correct, i.gold FROM ib.responses r JOIN ib.items i USING (dataset, item_id) "
                     "WHERE r.model = 'o4' AND r.setting = 'vanilla'")
    assert scored and all(r["correct"] == (r["gold"] == "[1]") for r in scored)
    assert wh.scalar("SELECT count(*) FROM ib.summary WHERE model = 'o4' AND acc IS NOT NULL") > 0


def test_config_file_round_trip_of_the_hosted_settings(tmp_path):
    cfg = parse_config({"models": {"gpt5": {"base_url": "https://api.openai.com/v1", "model": "gpt-5",
                                            "api_key_env": "OPENAI_API_KEY",
                                            "extra_body": {"reasoning_effort": "minimal"}}},
                        "evaluate": ["gpt5"], "judge": "gpt5"}, str(tmp_path / "c.yaml"))
    m = cfg.model("gpt5")
    assert m.sent_token_param == "max_completion_tokens" and m.extra_body == {"reasoning_effort": "minimal"}


@pytest.mark.slow
def test_per_model_system_prompt_and_prefill_as_the_s1_authors_evaluate(tmp_path):
    """Paper 002's evaluation code (WYRipple/S1_Bench): Nemotron gets the system prompt "detailed thinking
    on"; Light-R1 and Sky-T1 have their reply prefilled with "<think>\\n". Both are sent, both are in the
    cache key, and the prefill is put back before the continuation, so the reply reads as one block."""
    with StubServer(responder=lambda body: "2 + 3 = 5.\n</think>\n\n5") as stub:
        cfg = stub_config(stub, tmp_path, models={
            "nemotron": {"base_url": stub.base_url, "model": "nvidia/Nemotron", "system_prompt": "detailed thinking on"},
            "light-r1": {"base_url": stub.base_url, "model": "Light-R1-7B", "prefill": "<think>\n"},
            "plain": {"base_url": stub.base_url, "model": "Light-R1-7B"}}, evaluate=["light-r1"], judge="plain")
        ledger = Ledger(Warehouse(cfg.warehouse_path()), ModelRegistry(cfg))
        [n] = ledger.complete("nemotron", [CallRequest(user("What is 2 + 3?"))])
        [p] = ledger.complete("light-r1", [CallRequest(user("What is 2 + 3?"))])
        [q] = ledger.complete("plain", [CallRequest(user("What is 2 + 3?"))])
        [cached] = ledger.complete("light-r1", [CallRequest(user("What is 2 + 3?"))])
    nemotron, light, plain = (r["body"] for r in stub.requests)
    assert nemotron["messages"][0] == {"role": "system", "content": "detailed thinking on"}
    assert light["messages"][-1] == {"role": "assistant", "content": "<think>\n"}
    assert light["continue_final_message"] is True and light["add_generation_prompt"] is False
    assert "continue_final_message" not in plain and plain["messages"] == [{"role": "user", "content": "What is 2 + 3?"}]
    assert len({n.key, p.key, q.key}) == 3
    assert p.reply == "<think>\n2 + 3 = 5.\n</think>\n\n5" and cached.cached and cached.reply == p.reply
    assert format_type(p.reply, p.finish_reason)[0] == 100
    assert q.reply == "2 + 3 = 5.\n</think>\n\n5"  # no prefill, nothing put back
