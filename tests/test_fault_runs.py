"""Fault runs: a model endpoint that fails a fixed share of its prompts (HTTP 400 on every try).
Per family, failed calls are counted apart, never scored as answers, and the metrics equal those
of a healthy run restricted to the items that were answered."""

import re

import pytest

from evaluations import ib, muso, s1, waken, waken_metrics
from llm_calls import Ledger, ModelRegistry
from llm_calls.stub_server import StubServer
from tests.conftest import stub_config
from validators.judge import Judge
from warehouse import Warehouse

FAIL_SHARE = 0.35


def run_twice(tmp_path, responder, work):
    """`work(ledger)` on a healthy endpoint and on one that fails FAIL_SHARE of its prompts."""
    out = []
    for name, share in (("healthy", 0.0), ("faulty", FAIL_SHARE)):
        with StubServer(responder=responder, fail_share=share) as stub:
            cfg = stub_config(stub, tmp_path / name)
            with ModelRegistry(cfg) as reg:
                out.append(work(Ledger(Warehouse(cfg.warehouse_path()), reg)))
    return out


@pytest.fixture(autouse=True)
def _dirs(tmp_path):
    (tmp_path / "healthy").mkdir()
    (tmp_path / "faulty").mkdir()


@pytest.mark.slow
def test_instruction_boundary_leaves_failed_calls_out_of_acc_sr_gr(tmp_path):
    items = [ib.Item(f"q{k}:complete", "single", "sparse" if k % 3 == 0 else "tense", "complete",
                     ("red", "green", "blue", "All other options are false"), frozenset({1 + k % 4}), "",
                     f"Question q{k}: which colour?") for k in range(16)]

    def responder(body):
        k = int(body["messages"][-1]["content"].split("Question q")[1].split(":")[0])
        return f"Answer: {1 + k % 3}"

    def work(ledger):
        r = ib.Runner(ledger, "stub", "stub", "stub", {"temperature": 0.0, "max_tokens": 32})
        r.run(items, [], ["vanilla", "conformity"])
        return r.responses

    healthy, faulty = run_twice(tmp_path, responder, work)
    failed = {(x["setting"], x["item_id"]) for x in faulty if x["method"] == "call_failed"}
    assert 0 < len(failed) < len(faulty)
    assert all(x["correct"] is None and x["selected"] is None and x["output_category"] == "call_failed"
               for x in faulty if (x["setting"], x["item_id"]) in failed)
    answered = [x for x in healthy if (x["setting"], x["item_id"]) not in failed]
    got = {(m["setting"], m["metric"]): m for m in ib.metric_rows("stub", faulty) if m["form"] == "single"}
    want = {(m["setting"], m["metric"]): m for m in ib.metric_rows("stub", answered) if m["form"] == "single"}
    for setting in ("vanilla", "conformity"):
        for metric in ("Acc", "SR", "GR", "RS"):
            assert got[(setting, metric)]["value"] == pytest.approx(want[(setting, metric)]["value"])
        assert got[(setting, "Acc")]["n_failed"] == sum(s == setting for s, _ in failed)
        assert got[(setting, "Acc")]["denominator"] == 16 - got[(setting, "Acc")]["n_failed"]
    assert all(m["n_failed"] == 0 for m in ib.metric_rows("stub", healthy))


@pytest.mark.slow
def test_waken_accuracy_counts_only_answered_items(tmp_path):
    items = [waken.Item(f"i{k}", "fact", ("True", "False", "Unknown")[k % 3], f"sent1: fact {k}", f"hypothesis {k}")
             for k in range(12)]

    def responder(body):
        text = body["messages"][-1]["content"]
        if "Output only" in text or "does the reply give" in text:
            return "NO_ANSWER"
        m = re.search(r"hypothesis (\d+)", text)
        k = int(m.group(1)) if m else 0
        return f"Final answer: {('True', 'False', 'Unknown')[(k // 2) % 3]}"

    def work(ledger):
        p = waken.Pipeline(ledger, "stub", "stub", items, 0.5, 1.0, 64, seed=1)
        return p.run([1.0], ["cot"])

    healthy, faulty = run_twice(tmp_path, responder, work)
    failed = {r["item_id"] for r in faulty if r["step"] == "direct" and r["outcome"] == "call_failed"}
    assert 0 < len(failed) < len(items)
    assert all(r["prediction"] is None for r in faulty if r["outcome"] == "call_failed")
    n = {"s": 8, "u": 4}
    got = {(m["metric"], m["setting"]): m for m in waken_metrics.metric_rows("stub", "d", faulty, n, [1.0], ["cot"])}
    direct_ok = [r for r in healthy if r["step"] == "direct" and r["item_id"] not in failed]
    want = sum(r["outcome"] == "correct" for r in direct_ok) / len(direct_ok)
    assert got[("acc_direct", "vanilla")]["value"] == pytest.approx(want)
    assert got[("n_direct_call_failed", "vanilla")]["value"] == len(failed)
    cot_failed = {r["item_id"] for r in faulty if r["step"] == "baseline" and r["outcome"] == "call_failed"}
    cot_ok = [r for r in healthy if r["step"] == "baseline" and r["item_id"] not in cot_failed]
    assert got[("acc_baseline", "cot")]["value"] == pytest.approx(sum(r["outcome"] == "correct" for r in cot_ok)
                                                                  / len(cot_ok))
    assert got[("n_baseline_failed", "cot")]["value"] == len(cot_failed)


