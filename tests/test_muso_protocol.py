"""The MuSoBench three-turn protocol through the ledger, with controlled model replies."""

import json

import pytest

from configuration import ModelConfig
from evaluations.muso import CONFIDENCE_PROMPT, EXPLORATION_CUE, RECHECK_PROMPT, SHORT_COT_SUFFIX, Item, run
from llm_calls import Ledger, ModelRegistry
from llm_calls.stub_server import StubServer
from tests.conftest import stub_config
from warehouse import Warehouse

ITEM = Item("ss-x", "subsetsum", 1, {"values": [1, 2, 3, 4], "target": 5},
            "Given the set of unique integers: {1, 2, 3, 4}\nFind all subsets that sum exactly to the target: 5",
            frozenset({(1, 4), (2, 3)}))


def scripted(replies):
    def respond(body):
        last = body["messages"][-1]["content"]
        for marker, reply in replies.items():
            if marker in last:
                return reply
        return None
    return respond


def ledger_for(stub, tmp_path):
    cfg = stub_config(stub, tmp_path)
    reg = ModelRegistry(cfg)
    return Ledger(Warehouse(cfg.warehouse_path()), reg), reg


@pytest.mark.slow
def test_three_turns_scored_from_controlled_replies(tmp_path):
    replies = {"subset-sum task": "Solution 1: {1, 4}\nSolution 2: {1, 2}\nTotal 2 feasible solutions shown above.",
               "rate your confidence": "[[CONFIDENCE: \\boxed{90}]]",
               "Recheck all your answers": "[[CHANGE]]\nSolution 1: {1, 4}\nSolution 2: {2, 3}"}
    with StubServer(responder=scripted(replies)) as stub:
        ledger, reg = ledger_for(stub, tmp_path)
        [row] = run(ledger, "stub", [ITEM], "short_cot", "standard", 0.2, 128, 16)
        reg.close()
        bodies = [r["body"] for r in stub.requests]
    assert row["status"] == "ok" and row["n_first"] == 2 and row["n_first_correct"] == 1
    assert row["precision"] == 0.5 and row["recall"] == 0.5 and row["claimed_total"] == 2
    assert row["confidence"] == 90.0 and row["confidence_method"] == "tagged"
    assert row["recheck"] == "changed" and row["n_second_correct"] == 2
    assert (row["retention"], row["correction"], row["discovery"]) == (1.0, 1.0, 0.5)
    # one conversation: each turn carries the earlier ones; the paper's prompts, Short-CoT suffix on the first
    assert [len(b["messages"]) for b in bodies] == [1, 3, 5]
    assert bodies[0]["messages"][0]["content"].endswith(SHORT_COT_SUFFIX)
    assert bodies[1]["messages"][-1]["content"] == CONFIDENCE_PROMPT
    assert bodies[2]["messages"][-1]["content"] == RECHECK_PROMPT
    assert bodies[0]["temperature"] == 0.2 and bodies[0]["max_tokens"] == 128 and bodies[1]["max_tokens"] == 16
    assert len(json.loads(row["call_keys"])) == 3


@pytest.mark.slow
def test_long_cot_prompt_has_no_step_by_step_suffix(tmp_path):
    with StubServer() as stub:
        ledger, reg = ledger_for(stub, tmp_path)
        run(ledger, "stub", [ITEM], "long_cot", "standard", 0.2, 64, 16)
        reg.close()
        first = stub.requests[0]["body"]["messages"][0]["content"]
    assert "Think step by step" not in first and "The question is Given the set" in first


@pytest.mark.slow
def test_unchanged_recheck_keeps_the_first_answer(tmp_path):
    replies = {"subset-sum task": "Solution 1: {1, 4}", "rate your confidence": "80",
               "Recheck all your answers": "I checked. [[UNCHANGE]]"}
    with StubServer(responder=scripted(replies)) as stub:
        ledger, reg = ledger_for(stub, tmp_path)
        [row] = run(ledger, "stub", [ITEM], "short_cot", "standard", 0.2, 64, 16)
        reg.close()
    assert row["recheck"] == "unchanged" and row["answers_second"] == row["answers_first"]
    assert (row["retention"], row["correction"], row["discovery"]) == (1.0, None, 0.0)


