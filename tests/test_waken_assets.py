"""WakenLLM assets end to end: FOLIO from a file (with a planted label error) and generated FLD, stub model."""

import json
from pathlib import Path

import pytest

from assets.definitions import build_definitions
from llm_calls.stub_server import StubServer
from tests.conftest import materialize, stub_config
from warehouse import Warehouse

FIX = Path(__file__).parent / "fixtures" / "sources"


def always_unknown(body):
    text = body["messages"][-1]["content"]
    if "Output only True or False" in text:
        return "False"
    if "mainly caused" in text:
        return "A"
    return "Final answer: Unknown"


@pytest.fixture
def setup(tmp_path):
    folio = tmp_path / "folio.jsonl"
    rows = [json.loads(x) for x in (FIX / "folio_hub.jsonl").read_text().splitlines()]
    rows[2]["label"] = "True"  # planted: the FOL entails False
    folio.write_text("\n".join(json.dumps(r) for r in rows))
    with StubServer(responder=always_unknown) as stub:
        cfg = stub_config(stub, tmp_path, waken={
            "datasets": {
                "fld": {"kind": "fld", "generator": {"depth": [1, 2]}, "count": {"demo": 4, "paper": 4}},
                "folio": {"kind": "folio", "source": {"path": str(folio)}, "count": {"demo": 3, "paper": 3}},
            },
            "misguiding_rates": [1.0, 0.0], "baselines": ["cot"],
        })
        yield cfg, build_definitions(cfg.source)




def checks(result):
    return {c.check_name: c.passed for c in result.get_asset_check_evaluations()}


@pytest.mark.slow
def test_items_outcomes_and_metrics_for_every_dataset(setup):
    cfg, defs = setup
    results = {pk: materialize(defs, ["waken_items", "waken_outcomes"], pk) for pk in ("fld", "folio")}
    assert all(r.success for r in results.values())
    assert checks(results["fld"]) == {"solvable_unknown_one_to_one": True, "no_duplicate_items": True,
                                      "gold_label_matches_proof": True, "folio_fol_read": True,
                                      "paper_counts_reached": True,
                                      "converting_identities": True,
                                      "failed_calls": True, "undecided_replies": True, "truncated_replies": True}
    metrics = materialize(defs, ["waken_metrics"])
    assert metrics.success and checks(metrics) == {"every_model_and_dataset": True}

    wh = Warehouse(cfg.warehouse_path())
    assert wh.rows("SELECT dataset, sample_type, count(*) AS n FROM waken.items GROUP BY ALL ORDER BY ALL") == [
        {"dataset": "fld", "sample_type": "solvable", "n": 2}, {"dataset": "fld", "sample_type": "unsolvable", "n": 2},
        {"dataset": "folio", "sample_type": "solvable", "n": 2}, {"dataset": "folio", "sample_type": "unsolvable", "n": 1}]
    # a model that always says Unknown: every solvable item is vague perception, none converts
    t3 = {r["dataset"]: r for r in wh.rows("SELECT * FROM waken.table3")}
    assert set(t3) == {"fld", "folio"} and t3["fld"]["TCR1"] == 50.0  # percent, as printed: the Unknown items
    t8 = {r["dataset"]: r for r in wh.rows("SELECT * FROM waken.table8")}
    assert t8["fld"]["V"] == 100.0 and t8["fld"]["U"] == 100.0
    [t6] = wh.rows("""SELECT "Direct", "CoT", "Few-shot", "WakenLLM" FROM waken.table6 WHERE dataset = 'fld'""")
    assert t6["Direct"] == 50.0 and t6["CoT"] is not None and t6["Few-shot"] is None  # few-shot not configured
    for view in ("table5", "table9_11", "table12"):
        assert wh.rows(f"SELECT * FROM waken.{view} WHERE \"Dataset\" = 'fld'"), view
    assert wh.scalar("SELECT count(*) FROM waken.outcomes WHERE outcome = 'call_failed'") == 0
    # the loaded source is stored whole beside the sample drawn from it; the generator stores none
    assert wh.rows("SELECT dataset, count(*) AS n FROM sources.records GROUP BY ALL") == [{"dataset": "waken:folio", "n": 3}]


