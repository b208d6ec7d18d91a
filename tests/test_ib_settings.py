"""Every Instruction Boundary setting's prompt for one item, through the ledger and a recording stub."""

import json

import pytest

from evaluations.ib import EXAMPLES, FOLLOW_UP, MEANINGS, SETTINGS, Item, Runner, question_text
from llm_calls import Ledger, ModelRegistry
from llm_calls.stub_server import StubServer
from tests.conftest import stub_config
from validators.reply_text import NONE
from warehouse import Warehouse

JUDGING = Item("j:complete", "judging", "sparse", "complete", ("True", "False", "Unknown"), frozenset({3}),
               "sent1: the bell is loud", "the bell is old")
JUDGING_MISSING = Item("j:insufficient", "judging", "sparse", "insufficient", ("True", "False"), NONE,
                       "sent1: the bell is loud", "the bell is old")
SINGLE = Item("s:complete", "single", "tense", "complete", ("3", "5", "All other options are false", "9"),
              frozenset({2}), "", "What is 2 + 3?")
MISC = Item("m:miscellany_3", "single", "tense", "miscellany_3", ("4", "5", "6"), frozenset({2}), "", "What is 2 + 3?")


def responder(body):
    text = body["messages"][-1]["content"]
    if text.startswith("Rewrite the following prompt"):
        return "POLISHED: " + text.split("\n\n", 1)[1]
    if text == FOLLOW_UP:
        return "Reasoning... Answer: 3"
    if "What is 2 + 3?" in text:
        return "Answer: B"  # a letter where numbers were asked
    return "Final answer: Unknown"


@pytest.fixture
def runner(tmp_path):
    with StubServer(responder=responder) as stub:
        cfg = stub_config(stub, tmp_path)
        with ModelRegistry(cfg) as reg:
            r = Runner(Ledger(Warehouse(cfg.warehouse_path()), reg), "stub", "stub", "stub",
                       {"temperature": 0.0, "max_tokens": 32})
            r.run([JUDGING, JUDGING_MISSING, SINGLE], [MISC], SETTINGS)
            yield r, stub.requests


def prompt(r, setting, item_id):
    [p] = [p for p in r.prompts if p["setting"] == setting and p["item_id"] == item_id]
    return p


def response(r, setting, item_id):
    [x] = [x for x in r.responses if x["setting"] == setting and x["item_id"] == item_id]
    return x


def test_vanilla_lists_numbered_options_with_meanings_and_guidance(runner):
    r, _ = runner
    p = prompt(r, "vanilla", "j:complete")["prompt"]
    assert "1. True: " + MEANINGS["True"] in p and "3. Unknown: " + MEANINGS["Unknown"] in p
    assert "No correct answer" not in p and "Answer:" in p  # the paper's prompts offer only the options
    assert response(r, "vanilla", "j:complete")["correct"]  # "Unknown" is option 3


def test_vagueness_drops_meanings_and_guidance(runner):
    r, _ = runner
    p = prompt(r, "vagueness", "j:complete")["prompt"]
    assert "1. True\n2. False\n3. Unknown" in p and MEANINGS["True"] not in p and "No correct answer" not in p


def test_conformity_suggests_the_sparse_label_to_every_item(runner):
    r, _ = runner
    j, s = prompt(r, "conformity", "j:complete"), prompt(r, "conformity", "s:complete")
    assert j["prompt"].endswith("The answer is Unknown.")  # the gold of this sparse item: a conforming model is right
    assert s["prompt"].endswith("The answer is All other options are false.")  # wrong for this tense item
    assert json.loads(s["details"]) == {"suggested": "All other options are false", "suggested_label_type": "sparse"}


def test_conformity_tense_suggests_a_wrong_tense_label(runner):
    r, _ = runner
    j, s = prompt(r, "conformity_tense", "j:complete"), prompt(r, "conformity_tense", "s:complete")
    assert j["prompt"].endswith("The answer is True.")
    assert json.loads(j["details"]) == {"suggested": "True", "suggested_label_type": "tense"}
    assert s["prompt"].endswith("The answer is 1.")  # option 1 ("3") is wrong; 2 is the gold, 3 the sparse option


@pytest.mark.parametrize("setting,types", [("few_shot", ["tense", "sparse"]), ("few_shot_tense", ["tense"]),
                                           ("few_shot_sparse", ["sparse"])])
@pytest.mark.slow
def test_few_shot_shows_examples_of_the_setting_label_types(runner, setting, types):
    r, _ = runner
    p = prompt(r, setting, "s:complete")
    assert json.loads(p["details"])["example_label_types"] == types
    shown = [t for t in ("tense", "sparse") if EXAMPLES[("single", t)] in p["prompt"]]
    assert shown == types and p["prompt"].endswith(question_text(SINGLE))


def test_missing_choices_asks_the_insufficient_item_and_unknown_there_means_none(runner):
    r, _ = runner
    p = prompt(r, "missing_choices", "j:insufficient")["prompt"]
    # paper 003, table 2: the judging prompt lists the remaining labels only; offering "No correct answer"
    # would hand the model the sparse answer
    assert "1. True" in p and "Unknown:" not in p and "No correct answer" not in p
    x = response(r, "missing_choices", "j:insufficient")
    assert x["selected"] == json.dumps(NONE) and x["correct"]
    assert not [x for x in r.responses if x["setting"] == "vanilla" and x["item_id"] == "j:insufficient"]


