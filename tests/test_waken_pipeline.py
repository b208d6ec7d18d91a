"""The WakenLLM pipeline through the ledger with a scripted model whose behaviour is known."""

import re

import pytest

from evaluations.waken import STIMULATION, Item, Pipeline
from evaluations.waken_metrics import identity_violations, metric_rows
from llm_calls import Ledger, ModelRegistry
from llm_calls.stub_server import StubServer
from tests.conftest import stub_config
from warehouse import Warehouse

ITEMS = [Item("s1", "fact", "True", "sent1: Ada is red", "Ada is red"),
         Item("s2", "story", "False", "Bo is not tall.", "Bo is tall"),
         Item("u1", "fact", "Unknown", "sent1: Cy is calm", "Cy is old")]


def scripted(body):
    """Answers Unknown at first, False under stimulation, True when told stage 1 was wrong,
    conforms to any suggested label, and judges nothing."""
    text = body["messages"][-1]["content"]
    if "Output only True or False" in text:
        return "False"
    if "What mainly caused" in text:
        return "B"
    if "does the reply give as its final answer" in text:
        return "NO_ANSWER"
    suggested = re.search(r"A suggested label for it is: (\w+)", text)
    if suggested:
        return f"Final answer: {suggested.group(1)}"
    if "that answer was wrong" in text:
        return "Final answer: True"
    if "or the reasoning behind it, may be wrong" in text:
        return "Final answer: False"
    if text.startswith("Examples:"):
        return "I cannot tell."  # few-shot: nothing decides, the judge says NO_ANSWER
    return "Final answer: Unknown"


@pytest.fixture
def run(tmp_path):
    with StubServer(responder=scripted) as stub:
        cfg = stub_config(stub, tmp_path)
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)
            rows = Pipeline(ledger, "stub", "stub", ITEMS, 0.5, 1.0, 64, seed=1).run(
                [1.0, 0.0], ["cot", "few_shot", "self_reflection"])
        yield rows, [r["body"] for r in stub.requests]


def outcomes(rows, step, setting="vanilla"):
    return {r["item_id"]: (r["prediction"], r["outcome"]) for r in rows if r["step"] == step and r["setting"] == setting}


def test_vague_perception_and_two_stages(run):
    rows, _ = run
    assert outcomes(rows, "direct") == {"s1": ("Unknown", "wrong"), "s2": ("Unknown", "wrong"),
                                        "u1": ("Unknown", "correct")}
    assert outcomes(rows, "diagnosis") == {"u1": ("False", "explanation_fails")}
    assert outcomes(rows, "stage1") == {"s1": ("False", "FC"), "s2": ("False", "TC"), "u1": ("False", "FC")}
    assert outcomes(rows, "stage2") == {"s1": ("True", "TC"), "u1": ("True", "FC")}  # D_VP^2 = FC^1
    assert identity_violations(rows) == []


def test_stimulation_style_follows_the_dataset_form(run):
    _, bodies = run
    stage1 = [b["messages"][-1]["content"] for b in bodies
              if "or the reasoning behind it, may be wrong" in b["messages"][-1]["content"]
              and "suggested" not in b["messages"][-1]["content"] and "earlier reasoning" not in b["messages"][-1]["content"]]
    by_item = {("Ada" if "Ada is red" in t else "Bo" if "Bo is tall" in t else "Cy"): t for t in stage1}
    assert by_item["Ada"].startswith(STIMULATION["detailed"]) and by_item["Cy"].startswith(STIMULATION["detailed"])
    assert by_item["Bo"].startswith(STIMULATION["concise"])


