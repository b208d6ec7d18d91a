"""Instruction Boundary assets end to end on a stub model: generated and file-sourced datasets."""

from pathlib import Path

import pytest

from assets.definitions import build_definitions
from evaluations.ib import SETTINGS
from llm_calls.stub_server import StubServer
from tests.conftest import materialize, stub_config
from warehouse import Warehouse

FIX = Path(__file__).parent / "fixtures" / "sources"


def checks(result):
    return {c.check_name: c.passed for c in result.get_asset_check_evaluations()}


@pytest.mark.slow
def test_every_dataset_setting_and_form_reaches_the_metrics(tmp_path):
    with StubServer(responder=lambda body: "Answer: 1") as stub:
        cfg = stub_config(stub, tmp_path, ib={
            "datasets": {
                "fld": {"form": "judging", "generator": "fld", "count": {"demo": 2, "paper": 2}},
                "mmlu": {"form": "single", "source": {"kind": "mmlu", "path": str(FIX / "mmlu.jsonl")},
                         "count": {"demo": 2, "paper": 2}},
                "multirc": {"form": "multiple", "source": {"kind": "multirc", "path": str(FIX / "multirc.jsonl")},
                            "count": {"demo": 2, "paper": 2}},
            },
            "miscellany": {"form": "single", "source": {"kind": "mmlu_pro", "path": str(FIX / "mmlu_pro.jsonl")},
                           "count": {"demo": 1, "paper": 1}},
        })
        defs = build_definitions(cfg.source)
        for pk in ("fld", "mmlu", "multirc", "miscellany"):
            result = materialize(defs, ["ib_items", "ib_responses"], pk)
            assert result.success and all(checks(result).values()), (pk, checks(result))
        result = materialize(defs, ["ib_metrics"])
        assert result.success and checks(result) == {"every_model_setting_form": True}

    wh = Warehouse(cfg.warehouse_path())
    summary = wh.rows("SELECT DISTINCT setting, form FROM ib.summary WHERE acc IS NOT NULL")
    settings = {r["setting"] for r in summary}
    assert settings == set(SETTINGS)
    assert {r["form"] for r in summary} == {"judging", "single", "multiple"}
    assert wh.scalar("SELECT count(*) FROM ib.miscellany_items") == 9
    [misc] = wh.rows("SELECT * FROM ib.miscellany")  # table 6: percent per number of wrong options kept
    assert list(misc) == ["model", *(str(k) for k in range(1, 10))] and misc["model"] == "stub"
    [t7] = wh.rows("SELECT * FROM ib.table7")
    assert t7["Vanilla Scenario"] is not None and 0 <= t7["Conformity"] <= 100
    assert wh.rows("SELECT * FROM ib.figure6 WHERE \"Setting\" = 'vanilla'")
    assert wh.rows("SELECT dataset, count(*) AS n FROM sources.records WHERE dataset LIKE 'ib:%' GROUP BY ALL ORDER BY 1") == [
        {"dataset": "ib:miscellany", "n": 2}, {"dataset": "ib:mmlu", "n": 2}, {"dataset": "ib:multirc", "n": 3}]
    # a model that always answers 1: right exactly where option 1 is the gold
    for r in wh.rows("SELECT r.correct, i.gold FROM ib.responses r JOIN ib.items i USING (dataset, item_id) "
                     "WHERE r.setting = 'vanilla'"):
        assert r["correct"] == (r["gold"] == "[1]")
