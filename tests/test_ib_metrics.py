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
