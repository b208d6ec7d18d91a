"""The S1-Bench construction loop's accept / reduce / drop rules on controlled validator replies."""

import json
import re
from collections import Counter

import pytest

from generators.s1 import Candidate, load_registry
from generators.s1_construction import Budgets, Construction
from llm_calls import Ledger, ModelRegistry
from llm_calls.stub_server import StubServer
from tests.conftest import stub_config
from validators.judge import Judge
from warehouse import Warehouse

REG = load_registry()


class Model:
    """Scripted stub: answers sums (optionally wrong), reduces, judges and discriminates on demand."""

    def __init__(self, wrong_every=None, judge_result=1, verdict="retain", reduce_to=None):
        self.wrong_every, self.judge_result, self.verdict = wrong_every, judge_result, verdict
        self.reduce_to = reduce_to or (lambda n: f"[question]What is {n} plus 1?[answer]{n + 1}")
        self.seen: Counter = Counter()
        self.reductions = 0

    def __call__(self, body):
        text = body["messages"][-1]["content"]
        if "**Question:**" in text or "could not be read as JSON" in text:
            return json.dumps({"explain": "scripted", "result": self.judge_result})
        if "reduce their difficulty" in text:
            self.reductions += 1
            return self.reduce_to(100 + self.reductions)
        if "Begin your analysis" in text:
            return f"Analysis...\nVerdict: {self.verdict}"
        m = re.search(r"What is (\d+) plus (\d+)\?", text)
        self.seen[text] += 1
        if m:
            right = int(m.group(1)) + int(m.group(2))
            wrong = self.wrong_every is not None and self.seen[text] % self.wrong_every == 0
            return f"The answer is {right + 1 if wrong else right}."
        return "I do not know."


def build(tmp_path, model, candidates, max_rounds=3, discriminators=(), annotations=None, chunk=200):
    with StubServer(responder=model) as stub:
        cfg = stub_config(stub, tmp_path)
        wh = Warehouse(cfg.warehouse_path())
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(wh, reg)
            c = Construction(ledger, REG, Judge(ledger, "stub"), 1, generators=[], discriminators=list(discriminators),
                             validators=["stub"], reducer="stub", temperatures=[0.0, 0.2, 0.4],
                             samples_per_temperature=10, max_rounds=max_rounds, dedup_threshold=0.97,
                             budgets=Budgets(validation=16), annotations=annotations or {}, chunk=chunk)
            c.initial = lambda *a: [_record(x) for x in candidates]  # controlled candidates
            c.run(["numerical reasoning"], ["en"], 1, True)
        wh.replace_partitions({"s1.candidates": c.candidates, "s1.rounds": c.rounds,
                               "s1.validations": c.validations, "s1.items": c.items})
        return c, wh, stub


def _record(spec):
    from generators.s1_construction import Record

    cid, q, a = spec
    check = {"type": "exact", "answers": [a]} if cid.endswith("-p") else None
    return Record(cid, Candidate("numerical reasoning", "en", q, a, check, "test"), None, 0)


def decisions(c, cid):
    return [(r["stage"], r["decision"]) for r in c.rounds if r["candidate_id"] == cid]


@pytest.mark.slow
def test_thirty_of_thirty_correct_is_accepted(tmp_path):
    c, wh, _ = build(tmp_path, Model(), [("sum-p", "What is 2 plus 3?", "5")])
    assert [i["item_id"] for i in c.items] == ["sum-p"]
    assert decisions(c, "sum-p") == [("validation", "accepted"), ("decision", "accepted")]
    assert wh.scalar("SELECT count(*) FROM s1.validations WHERE correct") == 30


