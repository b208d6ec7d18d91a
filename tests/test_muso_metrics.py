"""MuSoBench metrics (paper appendix A.2) against hand-computed values."""

import json

import pytest

from evaluations import scoring
from evaluations.muso import Item, _aggregate, metric_rows

T = {1, 2, 3, 4}


def test_precision_and_recall():
    assert scoring.precision({1, 2, 9}, T) == pytest.approx(2 / 3)
    assert scoring.recall({1, 2, 9}, T) == pytest.approx(2 / 4)


def test_empty_answer_set_has_precision_zero_and_recall_zero():
    assert scoring.precision(set(), T) == 0.0
    assert scoring.recall(set(), T) == 0.0


def test_recall_needs_ground_truth():
    with pytest.raises(ValueError):
        scoring.recall({1}, set())


def test_retention_correction_discovery():
    y1, y2 = {1, 2, 8, 9}, {1, 3, 9}
    assert scoring.retention(y1, y2, T) == pytest.approx(1 / 2)  # kept 1 of {1, 2}
    assert scoring.correction(y1, y2, T) == pytest.approx(1 - 1 / 2)  # 9 still there, 8 corrected
    assert scoring.discovery(y1, y2, T) == pytest.approx(1 / 4)  # 3 is new and correct


def test_stability_rates_undefined_without_correct_or_wrong_first_answers():
    assert scoring.retention({8}, {1}, T) is None
    assert scoring.correction({1}, {1}, T) is None
    assert scoring.discovery(set(), set(), T) == 0.0


def test_ece_hand_computed():
    # bins: 0.95 -> [0.9, 1.0]; 0.91 -> same; 0.15 -> [0.1, 0.2)
    conf = [0.95, 0.91, 0.15]
    score = [0.5, 0.3, 0.2]
    # bin 9: conf 0.93, score 0.4, |gap| 0.53, weight 2/3; bin 1: conf 0.15, score 0.2, gap 0.05, weight 1/3
    assert scoring.ece(conf, score) == pytest.approx(2 / 3 * 0.53 + 1 / 3 * 0.05)


def test_ece_confidence_one_goes_to_the_last_bin_and_perfect_calibration_is_zero():
    assert scoring.reliability_bins([1.0], [1.0])[-1].count == 1
    assert scoring.ece([0.05, 0.55], [0.05, 0.55]) == pytest.approx(0.0)
    assert scoring.ece([], []) is None


def test_ece_rejects_confidence_outside_unit_interval():
    with pytest.raises(ValueError):
        scoring.ece([1.5], [0.2])


BINS = {1: (1, 50), 2: (51, None)}


def row(instance, level, precision, recall, confidence, status="ok", variant="standard", **kw):
    base = {"model": "m", "paradigm": "short_cot", "variant": variant, "task": "subsetsum", "level": level,
            "level_lo": BINS[level][0], "level_hi": BINS[level][1], "temperature": 0.2,
            "instance_id": instance, "status": status, "precision": precision, "recall": recall,
            "confidence": confidence, "parse_error": None, "truncated": False,
            "retention": None, "correction": None, "discovery": None}
    return {**base, **kw}


def test_metric_rows_per_level_and_overall_exclude_failed_calls():
    rows = [
        row("a", 1, 1.0, 0.5, 90.0, retention=1.0, correction=None, discovery=0.25),
        row("b", 1, 0.0, 0.0, 50.0, parse_error="no subsets found", retention=None, correction=1.0, discovery=0.0),
        row("c", 1, None, None, None, status="call_failed"),
        row("d", 2, 0.5, 1.0, None),
    ]
    out = {(r["level"]): r for r in metric_rows(rows, {"subsetsum": [(1, 50), (51, None)]})}
    l1 = out[1]
    assert (l1["n_instances"], l1["n_scored"], l1["n_failed_calls"], l1["n_parse_failures"]) == (3, 2, 1, 1)
    assert l1["precision"] == pytest.approx(0.5) and l1["recall"] == pytest.approx(0.25)
    assert l1["ece_recall"] == pytest.approx(0.5 * abs(0.5 - 0.9) + 0.5 * abs(0.0 - 0.5))
    assert l1["retention"] == 1.0 and l1["correction"] == 1.0 and l1["discovery"] == pytest.approx(0.125)
    assert l1["level_label"] == "1-50" and out[2]["level_label"] == "51+"
    assert out[2]["n_confidence"] == 0 and out[2]["ece_recall"] is None
    overall = out[0]
    assert overall["level_label"] == "all" and overall["n_scored"] == 3
    assert overall["recall"] == pytest.approx((0.5 + 0.0 + 1.0) / 3)


