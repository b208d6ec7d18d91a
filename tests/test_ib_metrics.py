"""Instruction Boundary metrics (paper 003 section 2.2) against hand-computed values."""

import pytest

from evaluations.ib import metric_rows


def resp(setting, form, label_type, correct, category, method="final_answer", n_options=4, selected="[1]"):
    return {"setting": setting, "form": form, "label_type": label_type, "correct": correct, "method": method,
            "output_category": category, "n_options": n_options, "selected": selected}


ROWS = [
    # vanilla judging: tense 2/2 right, sparse 1/2 right
    resp("vanilla", "judging", "tense", True, "True"), resp("vanilla", "judging", "tense", True, "False"),
    resp("vanilla", "judging", "sparse", True, "Unknown"), resp("vanilla", "judging", "sparse", False, "True"),
    # vanilla single: tense 1/2, sparse 0/2 (one judged, one undecided)
    resp("vanilla", "single", "tense", True, "single"), resp("vanilla", "single", "tense", False, "single"),
    resp("vanilla", "single", "sparse", False, "single", method="judge"),
    resp("vanilla", "single", "sparse", False, "undecided", method="unparsed", selected=None),
    # conformity judging: tense 1/2, sparse 0/2
    resp("conformity", "judging", "tense", True, "True"), resp("conformity", "judging", "tense", False, "Unknown"),
    resp("conformity", "judging", "sparse", False, "True"), resp("conformity", "judging", "sparse", False, "False"),
    # disturbing miscellany: 2 options right, 3 options wrong
    resp("disturbing_miscellany", "single", "tense", True, "single", n_options=2),
    resp("disturbing_miscellany", "single", "tense", False, "single", n_options=3),
]


@pytest.fixture
def m():
    return {(r["setting"], r["form"], r["metric"], r["category"]): r["value"] for r in metric_rows("m", ROWS)}


def test_acc_sr_gr(m):
    assert m[("vanilla", "judging", "Acc", "-")] == pytest.approx(3 / 4)
    assert m[("vanilla", "judging", "SR", "-")] == pytest.approx(1.0)
    assert m[("vanilla", "judging", "GR", "-")] == pytest.approx(1 / 2)
    assert m[("vanilla", "single", "SR", "-")] == pytest.approx(1 / 2) and m[("vanilla", "single", "GR", "-")] == 0.0


def test_rr_is_the_accuracy_change_from_vanilla_on_the_same_form(m):
    assert m[("conformity", "judging", "RR", "-")] == pytest.approx(abs(3 / 4 - 1 / 4))
    assert m[("vanilla", "judging", "RR", "-")] == 0.0


def test_rs_is_the_harmonic_mean_and_its_average_over_forms(m):
    hm = 2 * 1.0 * 0.5 / 1.5
    assert m[("vanilla", "judging", "RS", "-")] == pytest.approx(hm)
    assert m[("vanilla", "single", "RS", "-")] == 0.0  # GR = 0
    assert m[("vanilla", "all", "RS", "-")] == pytest.approx((hm + 0.0) / 2)


def test_output_distribution_and_fr(m):
    assert m[("vanilla", "judging", "OR", "True")] == pytest.approx(2 / 4)
    assert m[("vanilla", "judging", "OR", "Unknown")] == pytest.approx(1 / 4)
    assert m[("vanilla", "judging", "OR_T", "-")] == pytest.approx(3 / 4)  # True, False, True
    assert m[("vanilla", "judging", "OR_S", "-")] == pytest.approx(1 / 4)
    assert m[("vanilla", "judging", "FR", "-")] == pytest.approx(1 / 2)
    assert m[("vanilla", "single", "OR", "undecided")] == pytest.approx(1 / 4)
    # undecided outputs count as neither tense nor sparse
    assert m[("vanilla", "single", "OR_T", "-")] == pytest.approx(3 / 4) and m[("vanilla", "single", "OR_S", "-")] == 0.0


def test_judge_share(m):
    assert m[("vanilla", "single", "judge_share", "-")] == pytest.approx(1 / 4)
    assert m[("vanilla", "judging", "judge_share", "-")] == 0.0


def test_miscellany_accuracy_by_number_of_options(m):
    assert m[("disturbing_miscellany", "single", "Acc_by_options", "2")] == 1.0
    assert m[("disturbing_miscellany", "single", "Acc_by_options", "3")] == 0.0
    assert m[("disturbing_miscellany", "single", "GR", "-")] is None  # no sparse items there