@pytest.mark.slow
def test_twenty_nine_of_thirty_is_reduced_then_the_simpler_version_is_accepted(tmp_path):
    model = Model(wrong_every=30)  # the 30th answer to the question is wrong
    c, wh, _ = build(tmp_path, model, [("sum-p", "What is 2 plus 3?", "5")])
    v = json.loads([r for r in c.rounds if r["candidate_id"] == "sum-p" and r["stage"] == "validation"][0]["detail"])
    assert v == {"correct": 29, "answers": 30}
    assert decisions(c, "sum-p") == [("validation", "rejected"), ("reduction", "reduced")]
    child = c.items[0]
    assert child["item_id"] == "sum-p-r1" and child["root_candidate"] == "sum-p" and child["rounds_taken"] == 1
    # lineage in SQL: the accepted item back to its generated candidate, with every decision
    history = wh.rows(
        "WITH RECURSIVE chain(cid, parent, depth) AS ("
        " SELECT candidate_id, parent_id, 0 FROM s1.candidates WHERE candidate_id = 'sum-p-r1'"
        " UNION ALL SELECT c.candidate_id, c.parent_id, chain.depth + 1 FROM chain JOIN s1.candidates c ON c.candidate_id = chain.parent)"
        " SELECT chain.cid, r.stage, r.decision, (SELECT count(*) FROM s1.validations v WHERE v.candidate_id = chain.cid) AS answers"
        " FROM chain JOIN s1.rounds r ON r.candidate_id = chain.cid ORDER BY chain.depth DESC, r.stage")
    assert [(h["cid"], h["stage"], h["decision"]) for h in history] == [
        ("sum-p", "reduction", "reduced"), ("sum-p", "validation", "rejected"),
        ("sum-p-r1", "decision", "accepted"), ("sum-p-r1", "validation", "accepted")]
    assert {h["answers"] for h in history} == {30}


@pytest.mark.slow
def test_three_failed_rounds_drop_the_question(tmp_path):
    model = Model(wrong_every=1, judge_result=0)
    c, wh, _ = build(tmp_path, model, [("sum-p", "What is 2 plus 3?", "5")], max_rounds=3)
    assert c.items == []
    ids = [x["candidate_id"] for x in c.candidates]
    assert ids == ["sum-p", "sum-p-r1", "sum-p-r2", "sum-p-r3"]
    assert model.reductions == 3
    assert decisions(c, "sum-p-r3") == [("validation", "rejected"), ("decision", "dropped")]
    # a judged candidate stops being judged at its first wrong answer, and is not asked at the next
    # temperatures: 10 answers (the first temperature's), all judged, not 30
    judged = wh.rows("SELECT method, temperature, count(*) AS n FROM s1.validations WHERE candidate_id = 'sum-p-r1' "
                     "GROUP BY ALL ORDER BY ALL")
    assert judged == [{"method": "judge", "temperature": 0.0, "n": 10}]


@pytest.mark.slow
def test_discriminators_and_human_decisions(tmp_path):
    annotations = {"keep-p": {"decision": "retain", "annotator": "ann1"},
                   "fix-p": {"decision": "modify", "question": "What is 1 plus 1?", "answer": "2", "annotator": "ann2"}}
    c, _, _ = build(tmp_path, Model(verdict="discard"),
                    [("keep-p", "What is 2 plus 3?", "5"), ("fix-p", "What is 4 plus 40?", "44"),
                     ("drop-p", "What is 7 plus 8?", "15")], discriminators=["stub"], annotations=annotations)
    assert decisions(c, "drop-p")[-1] == ("decision", "dropped")  # the discriminator said discard, no human word
    assert ("annotation", "retain") in decisions(c, "keep-p") and "keep-p" in {i["item_id"] for i in c.items}
    fixed = [x for x in c.candidates if x["candidate_id"] == "fix-p-h"][0]
    assert fixed["question"] == "What is 1 plus 1?" and fixed["parent_id"] == "fix-p" and fixed["origin"] == "human"
    assert "fix-p-h" in {i["item_id"] for i in c.items}


@pytest.mark.slow
def test_near_duplicates_are_dropped_before_validation(tmp_path):
    c, _, _ = build(tmp_path, Model(), [("a-p", "What is 2 plus 3?", "5"), ("b-p", "What is 2 plus 3?", "5")])
    assert decisions(c, "b-p") == [("dedup", "dropped")]
    assert not [v for v in c.validations if v["candidate_id"] == "b-p"]


@pytest.mark.slow
def test_a_failed_validation_call_leaves_the_candidate_incomplete_not_reduced(tmp_path):
    c, _, _ = build(tmp_path, Model(), [("x-p", "What is 2 plus 3? [[stub: status=500 times=999]]", "5")])
    assert decisions(c, "x-p")[-1] == ("decision", "incomplete") and c.items == []


