"""WakenLLM on ScienceQA topics: Unknown items by deleting supporting sentences, judge-verified and
replaced when the judge still sees a unique answer; multiple-choice answers through the pipeline."""

import json
import re

import pytest

from assets.definitions import build_definitions
from generators.waken import without_support
from llm_calls.stub_server import StubServer
from tests.conftest import materialize, stub_config
from warehouse import Warehouse

ROWS = [
    ("physics", "Which force slows a sliding box?", ["friction", "magnetism"], 0,
     "A box slides across a rough floor. The rough floor rubs the box. The box slows down and stops."),
    ("physics", "Which magnet pole attracts a north pole?", ["south", "north"], 0,
     "Magnets have two poles. Opposite poles attract each other. Like poles repel each other."),
    ("biology", "Which animal has feathers?", ["a robin", "a frog"], 0,
     "Birds have feathers. A robin is a bird. Frogs have moist skin."),
    ("biology", "Which part of a plant makes food?", ["the leaves", "the roots"], 0,
     "Plants make food in their leaves. The leaves use sunlight. Roots take in water."),
    ("physics", "Which object is heavier?", ["a brick", "a feather"], 0,
     "A brick weighs two kilograms. A feather weighs a gram. Weight measures heaviness."),
    ("biology", "What do fish use to breathe?", ["gills", "lungs"], 0,
     "Fish live in water. Fish breathe with gills. Gills take oxygen from water."),
    ("figurative-language", "Which is a simile?", ["as dark as ink", "dark"], 0, "A simile uses like or as."),
]


def science_file(tmp_path):
    path = tmp_path / "scienceqa.jsonl"
    rows = [{"image": None, "question": q, "choices": c, "answer": a, "hint": h, "task": "closed choice",
             "grade": "grade3", "subject": "natural science", "topic": t, "category": "c", "skill": "s",
             "lecture": "", "solution": ""} for t, q, c, a, h in ROWS]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


REJECTED: list[str] = []


def model(body):
    text = body["messages"][-1]["content"]
    if "Does the context give enough information" in text:
        if not REJECTED:  # the judge still sees a unique answer in the first draft it reads
            REJECTED.append(re.search(r"Question: (.+)", text).group(1))
            return "Yes"
        return "No"
    if "Output only True or False" in text:
        return "False"
    if "mainly caused" in text:
        return "C"
    return "Final answer: Unknown"


@pytest.fixture
def run(tmp_path):
    REJECTED.clear()
    with StubServer(responder=model) as stub:
        cfg = stub_config(stub, tmp_path, waken={
            "datasets": {"science": {"kind": "scienceqa", "form": "story", "topics": ["physics", "biology"],
                                     "source": {"path": str(science_file(tmp_path))}, "count": {"demo": 4, "paper": 4}}},
            "misguiding_rates": [1.0], "baselines": ["few_shot"],
        })
        defs = build_definitions(cfg.source)
        results = [materialize(defs, keys, pk)
                   for keys, pk in ((["waken_items", "waken_outcomes"], "science"), (["waken_metrics"], None))]
        yield cfg, results, [r["body"] for r in stub.requests]


def test_deleting_the_two_most_supporting_sentences():
    modified, deleted = without_support(ROWS[0][4], ROWS[0][1], "friction")
    assert len(deleted) == 2 and modified and all(d not in modified for d in deleted)
    assert without_support("Only one sentence.", "q", "a") is None


def test_unknown_items_are_verified_and_replaced_from_the_pool(run):
    cfg, results, bodies = run
    assert all(r.success for r in results)
    wh = Warehouse(cfg.warehouse_path())
    items = wh.rows("SELECT item_id, label, sample_type, context, extra FROM waken.items ORDER BY sample_type, item_id")
    solvable = [i for i in items if i["sample_type"] == "solvable"]
    unknown = [i for i in items if i["sample_type"] == "unsolvable"]
    assert len(solvable) == 2 and len(unknown) == 2
    for i in solvable:
        extra = json.loads(i["extra"])
        assert i["label"] == extra["choices"][extra["answer_index"]]  # the label is the correct option
    for i in unknown:
        extra = json.loads(i["extra"])
        assert i["label"] == "Unknown" and len(extra["deleted_sentences"]) == 2
        assert extra["original_context"] != i["context"] and "No" in extra["verification"]
    asked = [b for b in bodies if "Does the context give enough information" in b["messages"][-1]["content"]]
    assert len(asked) == 3 and len(REJECTED) == 1  # two needed, one rejected and replaced from the pool
    questions = wh.rows("SELECT question FROM waken.items WHERE sample_type = 'unsolvable'")
    assert REJECTED[0] not in {q["question"] for q in questions}
    assert wh.scalar("SELECT count(*) FROM sources.records WHERE dataset = 'waken:science'") == 6  # arts row filtered out


def test_choice_items_are_asked_with_lettered_options_and_unknown(run):
    cfg, _, bodies = run
    direct = [b["messages"][-1]["content"] for b in bodies if b["messages"][-1]["content"].startswith("Read the context")
              and b["messages"][-1]["content"].endswith('"Final answer: Unknown".')]
    assert len(direct) == 4 and all("Options:\n(A) " in t and "(B) " in t for t in direct)
    diagnosis = [b["messages"][-1]["content"] for b in bodies if "Output only True or False" in b["messages"][-1]["content"]]
    assert diagnosis and all("no single option can be chosen" in t for t in diagnosis)
    wh = Warehouse(cfg.warehouse_path())
    assert wh.rows("SELECT DISTINCT prediction FROM waken.outcomes WHERE step = 'direct'") == [{"prediction": "Unknown"}]
    shares = {r["sample_type"]: r["value"] for r in wh.rows(
        "SELECT sample_type, value FROM waken.metrics WHERE metric = 'vague_perception_share'")}
    assert shares == {"s": 1.0, "u": 1.0}
    assigned = [b["messages"][-1]["content"] for b in bodies if "A suggested label" in b["messages"][-1]["content"]]
    # M = 100%: every suggested label is wrong, and drawn from the item's own options or Unknown
    assert assigned and all(re.search(r"suggested label for it is: (.+?)\.", t) for t in assigned)