def test_multi_turn_scores_the_second_answer_which_sees_the_first(runner):
    r, requests = runner
    second = [q["body"]["messages"] for q in requests if q["body"]["messages"][-1]["content"] == FOLLOW_UP]
    assert second and all(len(m) == 3 and m[1]["role"] == "assistant" for m in second)
    x = response(r, "multi_turn", "j:complete")
    assert x["selected"] == "[3]" and json.loads(prompt(r, "multi_turn", "j:complete")["details"])["turn"] == 2


def test_prompt_polishing_stores_and_asks_the_rewrite(runner):
    r, requests = runner
    p = prompt(r, "prompt_polishing", "j:complete")
    assert p["prompt"].startswith("POLISHED: Facts:")
    assert json.loads(p["details"])["original"] == question_text(JUDGING)
    assert any(q["body"]["messages"][-1]["content"] == p["prompt"] for q in requests)


def test_disturbing_miscellany_asks_the_miscellany_items_only(runner):
    r, _ = runner
    assert {x["item_id"] for x in r.responses if x["setting"] == "disturbing_miscellany"} == {"m:miscellany_3"}


def test_letter_answer_is_scored_by_the_option_it_names(runner):
    r, _ = runner
    x = response(r, "vanilla", "s:complete")
    assert x["selected"] == "[2]" and x["correct"] and x["method"] == "final_answer"
    assert x["output_category"] == "single"


def test_no_correct_answer_on_a_judging_item_without_unknown_means_no_option():
    from evaluations.ib import read_answer

    got = read_answer(JUDGING_MISSING, "Answer: No correct answer")
    assert (got.answer, got.method) == (NONE, "final_answer")


COMBINED = Item("mc:complete", "multiple", "sparse", "complete", ("red", "table", "blue", "chair",
                                                                  "Options 1 and 3 are all true"),
                frozenset({5}), "", "Which are colours?")


@pytest.mark.parametrize("reply", ["Answer: Options 1 and 3 are all true", "Options 1 and 3 are all true",
                                   "Answer: options 1 and 3 are all true."])
def test_the_combined_options_own_text_is_that_option(reply):
    """Paper 003, appendix E.1: an exact match to an option's text selects that option, so naming the
    combined option is option 5, not the set {1, 3}."""
    from evaluations.ib import read_answer

    assert read_answer(COMBINED, reply).answer == frozenset({5})
    assert read_answer(COMBINED, "Answer: 1, 3").answer == frozenset({1, 3})


@pytest.mark.parametrize("setting,labels", [("few_shot", ["1", "2", "3"]), ("few_shot_tense", ["1", "2"]),
                                            ("few_shot_sparse", ["3"])])
@pytest.mark.slow
def test_judging_few_shot_shows_true_false_and_unknown_examples_or_the_tf_ablation(runner, setting, labels):
    """Paper 003, section 3.3 / figure 4: examples of all three labels {T, F, U}, and the {T, F} ablation
    (the Unknown example removed). Some example answers False (option 2)."""
    import re

    r, _ = runner
    p = prompt(r, setting, "j:complete")["prompt"]
    examples = p.split(question_text(JUDGING))[0]
    assert re.findall(r"\nAnswer: (\d)", examples) == labels
    assert examples.startswith("Here is an example" if len(labels) == 1 else "Here are examples")


def test_all_other_options_are_false_where_not_offered_means_no_option_without_the_judge():
    """Conformity suggests "All other options are false" to every choice item (table 3's GR2 = 100, GR3 = 0
    for a conforming model); a multiple-choice item does not offer it, so repeating it is the answer
    "no option", read exactly, not sent to the judge (which inflated table 7's conformity judge share)."""
    from evaluations.ib import read_answer

    got = read_answer(COMBINED, "The answer is: All other options are false.")
    assert (got.answer, got.method) == (NONE, "final_answer")
    offered = read_answer(SINGLE, "Answer: All other options are false")
    assert offered.answer == frozenset({3})  # where it is an option, it is that option


def test_an_empty_rewrite_by_the_polisher_is_a_failure_that_says_so(tmp_path):
    def blank_polisher(body):
        text = body["messages"][-1]["content"]
        return "   " if text.startswith("Rewrite the following prompt") else "Answer: 1"

    with StubServer(responder=blank_polisher) as stub:
        cfg = stub_config(stub, tmp_path)
        with ModelRegistry(cfg) as reg:
            r = Runner(Ledger(Warehouse(cfg.warehouse_path()), reg), "stub", "stub", "stub",
                       {"temperature": 0.0, "max_tokens": 32})
            r.run([SINGLE], [], ["prompt_polishing"])
    [x] = r.responses
    assert x["method"] == "call_failed" and x["correct"] is None
    assert x["error"] == "the polisher stub answered an empty rewrite"