def test_self_consistency_voting_and_median_aggregation():
    item = Item("s", "subsetsum", 1, {"values": [1, 2, 3, 4], "target": 5}, "q", frozenset({(1, 4), (2, 3)}))

    def path(i, answers, conf):
        return {"path": i, "status": "ok", "answers_first": json.dumps([list(a) for a in answers]),
                "n_first": len(answers), "confidence": conf, "truncated": False, "call_keys": json.dumps([f"k{i}"])}

    paths = [path(0, [(1, 4)], 90.0), path(1, [(1, 4), (2, 3)], 60.0), path(2, [(1, 2)], 30.0)]
    vote, median = _aggregate("m", "short_cot", item, paths)
    assert vote["variant"] == "sc_vote" and vote["n_first"] == 3 and vote["n_first_correct"] == 2
    assert vote["recall"] == 1.0 and vote["precision"] == pytest.approx(2 / 3)
    assert vote["confidence"] == pytest.approx((90 * 1 + 60 * 2 + 30 * 1) / 4)  # weighted by answers contributed
    assert median["variant"] == "sc_median" and median["confidence"] == 60.0 and median["recall"] == 1.0
    assert json.loads(vote["call_keys"]) == ["k0", "k1", "k2"]


def test_metrics_group_by_the_bin_so_an_inserted_level_cannot_merge_two_bins():
    # responses of bins 1-50 and 51-100; then the configuration inserts 26-50 (1-25, 26-50, 51-100)
    rows = [row("a", 1, 1.0, 1.0, 90.0), row("b", 2, 0.0, 0.0, 90.0, level_lo=51, level_hi=100)]
    out = {(r["level_lo"], r["level_hi"]): r for r in metric_rows(rows, {"subsetsum": [(1, 25), (26, 50), (51, 100)]})
           if r["level"] != 0}
    assert set(out) == {(1, 50), (51, 100)}  # two rows, never merged into one position
    assert out[(51, 100)]["level"] == 3 and out[(51, 100)]["level_label"] == "51-100"
    assert out[(1, 50)]["level"] is None and out[(1, 50)]["level_label"] == "1-50"  # stale: not configured


def test_temperature_is_a_dimension_of_the_metrics():
    rows = [row("a", 1, 1.0, 1.0, 90.0), row("a", 1, 0.0, 0.0, 90.0, temperature=1.0)]
    out = {(r["temperature"], r["level"]): r["recall"] for r in metric_rows(rows, {"subsetsum": [(1, 50), (51, None)]})}
    assert out[(0.2, 1)] == 1.0 and out[(1.0, 1)] == 0.0 and out[(0.2, 0)] == 1.0


def test_table_views_in_the_papers_layout(tmp_path):
    from warehouse import Warehouse

    wh = Warehouse(tmp_path / "wh.duckdb")
    rows = [row("a", 1, 1.0, 0.5, 90.0, retention=1.0, correction=0.5, discovery=0.25),
            row("b", 1, 0.5, 0.25, 80.0, variant="sc_vote"), row("c", 1, 0.25, 0.125, 70.0, variant="sc_median")]
    wh.replace_partition("muso.metrics", metric_rows(rows, {"subsetsum": [(1, 50), (51, None)]}))
    [t1] = wh.rows("SELECT * FROM muso.table1")
    assert (t1["Paradigm"], t1["SubsetSum CSR (%)"], t1["SubsetSum ESC (%)"], t1["SubsetSum NSD (%)"]) == (
        "Short-CoT", 100.0, 50.0, 25.0)
    assert t1["TimeTabling CSR (%)"] is None  # no timetabling responses
    t2 = wh.rows('SELECT "Method", "Precision (%)", "Recall (%)", "ECE (r)" FROM muso.table2')
    assert t2 == [{"Method": "Short-CoT", "Precision (%)": 100.0, "Recall (%)": 50.0, "ECE (r)": 40.0},
                  {"Method": "w/ Median Conf", "Precision (%)": 25.0, "Recall (%)": 12.5, "ECE (r)": 57.5},
                  {"Method": "w/ Voting", "Precision (%)": 50.0, "Recall (%)": 25.0, "ECE (r)": 55.0}]
