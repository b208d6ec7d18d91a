"""The reply readers' contract beyond the corpus: how readings are made, the command, numbers,
the judge's own no-answer token, and reasoning stored by the ledger."""

import json
import subprocess
import sys

import pytest

from llm_calls import CallRequest
from validators.judge import Judge, OptionsCase
from validators.read import read_label, read_number, read_options
from validators.reply_text import NONE, answer_part


def cli(kind: str, reply: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "validators.read", kind, *args], input=reply, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def test_command_reads_a_label_with_its_method():
    assert cli("label", "Reasoning...\nFinal answer: False") == {"answer": "False", "method": "final_answer",
                                                                 "evidence": "False"}


def test_command_says_needs_judge_and_asks_no_judge():
    got = cli("label", "The hypothesis is not proved.")
    assert got["answer"] is None and got["method"] == "needs_judge"


def test_command_reads_option_sets_sorted_and_none():
    assert cli("choices", "Answer: 3, 1", "--options", "4")["answer"] == [1, 3]
    assert cli("choice", "Answer: B", "--options", "4")["answer"] == 2
    assert cli("choice", "No correct answer", "--options", "4")["answer"] == NONE


def test_command_reads_subsets_from_the_final_block():
    reply = "2 + 14 = 16 and 5 + 11 = 16 in my head.\n\nSolution 1: {2, 14}\nTotal 1 feasible solutions shown above."
    got = cli("subsetsum", reply, "--problem", json.dumps({"values": [2, 5, 11, 14]}))
    assert got["answer"] == [[2, 14]] and got["claimed_total"] == 1


def test_command_reads_numbers_and_out_of_range():
    assert cli("number", "答案是180")["answer"] == 180
    got = cli("number", "Total: 3000000000")
    assert got["answer"] is None and got["method"] == "out_of_range"


def test_command_rejects_a_bad_kind_with_usage():
    out = subprocess.run([sys.executable, "-m", "validators.read", "colour"], input="red", capture_output=True, text=True)
    assert out.returncode == 2 and "invalid choice" in out.stderr


@pytest.mark.parametrize("reply,value,method", [
    ("42", 42, "strict"), ("The answer is 3.5.", 3.5, "final_answer"), ("So there are 1,250 apples.", 1250, "conclusion"),
    ("We have 3 boxes and 4 bags.", None, "needs_judge"), ("<think>It is 7</think>\n8", 8, "strict"),
])
def test_numbers(reply, value, method):
    got = read_number(reply)
    assert (got.answer, got.method) == (value, method)


def test_thinking_is_split_from_the_answer():
    assert answer_part("<think>draft: False</think>\nTrue") == ("draft: False", "True", True)
    assert answer_part("<think>cut here", None)[1:] == ("", False)
    assert answer_part("True", "reasoning field") == ("reasoning field", "True", True)
    assert read_label("<think>The answer is False") .method == "unfinished_thinking"


def test_final_answer_wins_over_reasoning_words_for_options():
    assert read_options("I was uncertain, but the answer is 2.", 4).answer == frozenset({2})
    assert read_options("uncertain", 4).answer == NONE  # appendix E: a stated no-answer indicator


def test_judge_no_answer_token_is_undecided_not_none(stub, stub_ledger):
    stub.responder = lambda body: "NO_ANSWER"
    got = Judge(stub_ledger, "stub").read_options([OptionsCase("I like both.", ["a", "b", "c"])], "test.judge")[0]
    assert got.answer is None and got.method == "judge_no_answer"


def test_judge_reads_option_numbers_and_none(stub, stub_ledger):
    stub.responder = lambda body: "NONE" if "nothing fits" in body["messages"][-1]["content"] else "2, 3"
    got = Judge(stub_ledger, "stub").read_options([OptionsCase("b and c, I'd say", ["a", "b", "c"], multiple=True),
                                                   OptionsCase("nothing fits", ["a", "b", "c"])], "test.judge")
    assert [(g.answer, g.method) for g in got] == [(frozenset({2, 3}), "judge"), (NONE, "judge")]


def test_failed_judge_call_is_a_failed_judgement(stub_ledger):
    got = Judge(stub_ledger, "stub").read_labels(["[[stub: status=400]] whatever"], "test.judge")[0]
    assert got.answer is None and got.method == "judge_failed" and "HTTP 400" in got.evidence


def test_ledger_stores_separate_reasoning_and_gives_the_reply_as_produced(stub_ledger):
    req = [CallRequest([{"role": "user", "content": "hi [[stub: reasoning]]"}])]
    first = stub_ledger.complete("stub", req)[0]
    again = stub_ledger.complete("stub", req)[0]
    row = stub_ledger.warehouse.rows("SELECT reasoning_text, reasoning_tokens FROM llm.calls")[0]
    assert first.ok and first.reasoning == "Let me think step by step about this." and first.reasoning_tokens == 8
    assert again.cached and again.reasoning == first.reasoning and again.reply == first.reply
    assert first.reply.startswith("<think>\nLet me think") and "</think>" in first.reply
    assert row == {"reasoning_text": "Let me think step by step about this.", "reasoning_tokens": 8}


def test_reply_cut_inside_reasoning_is_an_answered_truncated_call(stub_ledger):
    r = stub_ledger.complete("stub", [CallRequest([{"role": "user", "content": "[[stub: reasoning length]]"}])])[0]
    assert r.ok and r.truncated and r.text == "" and "</think>" not in r.reply
    assert read_label(r.reply).method == "unfinished_thinking"
