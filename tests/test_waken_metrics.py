"""WakenLLM metrics against a scenario computed by hand (paper 000 section 3, appendix F)."""

import pytest

from evaluations.waken import Item, assigned_labels, converting_class
from evaluations.waken_metrics import conformity_value, identity_violations, metric_rows

GOLD = {"s1": "True", "s2": "True", "s3": "False", "s4": "False", "u1": "Unknown", "u2": "Unknown",
        "u3": "Unknown", "u4": "Unknown"}


def row(step, setting, item, prediction, outcome, method="final_answer"):
    return {"model": "m", "item_id": item, "sample_type": "u" if item.startswith("u") else "s", "gold": GOLD[item],
            "step": step, "setting": setting, "prediction": prediction, "method": method, "outcome": outcome}


def staged(step, setting, preds):
    return [row(step, setting, i, p, converting_class(GOLD[i], p)) for i, p in preds.items()]


OUTCOMES = [
    row("direct", "vanilla", "s1", "True", "correct"), row("direct", "vanilla", "s2", "Unknown", "wrong"),
    row("direct", "vanilla", "s3", "Unknown", "wrong"), row("direct", "vanilla", "s4", "True", "wrong"),
    row("direct", "vanilla", "u1", "Unknown", "correct"), row("direct", "vanilla", "u2", "Unknown", "correct"),
    row("direct", "vanilla", "u3", "True", "wrong", method="judge"),
    row("direct", "vanilla", "u4", None, "undecided", method="unparsed"),
    row("diagnosis", "vanilla", "u1", "False", "explanation_fails"),
    row("diagnosis", "vanilla", "u2", "True", "explanation_holds"),
    *staged("stage1", "vanilla", {"s2": "True", "s3": "True", "u1": "False"}),
    *staged("stage2", "vanilla", {"s3": "Unknown", "u1": "Unknown"}),
    *staged("rtg_label_stage1", "M=1.000", {"s2": "False", "s3": "Unknown", "u1": "True"}),
    *staged("rtg_label_stage2", "M=1.000", {"s2": "True", "u1": "False"}),
    *staged("rtg_label_stage1", "M=0.000", {"s2": "True", "s3": "True", "u1": "Unknown"}),
    *staged("rtg_label_stage2", "M=0.000", {"s3": "False"}),
    *staged("rtg_rp_stage1", "reasoning", {"s2": "True", "s3": "False", "u1": "Unknown"}),
    *staged("rtg_rp_stage2", "reasoning", {"s3": "Unknown", "u1": "False"}),
    *[row("baseline", "cot", i, GOLD[i] if i in ("s1", "s2") else "Unknown" if i.startswith("s") else "True",
          "correct" if i in ("s1", "s2") else "wrong") for i in GOLD],
]


@pytest.fixture
def m():
    rows = metric_rows("m", "fld", OUTCOMES, {"s": 4, "u": 4}, [1.0, 0.0], ["cot"])
    return {(r["metric"], r["sample_type"], r["stage"], r["setting"]): r["value"] for r in rows}


def test_direct_accuracy_counts_undecided_as_wrong(m):
    # the direct pass got s1, u1, u2 right
    assert m[("acc_direct", "all", "-", "vanilla")] == pytest.approx(3 / 8)
    assert m[("n_direct_undecided", "all", "-", "vanilla")] == 1


def test_vague_perception_shares(m):
    assert m[("vague_perception_share", "s", "-", "vanilla")] == pytest.approx(2 / 4)  # s2, s3
    assert m[("vague_perception_share", "u", "-", "vanilla")] == pytest.approx(1 / 4)  # u1