@pytest.mark.slow
def test_muso_scores_only_answered_instances(tmp_path):
    items = [muso.Item(f"ss-{k}", "subsetsum", 1, {"values": [1, 2, 3, 4, k + 5], "target": 5},
                       f"Given the set of unique integers: {{1, 2, 3, 4, {k + 5}}}\nFind all subsets that sum exactly "
                       f"to the target: 5", frozenset({(1, 4), (2, 3)}), 1, 50) for k in range(12)]

    def responder(body):
        text = body["messages"][0]["content"]
        k = int(text.split("1, 2, 3, 4, ")[1].split("}")[0]) - 5
        last = body["messages"][-1]["content"]
        if "confidence" in last:
            return "[[CONFIDENCE: \\boxed{80}]]"
        if "Recheck" in last:
            return "[[UNCHANGE]]"
        return "Solution 1: {1, 4}" + ("\nSolution 2: {2, 3}" if k % 2 else "")

    healthy, faulty = run_twice(tmp_path, responder,
                                lambda ledger: muso.run(ledger, "stub", items, "short_cot", "standard", 0.2, 64, 16))
    failed = {r["instance_id"] for r in faulty if r["status"] == "call_failed"}
    assert 0 < len(failed) < len(items)
    levels = {"subsetsum": [(1, 50)]}
    [got] = [m for m in muso.metric_rows(faulty, levels) if m["level"] == 1]
    [want] = [m for m in muso.metric_rows([r for r in healthy if r["instance_id"] not in failed], levels)
              if m["level"] == 1]
    assert (got["precision"], got["recall"]) == (want["precision"], want["recall"])
    assert got["n_failed_calls"] == len(failed) and got["n_scored"] == len(items) - len(failed)


@pytest.mark.slow
def test_s1_leaves_failed_samples_out_of_pass_at_1(tmp_path):
    items = [{"item_id": f"it{k}", "subcategory": "numerical reasoning", "category": "reasoning", "language": "en",
              "question": f"What is {k} plus 1?", "answer": str(k + 1), "check_spec": f'{{"type": "exact", "answers": '
              f'["{k + 1}"]}}'} for k in range(10)]

    def responder(body):
        k = int(body["messages"][-1]["content"].split()[2])
        right = k % 3 != 0  # the seed sent differs between the two servers (its port is in the key)
        return f"<think>adding</think>\n{k + 1 if right else k + 2}"

    def work(ledger):
        return s1.evaluate(ledger, "stub", items, Judge(ledger, "stub"), 3, 0.6, 0.95, 64)

    healthy, faulty = run_twice(tmp_path, responder, work)
    failed = {(r["item_id"], r["mode"], r["sample_index"]) for r in faulty if r["method"] == "call_failed"}
    assert 0 < len(failed) < len(faulty)
    assert all(r["correct"] is None for r in faulty if r["method"] == "call_failed")
    got = {m["metric"]: m for m in s1.metric_rows("stub", faulty, 3) if m["level"] == "all"}
    answered = [r for r in healthy if (r["item_id"], r["mode"], r["sample_index"]) not in failed]
    want = {m["metric"]: m for m in s1.metric_rows("stub", answered, 3) if m["level"] == "all"}
    assert got["pass@1"]["value"] == pytest.approx(want["pass@1"]["value"])
    assert got["greedy_acc"]["value"] == pytest.approx(want["greedy_acc"]["value"])
    assert got["pass@1"]["n_failed"] == len(failed)


def test_waken_self_reflection_turn_is_not_sent_after_a_failed_first_call(tmp_path):
    items = [waken.Item("ok", "fact", "True", "sent1: the sun is hot", "the sun is hot"),
             waken.Item("down", "fact", "True", "sent1: the moon is cold [[stub: status=400]]", "the moon is cold")]
    with StubServer(responder=lambda body: "Final answer: True") as stub:
        cfg = stub_config(stub, tmp_path)
        with ModelRegistry(cfg) as reg:
            rows = waken.Pipeline(Ledger(Warehouse(cfg.warehouse_path()), reg), "stub", "stub", items, 0.5, 1.0, 64,
                                  seed=1).run([], ["self_reflection"])
        reflections = [r["body"]["messages"] for r in stub.requests if len(r["body"]["messages"]) > 1]
    assert len(reflections) == 1 and "the sun is hot" in reflections[0][0]["content"]
    assert all(m["content"] for m in reflections[0])  # never an empty assistant turn
    outcome = {r["item_id"]: r["outcome"] for r in rows if r["step"] == "baseline"}
    assert outcome == {"ok": "correct", "down": "call_failed"}


@pytest.mark.slow
def test_muso_total_beyond_32_bits_is_read_as_no_total_not_a_crash(tmp_path):
    item = muso.Item("ss-x", "subsetsum", 1, {"values": [1, 2, 3, 4], "target": 5},
                     "Given the set of unique integers: {1, 2, 3, 4}\nFind all subsets that sum exactly to the target: 5",
                     frozenset({(1, 4), (2, 3)}))
    with StubServer(responder=lambda body: "Solution 1: {1, 4}\nTotal 3000000000 feasible solutions shown above.") as stub:
        cfg = stub_config(stub, tmp_path)
        with ModelRegistry(cfg) as reg:
            wh = Warehouse(cfg.warehouse_path())
            [row] = muso.run(Ledger(wh, reg), "stub", [item], "short_cot", "standard", 0.2, 64, 16)
    assert row["status"] == "ok" and row["claimed_total"] is None and row["precision"] == 1.0
    stored = {**row, "partition_key": "subsetsum_1-50"}
    assert wh.replace_partition("muso.responses", [stored], {"partition_key": "subsetsum_1-50"}) == 1  # INTEGER column