def test_remind_then_guide_rates_change_the_outcome_of_a_conforming_model(run):
    rows, _ = run
    worst = outcomes(rows, "rtg_label_stage1", "M=1.000")
    best = outcomes(rows, "rtg_label_stage1", "M=0.000")
    assert all(o == "TC" for _, o in best.values())  # every assigned label right: a conformist is right
    assert not any(o == "TC" for _, o in worst.values())  # every assigned label wrong
    m = {(r["metric"], r["sample_type"], r["stage"], r["setting"]): r["value"]
         for r in metric_rows("stub", "d", rows, {"s": 2, "u": 1}, [1.0, 0.0], ["cot"])}
    assert m[("TCR", "s", "1", "M=0.000")] == pytest.approx(2 / 3)
    assert m[("TCR", "s", "1", "M=1.000")] == 0.0
    assert m[("Conf", "s", "all", "rtg_label")] is not None


def test_reasoning_is_shown_in_the_rp_settings(run):
    rows, bodies = run
    rp = [b["messages"][-1]["content"] for b in bodies if "earlier reasoning, which may contain flaws" in b["messages"][-1]["content"]]
    assert len(rp) == 3 + 2  # stage 1 on D_VP, stage 2 on FC^1
    assert set(outcomes(rows, "rtg_rp_stage1", "reasoning")) == {"s1", "s2", "u1"}
    assert set(outcomes(rows, "rtg_rp_stage2", "reasoning")) == {"s1", "u1"}


def test_ablation_reruns_unknown_converting_items_at_its_temperature(tmp_path):
    def stubborn(body):
        text = body["messages"][-1]["content"]
        return "B" if "mainly caused" in text else "False" if "Output only" in text else "Final answer: Unknown"

    with StubServer(responder=stubborn) as stub:
        cfg = stub_config(stub, tmp_path)
        with ModelRegistry(cfg) as reg:
            rows = Pipeline(Ledger(Warehouse(cfg.warehouse_path()), reg), "stub", "stub", ITEMS[:1], 0.5, 1.0, 64, 1).run([], [])
        temps = [r["body"]["temperature"] for r in stub.requests]
    assert outcomes(rows, "stage1") == {"s1": ("Unknown", "UC")}
    assert outcomes(rows, "ablation", "T=1.0") == {"s1": ("Unknown", "UC")}
    assert 1.0 in temps and 0.5 in temps
    assert outcomes(rows, "cause", "judge") == {"s1": (None, "reasoning_gap")}


def test_undecided_replies_go_to_the_judge_and_stay_undecided_when_it_cannot_tell(run):
    rows, bodies = run
    few = [r for r in rows if r["step"] == "baseline" and r["setting"] == "few_shot"]
    assert all(r["outcome"] == "undecided" and r["prediction"] is None and r["method"] == "judge_no_answer" for r in few)
    judged = [b for b in bodies if "does the reply give as its final answer" in b["messages"][-1]["content"]]
    # three identical undecided replies make one judge request (the ledger de-duplicates), at temperature 0
    assert len(judged) == 1 and judged[0]["temperature"] == 0.0


def test_failed_calls_are_failures_not_unknown(tmp_path):
    broken = [Item("x", "fact", "True", "sent1: [[stub: status=500 times=99]]", "q")]
    with StubServer() as stub:
        cfg = stub_config(stub, tmp_path)
        with ModelRegistry(cfg) as reg:
            rows = Pipeline(Ledger(Warehouse(cfg.warehouse_path()), reg), "stub", "stub", broken, 0.5, 1.0, 64, 1).run([], [])
    assert outcomes(rows, "direct") == {"x": (None, "call_failed")}
    assert not [r for r in rows if r["step"] == "stage1"]


def test_rtg_label_keeps_the_stimulation_and_adds_the_label(run):
    _, bodies = run
    guided = [b["messages"][-1]["content"] for b in bodies
              if "A suggested label for it is" in b["messages"][-1]["content"]
              and "that answer was wrong" not in b["messages"][-1]["content"]]
    assert guided and all(t.startswith((STIMULATION["detailed"], STIMULATION["concise"])) for t in guided)
    ada = [t for t in guided if "Ada is red" in t]
    assert all(t.startswith(STIMULATION["detailed"]) for t in ada)  # the vanilla stage-1 prompt plus the label only