def test_stage_rates_share_the_stage_denominator_and_sum_to_one(m):
    assert m[("TCR", "s", "1", "vanilla")] == pytest.approx(1 / 3)
    assert m[("FCR", "s", "1", "vanilla")] == pytest.approx(1 / 3)
    assert m[("FCR", "u", "1", "vanilla")] == pytest.approx(1 / 3)
    assert m[("TCR", "all", "1", "vanilla")] == pytest.approx(1 / 3)
    total = sum(m[(c, t, "1", "vanilla")] for c in ("TCR", "FCR", "UCR") for t in ("s", "u"))
    assert total == pytest.approx(1.0)
    assert m[("TCR", "u", "2", "vanilla")] == pytest.approx(1 / 2) and m[("UCR", "s", "2", "vanilla")] == pytest.approx(1 / 2)


def test_ocr_deg_and_wakenllm_accuracy(m):
    assert m[("OCR", "all", "all", "vanilla")] == pytest.approx(2 / 3)  # s2 (stage 1), u1 (stage 2) of 3
    assert m[("Deg", "all", "2", "vanilla")] == pytest.approx(1 / 2)  # s3 fell back to Unknown
    # Table 6's form adds every TC item: s2 (stage 1) and u1 (stage 2)
    assert m[("acc_wakenllm", "all", "-", "vanilla")] == pytest.approx(3 / 8 + 2 / 8)
    # u1 was already right in the direct pass (Unknown), so de-duplicated only s2 is a new correct answer
    assert m[("acc_wakenllm_dedup", "all", "-", "vanilla")] == pytest.approx(3 / 8 + 1 / 8)


def test_table_6_wakenllm_accuracy_from_the_papers_own_numbers():
    """Paper 000, Table 6, GPT-3.5 on FLD: Acc(Direct) 50.17 %, TCR1 + TCR2 = 25.22 % of the 240 vague-
    perception items, |D| = 600: 50.17 + 25.22 % x 240 / 600 = 60.26, the printed WakenLLM accuracy."""
    from evaluations.waken_metrics import wakenllm_accuracy

    tc = 0.2522 * 240  # |TC1| + |TC2| as the printed rates give it
    assert round(100 * wakenllm_accuracy(0.5017, tc, 0, 600), 2) == 60.26
    assert wakenllm_accuracy(0.5, 30, 30, 600) == pytest.approx(0.6)


def test_label_conformity_compares_correct_labels_with_all_labels_wrong(m):
    # M=0%: stage 1 TC s2, u1 of 3 (s3 FC); stage 2 TC s3 of 1. M=100%: stage 1 no TC; stage 2 TC s2 of 2.
    # Conf_s = 1/2 (1/3 - 0) + 1/2 (1 - 1/2); Conf_u = 1/2 (1/3 - 0) + 1/2 (0 - 0)
    assert m[("Conf", "s", "all", "rtg_label")] == pytest.approx(1 / 6 + 1 / 4)
    assert m[("Conf", "u", "all", "rtg_label")] == pytest.approx(1 / 6)
    assert m[("TCR", "s", "2", "M=1.000")] == pytest.approx(1 / 2)


def test_literal_conformity_compares_the_vanilla_stages_with_all_labels_wrong(m):
    # vanilla stage 1 TCR_s 1/3, stage 2 TCR_s 0; M=100%: 0 and 1/2
    assert m[("Conf_literal", "s", "all", "rtg_label")] == pytest.approx(1 / 6 - 1 / 4)
    assert m[("Conf_literal", "u", "all", "rtg_label")] == pytest.approx(1 / 4)


@pytest.mark.parametrize("row,followed,misguided,published", [
    # Table 9 (GPT-3.5, TCR1 S/U and TCR2 S/U at M = 0% and 100%) -> Table 3 Conf_s / Conf_u
    ("FLD s", [54.17, 81.82], [5.83, 1.67], 64.25), ("FLD u", [10.00, 0.00], [3.33, 0.00], 3.33),
    ("FOLIO s", [18.92, 17.39], [2.70, 0.00], 16.81), ("FOLIO u", [38.74, 26.09], [0.90, 0.00], 31.97),
    ("Science s", [43.86, 18.03], [19.88, 3.57], 19.22), ("Science u", [2.92, 8.00], [0.00, 7.00], 1.96),
])
def test_conformity_reproduces_table_3_from_table_9(row, followed, misguided, published):
    value, stages = conformity_value(followed, misguided)
    assert stages == 2 and value == pytest.approx(published, abs=0.006)