@pytest.mark.slow
def test_exploration_cue_adds_the_new_solutions(tmp_path):
    replies = {"subset-sum task": "Solution 1: {1, 4}", EXPLORATION_CUE: "You are right: Solution 2: {2, 3}",
               "rate your confidence": "[[CONFIDENCE: \\boxed{70}]]", "Recheck": "[[UNCHANGE]]"}
    with StubServer(responder=scripted(replies)) as stub:
        ledger, reg = ledger_for(stub, tmp_path)
        [row] = run(ledger, "stub", [ITEM], "short_cot", "exploration", 0.2, 64, 16)
        reg.close()
        contents = stub.contents()
    assert contents[1] == EXPLORATION_CUE
    assert row["variant"] == "exploration" and row["recall"] == 1.0


@pytest.mark.slow
def test_failed_solve_call_is_a_failure_row_never_an_answer(tmp_path):
    broken = Item("ss-broken", "subsetsum", 1, ITEM.problem, ITEM.question + " [[stub: status=500 times=99]]",
                  ITEM.truth)
    with StubServer() as stub:
        ledger, reg = ledger_for(stub, tmp_path)
        rows = run(ledger, "stub", [broken, ITEM], "short_cot", "standard", 0.2, 64, 16)
        reg.close()
    failed, ok = rows
    assert failed["status"] == "call_failed" and "HTTP 500" in failed["error"]
    assert failed["answers_first"] is None and failed["recall"] is None and failed["confidence"] is None
    assert ok["status"] == "ok"


def test_self_consistency_uses_sample_indexes_and_adds_aggregates(tmp_path):
    with StubServer(responder=scripted({"subset-sum task": "Solution 1: {1, 4}", "confidence": "50"})) as stub:
        ledger, reg = ledger_for(stub, tmp_path)
        rows = run(ledger, "stub", [ITEM], "short_cot", "self_consistency", 0.7, 64, 16, paths=3)
        reg.close()
        seeds = {r["body"]["seed"] for r in stub.requests if len(r["body"]["messages"]) == 1}
    assert [r["variant"] for r in rows] == ["sc_path", "sc_path", "sc_path", "sc_vote", "sc_median"]
    assert [r["path"] for r in rows[:3]] == [0, 1, 2] and len(seeds) == 3  # distinct samples
    assert rows[3]["recall"] == 0.5 and rows[4]["confidence"] == 50.0
    assert all(r["recheck"] is None for r in rows)  # table 2 has no recheck turn


@pytest.mark.slow
def test_rerun_is_served_from_the_ledger(tmp_path):
    with StubServer(responder=scripted({"subset-sum": "Solution 1: {2, 3}"})) as stub:
        ledger, reg = ledger_for(stub, tmp_path)
        first = run(ledger, "stub", [ITEM], "short_cot", "standard", 0.2, 64, 16)
        n = len(stub.requests)
        again = run(ledger, "stub", [ITEM], "short_cot", "standard", 0.2, 64, 16)
        reg.close()
        assert len(stub.requests) == n == 3
    assert first == again


def test_reflection_prefix_pauses_after_n_reflection_steps():
    from evaluations.muso import reflection_prefix

    thinking = "Try 1 + 4 = 5.\nWait, 2 + 3 = 5 as well.\nHmm, anything with three?\nNo."
    assert reflection_prefix(thinking, 0) == "Try 1 + 4 = 5."
    assert reflection_prefix(thinking, 1) == "Try 1 + 4 = 5.\nWait, 2 + 3 = 5 as well."
    assert reflection_prefix(thinking, 2) is None  # two reflections only: the model ended on its own