@pytest.mark.slow
def test_reduced_ids_keep_a_model_name_with_r_whole(tmp_path):
    # a candidate from the generator "deepseek-r1" whose answers are wrong twice: reduced twice, then accepted
    reductions = iter([98, 99])
    model = Model(wrong_every=1, judge_result=0,
                  reduce_to=lambda n: f"[question]What is {next(reductions, 7)} plus 1?[answer]{0}")
    c, wh, _ = build(tmp_path, model, [("sum-en-deepseek-r1-000", "What is 2 plus 2?", "4")], max_rounds=2)
    ids = [r["candidate_id"] for r in c.candidates]
    assert ids == ["sum-en-deepseek-r1-000", "sum-en-deepseek-r1-000-r1", "sum-en-deepseek-r1-000-r2"]
    assert len(set(ids)) == len(ids)


@pytest.mark.slow
def test_failed_judge_call_leaves_a_candidate_incomplete_not_rejected(tmp_path):
    model = Model()

    def replies_that_break_the_judge(body):
        reply = model(body)
        if "What is" in body["messages"][-1]["content"] and "**Question:**" not in body["messages"][-1]["content"]:
            return reply + " [[stub: status=400]]"  # the judge's prompt quotes this reply: its call fails
        return reply

    c, _, _ = build(tmp_path, replies_that_break_the_judge, [("sum-llm", "What is 3 plus 4?", "7")])
    methods = {r["method"] for r in c.validations}
    assert methods == {"judge_failed", "not_judged"} or methods == {"judge_failed"}
    assert ("decision", "incomplete") in decisions(c, "sum-llm") and not c.items


def _overlap(times, delay):
    """The most requests the server held at once, from their arrival times and its fixed delay."""
    return max(sum(1 for u in times if u <= t < u + delay) for t in times) if times else 0


@pytest.mark.slow
def test_reductions_and_generators_are_sent_concurrently(tmp_path):
    # four candidates whose every answer is wrong: all four are reduced in the same round
    model = Model(wrong_every=1, judge_result=0)
    with StubServer(responder=model, delay_s=0.3) as stub:
        cfg = stub_config(stub, tmp_path)
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)
            c = Construction(ledger, REG, Judge(ledger, "stub"), 1, generators=["stub"], discriminators=[],
                             validators=["stub"], reducer="stub", temperatures=[0.0], samples_per_temperature=1,
                             max_rounds=1, dedup_threshold=0.999, budgets=Budgets(validation=16))
            c.run(["numerical reasoning", "temporal reasoning", "measurement units", "counting constraints"],
                  ["en"], 1, True)
        reductions = [r["time"] for r in stub.requests if "reduce their difficulty" in r["body"]["messages"][-1]["content"]]
        generations = [r["time"] for r in stub.requests if "Start generating" in r["body"]["messages"][-1]["content"]]
    assert len(reductions) == 4 and _overlap(reductions, 0.3) == 4  # the configured concurrency is 4
    assert len(generations) == 4 and _overlap(generations, 0.3) == 4


@pytest.mark.slow
def test_validating_in_chunks_changes_nothing_but_memory(tmp_path):
    cands = [(f"sum{k}-p", f"What is {k} plus 3?", str(k + 3)) for k in range(5)]

    def odd_ones_wrong(body):  # deterministic whatever the order of requests
        m = re.search(r"What is (\d+) plus (\d+)\?", body["messages"][-1]["content"])
        if m and "reduce their difficulty" not in body["messages"][-1]["content"]:
            a, b = int(m.group(1)), int(m.group(2))
            return f"The answer is {a + b + (a % 2)}."
        return Model()(body)

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    whole, _, _ = build(tmp_path / "a", odd_ones_wrong, cands)
    chunked, _, _ = build(tmp_path / "b", odd_ones_wrong, cands, chunk=2)

    def key(rows):  # call keys name the stub's port, which differs between the two runs
        return sorted(str({k: v for k, v in r.items() if k != "call_key"}) for r in rows)

    assert key(chunked.validations) == key(whole.validations)
    # 3 right candidates answered 30 times, 2 wrong ones stopped after the 10 answers at the first
    # temperature, and their reduced versions
    assert len([v for v in whole.validations if "-r" not in v["candidate_id"]]) == 3 * 30 + 2 * 10
    assert key(chunked.items) == key(whole.items) and key(chunked.rounds) == key(whole.rounds)