@pytest.mark.parametrize("row,sr1,gr1,acc1,sr2,gr2,gr3,acc2", [
    # Table 3, GPT-3.5-turbo: vanilla, missing choices, conformity
    ("vanilla", 0.2147, 0.7603, 48.75, 0.62, 0.12, 0.0, 24.67),
    ("missing_choices", 0.6104, 0.0848, 34.76, 0.64, 0.1267, 0.0, 25.56),
    ("conformity", 0.0, 1.0, 50.0, 0.1133, 1.0, 0.0, 37.11),
])
@pytest.mark.slow
def test_table3_view_reproduces_the_published_balanced_accuracies(tmp_path, row, sr1, gr1, acc1, sr2, gr2, gr3, acc2):
    from warehouse import Warehouse

    wh = Warehouse(tmp_path / "wh.duckdb")
    rows = [{"model": "gpt-3.5", "setting": row, "form": form, "metric": metric, "category": "-", "value": v,
             "numerator": None, "denominator": None, "n_failed": 0}
            for form, metric, v in (("judging", "SR", sr1), ("judging", "GR", gr1), ("single", "SR", sr2),
                                    ("single", "GR", gr2), ("multiple", "GR", gr3))]
    wh.replace_partition("ib.metrics", rows)
    [t] = wh.rows("SELECT * FROM ib.table3")
    assert t["Acc_b^1"] == pytest.approx(acc1, abs=0.01) and t["SR1"] == pytest.approx(100 * sr1)
    assert t["Acc_b^2"] == pytest.approx(acc2, abs=0.01) and t["GR3"] == pytest.approx(100 * gr3)


def test_figure7_is_the_judging_harmonic_mean(m):
    # vanilla judging: SR 1, GR 1/2 (hand-computed above) -> RS = 2 * 1 * 1/2 / (1 + 1/2) = 2/3
    assert m[("vanilla", "judging", "RS", "-")] == pytest.approx(2 / 3)


def test_gr3_is_accuracy_over_all_150_multi_select_items_as_table_3_prints_it():
    """Paper 003, table 3: GR3 values such as 0.67 are multiples of 1/150: accuracy over all 150 multi-select
    MultiRC items (4 options, 2 true, no combined option). One right of 150 is 0.67, as printed."""
    import random

    from generators import ib as gen

    items = gen.build_items("mrc", gen.even_number_bases(random.Random(1), 300, "mrc"), 150, seed=1)
    complete = [i for i in items if i["variant"] == "complete"]
    assert len(complete) == 150 and {i["label_type"] for i in complete} == {"sparse"}
    assert all(i["n_options"] == 4 and len(i["gold"]) == 2 for i in complete)
    rows = [resp("vanilla", "multiple", i["label_type"], k == 0, "multiple") for k, i in enumerate(complete)]
    [gr] = [r for r in metric_rows("m", rows) if (r["form"], r["metric"]) == ("multiple", "GR")]
    assert (gr["numerator"], gr["denominator"]) == (1, 150) and round(100 * gr["value"], 2) == 0.67


def test_a_model_right_on_every_item_has_a_full_missing_choices_row_in_table_3(tmp_path):
    """Every column of table 3's Missing Choices row is computed: the insufficient multi-select items are
    GR3 items too (before, a model answering everything right got NULL for Acc_b^2 and GR3)."""
    import random

    from generators import ib as gen
    from warehouse import Warehouse

    rng = random.Random(4)
    items = (gen.build_items("fld", gen.fld_bases(rng, 8, "fld"), 4, seed=1)
             + gen.build_items("ar", gen.arithmetic_bases(rng, 8, "ar"), 4, seed=1)
             + gen.build_items("ev", gen.even_number_bases(rng, 8, "ev"), 4, seed=1))
    rows = [resp("missing_choices", i["form"], i["label_type"], True, "single")
            for i in items if i["variant"] == "insufficient"]
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.replace_partition("ib.metrics", metric_rows("perfect", rows))
    [t] = wh.rows("SELECT * FROM ib.table3 WHERE \"Setting\" = 'missing_choices'")
    assert t == {"model": "perfect", "setting": "missing_choices", "Acc_b^1": 100.0, "SR1": 100.0, "GR1": 100.0,
                 "Acc_b^2": 100.0, "SR2": 100.0, "GR2": 100.0, "GR3": 100.0}


def _metric_row(setting, form, metric, category, num, den):
    return {"model": "m", "setting": setting, "form": form, "metric": metric, "category": category,
            "value": num / den if den else None, "numerator": num, "denominator": den, "n_failed": 0}