@pytest.mark.slow
def test_reflection_checkpoints_insert_think_end_and_record_each_intermediate_answer(tmp_path):
    """Paper 001, section 5 / figure 6a: Long-CoT paused after N reflection steps, </think> inserted, the
    answer then given recorded with its confidence; more reflection here finds the second solution."""
    from evaluations.muso import checkpoints

    solve = ("<think>\nTry 1 + 4 = 5.\nWait, 2 + 3 = 5 as well.\nHmm, anything with three?\nNo.\n</think>\n\n"
             "Solution 1: {1, 4}\nSolution 2: {2, 3}")

    def respond(body):
        last = body["messages"][-1]
        if last["role"] == "assistant":  # a paused turn to continue: answer from what was thought so far
            return "Solution 1: {1, 4}\nSolution 2: {2, 3}" if "Wait" in last["content"] else "Solution 1: {1, 4}"
        if "rate your confidence" in last["content"]:
            return "[[CONFIDENCE: \\boxed{80}]]"
        return solve

    with StubServer(responder=respond) as stub:
        ledger, reg = ledger_for(stub, tmp_path)
        rows = checkpoints(ledger, "stub", [ITEM], [0, 1, 2], temperature=0.6, solve_max_tokens=256,
                           confidence_max_tokens=16, continue_params=ModelConfig(embedded="smollm2-135m-instruct")
                           .prefill_params)
        reg.close()
        bodies = [r["body"] for r in stub.requests]
    by = {r["variant"]: r for r in rows}
    assert set(by) == {"checkpoint_0", "checkpoint_1"}  # the reply has two reflection steps
    assert by["checkpoint_0"]["recall"] == 0.5 and by["checkpoint_1"]["recall"] == 1.0
    assert by["checkpoint_0"]["confidence"] == 80.0 and by["checkpoint_0"]["paradigm"] == "long_cot"
    paused = [b for b in bodies if b["messages"][-1]["role"] == "assistant"]
    assert len(paused) == 2 and all(b["continue_final_message"] is True and b["add_generation_prompt"] is False
                                    for b in paused)
    assert {b["messages"][-1]["content"] for b in paused} == {  # requests arrive in any order
        "<think>\nTry 1 + 4 = 5.\n</think>\n\n", "<think>\nTry 1 + 4 = 5.\nWait, 2 + 3 = 5 as well.\n</think>\n\n"}
    assert not any(SHORT_COT_SUFFIX in b["messages"][0]["content"] for b in bodies)  # Long-CoT's prompt


def test_a_checkpoint_answer_filed_under_reasoning_content_is_read():
    """A server with a reasoning parser (vLLM's) that sees no </think> among the generated tokens files
    the whole continuation under `reasoning_content`; the thinking was closed in the prompt, so that
    text is the checkpoint's answer (it read as no answer, recall 0, at every checkpoint)."""
    from evaluations.muso import checkpoint_continuation, parse_answer
    from llm_calls import CallResult

    def result(text, reasoning):
        return CallResult(key="k", ok=True, text=text, finish_reason="stop", prompt_tokens=1, completion_tokens=1,
                          latency_s=0.1, attempts=1, error=None, cached=False, reasoning=reasoning)

    head = "<think>\nTry 1 + 4 = 5.\n</think>\n\n"
    filed = result("", "Solution 1: {1, 4}\nSolution 2: {2, 3}")
    assert checkpoint_continuation(filed) == "Solution 1: {1, 4}\nSolution 2: {2, 3}"
    assert parse_answer(ITEM, head + checkpoint_continuation(filed)).answer_set == {(1, 4), (2, 3)}
    split = result("Solution 1: {1, 4}", "more thinking")  # the server split it: the content is the answer
    assert checkpoint_continuation(split) == "Solution 1: {1, 4}"


def test_checkpoints_are_scored_on_their_own_replies_and_over_one_fixed_set():
    """Each checkpoint_<n> averages over the replies with more than n reflection steps, a set that shrinks
    as n grows; checkpoint_<n>_fixed scores the conversations that reached every checkpoint, so the curve
    over n (paper 001, figure 6a) shows the trend without the change of set."""
    from evaluations.muso import fixed_checkpoint_rows, metric_rows

    def row(instance, variant, recall):
        return {"model": "m", "paradigm": "long_cot", "variant": variant, "path": 0, "instance_id": instance,
                "task": "subsetsum", "level": 1, "level_lo": 1, "level_hi": 50, "status": "ok", "recall": recall,
                "precision": recall, "confidence": None, "discovery": None, "temperature": 0.6,
                "n_first_invalid": 0, "parse_error": None, "truncated": False, "claimed_total": None}

    rows = [row("a", "checkpoint_0", 0.2), row("a", "checkpoint_1", 0.4),  # a reached both checkpoints
            row("b", "checkpoint_0", 1.0)]  # b stopped reflecting after one step
    fixed = fixed_checkpoint_rows(rows)
    assert [(r["instance_id"], r["variant"]) for r in fixed] == [("a", "checkpoint_0_fixed"), ("a", "checkpoint_1_fixed")]
    recall = {r["variant"]: r["recall"] for r in metric_rows(rows, {"subsetsum": [(1, 50)]}) if r["level"] == 0}
    assert recall["checkpoint_0"] == pytest.approx(0.6) and recall["checkpoint_1"] == pytest.approx(0.4)  # falls
    assert recall["checkpoint_0_fixed"] == pytest.approx(0.2) and recall["checkpoint_1_fixed"] == pytest.approx(0.4)