def test_rpc_reruns_stage_1_with_the_stage_1_reasoning(run):
    _, bodies = run
    rp1 = [b["messages"][-1]["content"] for b in bodies
           if "earlier reasoning, which may contain flaws" in b["messages"][-1]["content"]
           and "that answer was wrong" not in b["messages"][-1]["content"]]
    # the scripted model answered Unknown directly and False under stimulation: stage 1's reasoning is shown
    assert len(rp1) == 3 and all("flaws:\nFinal answer: False" in t for t in rp1)


def test_the_cause_prompt_of_an_unknown_item_asks_about_its_failing_explanation(run):
    """Paper 000, sections 3.1 and 5.6: an unsolvable item is in the vague-perception set because its
    Unknown is right but its explanation fails; asking what caused "the wrong Unknown" would misstate it."""
    rows, bodies = run
    asked = [b["messages"][-1]["content"] for b in bodies if "What mainly caused" in b["messages"][-1]["content"]]
    about_u1 = [t for t in asked if "Cy is old" in t]
    about_s = [t for t in asked if "Cy is old" not in t]
    assert about_u1 and all("wrong Unknown" not in t and "failing explanation" in t for t in about_u1)
    assert about_s and all("wrong Unknown" in t and "The correct label is" in t for t in about_s)
    assert set(outcomes(rows, "cause", "judge")) == {"s1", "s2", "u1"}


def test_the_pipeline_makes_only_the_calls_its_steps_declare(tmp_path):
    """`steps` is what the plan counts; a run that asks a step it does not declare stops at once."""
    from evaluations.waken import steps

    declared = {s.purpose for s in steps(["cot"], [1.0], 1.0)}
    assert {"waken.direct", "waken.baseline.cot", "waken.rtg_label_stage1.M=1.000", "waken.ablation.T=1.0"} <= declared
    with StubServer(responder=scripted) as stub:
        cfg = stub_config(stub, tmp_path)
        with ModelRegistry(cfg) as reg:
            pipeline = Pipeline(Ledger(Warehouse(cfg.warehouse_path()), reg), "stub", "stub", ITEMS, 0.5, 1.0, 64, seed=1)
            pipeline.declared = {"waken.direct"}
            with pytest.raises(RuntimeError, match="waken.baseline.cot: a call `steps` does not declare"):
                pipeline.ledger.run_flows(lambda s: [pipeline.baseline(s, "cot", ITEMS[0])])
            assert stub.requests == []  # refused before anything was sent


def test_the_stimulation_never_tells_an_item_its_unknown_may_be_wrong(run):
    """Stage 1 stimulates every Vague Perception item alike: a solvable item answered Unknown and an
    Unknown item (Unknown right, explanation failing) get the same notice, which names no label; telling
    the Unknown items their Unknown may be wrong pushed them from their correct label."""
    _, bodies = run
    stage1 = [b["messages"][-1]["content"] for b in bodies
              if "or the reasoning behind it, may be wrong" in b["messages"][-1]["content"]]
    assert {t.split("\n")[0] for t in stage1} == {STIMULATION["detailed"].split("\n")[0],
                                                  STIMULATION["concise"].split("\n")[0]}
    assert not any("Unknown may be wrong" in b["messages"][-1]["content"] for b in bodies)
    assert any("Cy is old" in t for t in stage1) and any("Ada is red" in t for t in stage1)