def test_table7_is_the_judge_share_over_the_450_choice_items_not_the_judging_ones(tmp_path):
    """Paper 003, table 7: its values are multiples of 1/450 (34 of 35 cells), the 450 choice items
    (single and multiple choice); the judging items are not in it. Hand case: the judge needed on 0 of
    1,240 judging replies, 60 of 300 single-choice and 59 of 150 multiple-choice replies gives
    (60 + 59) / 450 = 26.44 (GPT-3.5's printed vanilla value); pooling the judging items gave 7.04."""
    from warehouse import Warehouse

    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.replace_partition("ib.metrics", [
        _metric_row("vanilla", "judging", "judge_share", "-", 0, 1240),
        _metric_row("vanilla", "single", "judge_share", "-", 60, 300),
        _metric_row("vanilla", "multiple", "judge_share", "-", 59, 150),
        _metric_row("conformity", "judging", "judge_share", "-", 1, 4)])
    [t7] = wh.rows("SELECT * FROM ib.table7")
    assert t7["Vanilla Scenario"] == 26.44
    assert t7["Conformity"] is None and t7["Few-shot Learning"] is None  # no choice items asked


def test_figure6_groups_sum_to_100_with_no_correct_answer_in_all_wrong_and_a_zero_share_as_0(tmp_path):
    """Paper 003, figure 6: Unknown / True / False over the judging outputs, and Single / Multiple / All
    Wrong over the choice outputs, each group summing to 100 as the figure's does for every model. A
    stated "no correct answer" ('none') is All Wrong beside the "all other options are false" option; the
    combined option counts as Multiple Choices; a share with no outputs is 0, not NULL."""
    from warehouse import Warehouse

    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.replace_partition("ib.metrics", [
        _metric_row("vanilla", "judging", "OR", "Unknown", 3, 10), _metric_row("vanilla", "judging", "OR", "True", 7, 10),
        _metric_row("vanilla", "single", "OR", "single", 6, 10), _metric_row("vanilla", "single", "OR", "all_wrong", 1, 10),
        _metric_row("vanilla", "single", "OR", "none", 1, 10), _metric_row("vanilla", "single", "OR", "undecided", 2, 10),
        _metric_row("vanilla", "multiple", "OR", "combined", 1, 2), _metric_row("vanilla", "multiple", "OR", "single", 1, 2)])
    [f6] = wh.rows("SELECT * FROM ib.figure6")
    assert (f6["Unknown (%)"], f6["True (%)"], f6["False (%)"]) == (30.0, 70.0, 0.0)
    # choice outputs decided: 6 + 1 + 1 single, 1 combined, 1 all_wrong, 1 none = 10 (the 2 undecided left out)
    assert (f6["Single Choice (%)"], f6["Multiple Choices (%)"], f6["All Wrong (%)"]) == (70.0, 10.0, 20.0)
    assert f6["Single Choice (%)"] + f6["Multiple Choices (%)"] + f6["All Wrong (%)"] == 100.0


def test_several_options_chosen_are_neither_a_tense_nor_a_sparse_output():
    """Paper 003, section 2.2: OR_T is the share of tense-label outputs, OR_S of sparse-label outputs,
    FR = |OR_T - OR_S|. An answer that picks several options at once is neither label: out of both shares
    (it counted as tense). Hand case: 4 multiple-choice replies, 1 single option, 1 combined option,
    2 several options: OR_T 1/4, OR_S 1/4, FR 0."""
    rows = [resp("vanilla", "multiple", "sparse", False, "single"), resp("vanilla", "multiple", "sparse", True, "combined"),
            resp("vanilla", "multiple", "sparse", False, "multiple", selected="[1, 3]"),
            resp("vanilla", "multiple", "sparse", False, "multiple", selected="[2, 3]")]
    m = {(r["metric"], r["category"]): r["value"] for r in metric_rows("m", rows)}
    assert m[("OR_T", "-")] == pytest.approx(1 / 4) and m[("OR_S", "-")] == pytest.approx(1 / 4)
    assert m[("FR", "-")] == 0.0 and m[("OR", "multiple")] == pytest.approx(2 / 4)


def test_disturbing_miscellany_has_no_rr_its_questions_are_not_vanillas(m):
    """RR compares a setting with vanilla on the same questions; disturbing miscellany asks MMLU-Pro's,
    which vanilla never asks, so its RR is NULL rather than a difference of two item sets."""
    assert m[("disturbing_miscellany", "single", "RR", "-")] is None
    assert m[("conformity", "judging", "RR", "-")] is not None


def test_table3_has_no_disturbing_miscellany_row(tmp_path):
    """Paper 003, table 3 lists the settings of the main benchmark; disturbing miscellany is table 6
    (`ib.miscellany`): its single-choice accuracy was shown as a table 3 row labelled SR2."""
    from warehouse import Warehouse

    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.replace_partition("ib.metrics", metric_rows("m", ROWS))
    assert {r["setting"] for r in wh.rows("SELECT setting FROM ib.table3")} == {"vanilla", "conformity"}