@pytest.mark.slow
def test_folio_labels_are_verified_and_disagreements_reported(setup):
    cfg, defs = setup
    result = materialize(defs, ["waken_items"], "folio")
    assert result.success
    assert checks(result)["gold_label_matches_proof"] is False  # WARN severity: reported, not fatal
    items = Warehouse(cfg.warehouse_path()).rows("SELECT item_id, label, verified_label FROM waken.items ORDER BY item_id")
    assert all(r["verified_label"] in ("True", "False", "Unknown") for r in items)
    by_id = {r["item_id"]: r for r in items}
    assert by_id["folio-12"]["label"] == "True" and by_id["folio-12"]["verified_label"] == "False"
    assert by_id["folio-10"]["verified_label"] == "True" and by_id["folio-11"]["verified_label"] == "Unknown"


@pytest.mark.slow
def test_same_seed_same_items(setup, tmp_path):
    cfg, defs = setup
    assert materialize(defs, ["waken_items"], "fld").success
    first = Warehouse(cfg.warehouse_path()).rows("SELECT * FROM waken.items ORDER BY item_id")
    assert materialize(defs, ["waken_items"], "fld").success
    again = Warehouse(cfg.warehouse_path()).rows("SELECT * FROM waken.items ORDER BY item_id")
    assert first == again and len(first) == 4


@pytest.mark.slow
def test_every_folio_row_is_read_and_checked_against_gold_with_a_summary_per_file(tmp_path):
    """A file in FOLIO v0.0's validation layout, written for this test with the annotation quirks the
    real file has (names in other scripts, curly apostrophes, a decimal numeral in a constant, ⟷, a
    comma for ∧, a stray bracket), one deliberately wrong gold label and one formula two brackets off."""
    src = FIX / "folio_v0_validation_quirks.jsonl"
    with StubServer(responder=always_unknown) as stub:
        cfg = stub_config(stub, tmp_path, waken={"datasets": {"folio": {
            "kind": "folio", "source": {"path": str(src), "split": "validation"}, "count": {"demo": 2, "paper": 2}}}})
        result = materialize(build_definitions(cfg.source), ["waken_items"], "folio")
    assert result.success
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == "folio_fol_read"]
    assert not check.passed and check.severity.value == "WARN"  # one row unreadable: said, not fatal
    summary = check.metadata["per_file"].value
    assert summary == {str(src): {"rows": 8, "parsed": 7, "agree": 6, "disagree": 1, "repaired": 1}}
    rows = Warehouse(cfg.warehouse_path()).rows(
        "SELECT row_number, parsed, proved, gold, agrees, reason, warnings FROM waken.fol_checks ORDER BY row_number")
    assert [(r["proved"], r["gold"], r["agrees"]) for r in rows] == [
        ("True", "True", True), ("False", "False", True), ("True", "True", True), ("True", "True", True),
        ("Unknown", "Unknown", True),  # the comma joins two conditions; Film(filmone) is not given
        ("True", "True", True),  # read after dropping the stray bracket
        ("True", "False", False),  # the planted wrong gold label
        (None, "True", None)]
    assert "dropped a closing bracket" in rows[5]["warnings"]
    assert not rows[7]["parsed"] and "brackets do not balance" in rows[7]["reason"]


def test_the_stored_items_checks_warn_on_a_gold_label_the_prover_contradicts():
    from generators.waken import item_checks

    rows = [{"item_id": "1", "sample_type": "solvable", "label": "True", "verified_label": "False"},
            {"item_id": "2", "sample_type": "unsolvable", "label": "Unknown", "verified_label": "Unknown"}]
    checks = {c.name: c for c in item_checks(rows, [], "fld")}
    assert checks["solvable_unknown_one_to_one"].passed and checks["no_duplicate_items"].passed
    gold = checks["gold_label_matches_proof"]
    assert not gold.passed and gold.warn and gold.metadata["disagreements"] == [
        {"item_id": "1", "gold": "True", "proved": "False"}]