def test_reasoning_process_metrics_are_positive_when_the_shown_reasoning_helps(m):
    # stage 1: TC s2 of 3; re-run with its reasoning shown: TC s2, s3, u1 -> RPC = (3 - 1) / 3
    assert m[("RPC", "all", "1", "rtg_rp")] == pytest.approx((3 - 1) / 3)
    assert m[("RPC_literal", "all", "1", "rtg_rp")] == pytest.approx((1 - 3) / 3)
    # stage 2: TC u1 of 2; with the reasoning shown nothing converts -> CGR = -TCR2, the pattern of Table 3
    # (GPT-3.5 FOLIO: TCR2 42.10, CGR -42.10; six of its 24 rows are exactly -TCR2)
    assert m[("CGR", "all", "2", "rtg_rp")] == pytest.approx(-1 / 2) == -m[("TCR", "all", "2", "vanilla")]
    assert m[("CGR_literal", "all", "2", "rtg_rp")] == pytest.approx(1 / 2)


def test_stage_summed_true_converting_rate(m):
    # TCR_s: 1/3 (stage 1, s2) + 0 (stage 2); TCR_u: 0 (stage 1, u1 is FC) + 1/2 (stage 2, u1)
    assert m[("TCR", "s", "sum", "vanilla")] == pytest.approx(1 / 3 + 0)
    assert m[("TCR", "u", "sum", "vanilla")] == pytest.approx(0 + 1 / 2)


def test_baseline_accuracy_and_judge_share(m):
    assert m[("acc_baseline", "all", "-", "cot")] == pytest.approx(2 / 8)
    # table 7: the share of answered replies (failed calls aside) that needed the judge
    answered = [r for r in OUTCOMES if r["step"] != "cause" and r["outcome"] not in ("call_failed", "judge_failed")]
    needed = sum(r["method"].startswith("judge") for r in answered)
    assert needed == 1 and m[("judge_share", "all", "-", "vanilla")] == pytest.approx(1 / len(answered))


def test_identities_hold_and_a_broken_stage_is_caught():
    assert identity_violations(OUTCOMES) == []
    broken = OUTCOMES + staged("stage2", "vanilla", {"s2": "True"})  # s2 was already TC in stage 1
    assert any("TC1 and TC2 share" in p for p in identity_violations(broken))


def test_converting_classes():
    assert converting_class("True", "True") == "TC"
    assert converting_class("True", "Unknown") == "UC"
    assert converting_class("True", "False") == "FC"
    assert converting_class("Unknown", "True") == "FC"
    assert converting_class("Unknown", "Unknown") == "TC"
    assert converting_class("True", None) == "undecided"


def test_misguiding_rates_change_which_labels_are_wrong():
    items = [Item(f"i{k}", "fact", ["True", "False", "Unknown"][k % 3], "c", "q") for k in range(12)]
    wrong = {}
    for rate in (1.0, 2 / 3, 0.5, 0.0):
        labels = assigned_labels(items, rate, seed=3)
        wrong[rate] = {i.item_id for i in items if labels[i.item_id] != i.label}
        assert all(lab in ("True", "False", "Unknown") for lab in labels.values())
    assert [len(wrong[r]) for r in (1.0, 2 / 3, 0.5, 0.0)] == [12, 8, 6, 0]
    assert wrong[0.5] < wrong[2 / 3] < wrong[1.0]  # nested: a lower rate misguides a subset
    assert assigned_labels(items, 0.5, seed=3) == assigned_labels(items, 0.5, seed=3)
    assert assigned_labels(items, 0.5, seed=4) != assigned_labels(items, 0.5, seed=3)