def test_algorithm_3_reminds_stage_1_for_t_rounds_each_with_the_previous_rounds_reasoning(tmp_path):
    """Paper 000, algorithm 3 (appendix M): for t = 2..T the stage-1 prompt again, reminded with the
    reasoning of the round before, which is then replaced by this round's; TCR^(t) per round."""
    def reasons(body):
        text = body["messages"][-1]["content"]
        shown = re.search(r"may contain flaws:\n(.*?)\n\n", text, re.S)
        if shown and "that answer was wrong" not in text:
            return f"Round after [{shown.group(1)}]. Final answer: True"
        return scripted(body)

    with StubServer(responder=reasons) as stub:
        cfg = stub_config(stub, tmp_path)
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)
            rows = Pipeline(ledger, "stub", "stub", ITEMS[:1], 0.5, 1.0, 64, seed=1, rounds=4).run([], [])
    rounds = {r["setting"]: r for r in rows if r["step"] == "rtg_rp_stage1"}
    assert set(rounds) == {"reasoning", "reasoning:t=3", "reasoning:t=4"}
    assert rounds["reasoning"]["reply"] == "Round after [Final answer: False]. Final answer: True"
    assert rounds["reasoning:t=3"]["reply"].startswith("Round after [Round after [Final answer: False]")
    assert rounds["reasoning:t=4"]["reply"].startswith("Round after [Round after [Round after [")
    m = {(r["metric"], r["sample_type"], r["setting"]): r["value"]
         for r in metric_rows("stub", "fld", rows, {"s": 1, "u": 0}, [], [])}
    assert m[("TCR", "all", "rtg_rp:t=2")] == m[("TCR", "all", "rtg_rp:t=4")] == 1.0  # s1 is True: TC each round


def test_the_cause_prompt_of_a_choice_item_speaks_of_its_question_not_a_hypothesis():
    from evaluations.waken import cause_prompt

    item = Item("sci-1", "story", "friction", "A box slides on a rough floor.", "Which force slows the box?",
                ("friction", "magnetism"))
    unknown = Item("sci-2", "story", "Unknown", "A box slides.", "Which force slows the box?", ("friction", "magnetism"))
    for it in (item, unknown):
        text = cause_prompt(it, "I cannot tell.")
        assert "hypothesis" not in text.lower() and "Options:\n(A) friction" in text
    assert "The correct label is friction" in cause_prompt(item, "r")
    assert "hypothesis" in cause_prompt(ITEMS[0], "r")


@pytest.mark.slow
def test_style_swap_asks_stage_1_with_the_other_style_on_the_same_items(tmp_path):
    """Paper 000, section 5.4 and table 4: the stimulation styles swapped within the pipeline: each
    Vague Perception item is asked stage 1 with the other style too, and waken.table4 compares the two
    on the items decided under both, marking the style the pipeline uses."""
    from warehouse import Warehouse as Wh

    with StubServer(responder=scripted) as stub:
        cfg = stub_config(stub, tmp_path)
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)
            rows = Pipeline(ledger, "stub", "stub", ITEMS, 0.5, 1.0, 64, seed=1, style_swap=True).run([], [])
        bodies = [r["body"]["messages"][-1]["content"] for r in stub.requests]
    swapped = {r["item_id"]: r for r in rows if r["step"] == "stage1" and r["setting"] == "swapped"}
    assert set(swapped) == set(outcomes(rows, "stage1"))  # the same items as the vanilla stage 1
    ada = [t for t in bodies if "Ada is red" in t and "may be wrong" in t and "suggested" not in t
           and "earlier reasoning" not in t]
    assert {t.startswith(STIMULATION["detailed"]) for t in ada} == {True, False}  # fact: DS, then CS swapped
    m = metric_rows("stub", "fld", rows, {"s": 2, "u": 1}, [], [])
    wh = Wh(tmp_path / "t4.duckdb")
    wh.replace_partition("waken.metrics", [{**r, "dataset": "fld"} for r in m])
    wh.replace_partition("waken.items", [{"dataset": "fld", "item_id": it.item_id, "kind": "fld", "form": "fact",
                                          "sample_type": "x", "label": it.label, "original_label": it.label,
                                          "verified_label": None, "context": it.context, "question": it.question,
                                          "origin": "t", "extra": "{}", "dataset_seed": 1, "items_version": "1"}
                                         for it in ITEMS])
    t4 = {r["style"]: r for r in wh.rows("SELECT * FROM waken.table4")}
    assert set(t4) == {"CS", "DS"} and t4["DS"]["pipeline"] and not t4["CS"]["pipeline"]
    assert t4["DS"]["items"] == t4["CS"]["items"] == 3