def test_ablation_and_cause_shares():
    extra = [
        *staged("ablation", "T=1.0", {"s2": "True", "s3": "Unknown"}),  # one of two UC1 items converts
        row("cause", "judge", "s2", None, "fact_understanding"), row("cause", "judge", "s3", None, "reasoning_gap"),
        row("cause", "judge", "u1", None, "reasoning_gap"), row("cause", "judge", "u2", None, "undecided"),
    ]
    rows = metric_rows("m", "fld", OUTCOMES + extra, {"s": 4, "u": 4}, [1.0], ["cot"])
    m = {(r["metric"], r["setting"]): (r["value"], r["numerator"], r["denominator"]) for r in rows}
    assert m[("ablation_converted", "ablation")] == (0.5, 1, 2)
    assert m[("ablation_unchanged", "ablation")] == (0.5, 1, 2)
    # shares over the classified causes; the undecided one is left out
    assert m[("cause_share", "fact_understanding")] == (pytest.approx(1 / 3), 1, 3)
    assert m[("cause_share", "reasoning_gap")] == (pytest.approx(2 / 3), 2, 3)
    assert m[("cause_share", "excessive_caution")] == (0.0, 0, 3)


def test_rpc_and_cgr_are_null_when_the_reasoning_shown_calls_never_answered():
    """RPC = (|TC1''| - |TC1|) / |D_VP^1| over the items decided both ways: with every reasoning-shown
    call failed (or never run) it is NULL with the count, not -TCR1."""
    failed = [row("rtg_rp_stage1", "reasoning", i, None, "call_failed", method="call_failed") for i in ("s2", "s3", "u1")]
    base = [r for r in OUTCOMES if r["step"] not in ("rtg_rp_stage1", "rtg_rp_stage2")]
    rows = metric_rows("m", "fld", base + failed, {"s": 4, "u": 4}, [1.0, 0.0], ["cot"])
    m = {(r["metric"], r["stage"]): r["value"] for r in rows if r["setting"] == "rtg_rp"}
    assert m[("RPC", "1")] is None and m[("CGR", "2")] is None
    assert m[("n_RPC_unpaired", "1")] == 3 and m[("n_CGR_unpaired", "2")] == 2


def test_rpc_pairs_items_when_some_reasoning_shown_calls_failed():
    """Two of three stage-1 items answered with the reasoning shown: RPC over those two."""
    shown = staged("rtg_rp_stage1", "reasoning", {"s2": "False", "s3": "True"})  # s2 lost its TC, s3 kept it
    shown.append(row("rtg_rp_stage1", "reasoning", "u1", None, "call_failed", method="call_failed"))
    base = [r for r in OUTCOMES if r["step"] != "rtg_rp_stage1"]
    rows = metric_rows("m", "fld", base + shown, {"s": 4, "u": 4}, [1.0, 0.0], ["cot"])
    m = {(r["metric"], r["stage"]): (r["value"], r["denominator"]) for r in rows if r["setting"] == "rtg_rp"}
    assert m[("RPC", "1")] == (pytest.approx(-1 / 2), 2) and m[("n_RPC_unpaired", "1")][0] == 1


def test_table9_11_prints_the_misguiding_rate_two_thirds_as_66_67(tmp_path):
    """Paper 000, appendix H: M in {100 %, 66.67 %, 50 %, 0 %}; the setting's name rounds 2/3 to M=0.667,
    the view prints the configured rate."""
    from warehouse import Warehouse

    rates = [1.0, 2 / 3, 0.5, 0.0]
    rows = metric_rows("m", "fld", OUTCOMES, {"s": 4, "u": 4}, rates, ["cot"])
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.replace_partition("waken.metrics", [{**r, "dataset": "fld"} for r in rows])
    assert [r["M (%)"] for r in wh.rows('SELECT "M (%)" FROM waken.table9_11')] == [100.0, 66.67, 50.0, 0.0]
