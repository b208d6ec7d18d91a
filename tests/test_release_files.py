"""Every paper dataset from its local release files, configured exactly as benchsmith.yaml documents
it (the commented `*_local` entries, uncommented), materialised through Dagster: the WakenLLM and
Instruction Boundary item assets. The release files are the hand-written fixtures, laid out under
the documented paths in a project folder; counts are sized to the fixtures (a few rows each)."""

import json
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from assets.definitions import build_definitions
from configuration import load_config
from llm_calls.stub_server import StubServer
from tests.conftest import materialize, stub_config
from warehouse import Warehouse

ROOT = Path(__file__).resolve().parent.parent
FIX = Path(__file__).parent / "fixtures" / "sources"
# documented path -> the fixture written in that layout
RELEASES = {
    "data/FLD.v2": FIX / "fld_hub",
    "data/FOLIO/folio-train.jsonl": FIX / "folio_v0_train.jsonl",
    "data/ScienceQA/data/scienceqa": FIX / "scienceqa_release",
    "data/mmlu/data/test": FIX / "mmlu_release" / "data" / "test",
    "data/commonsenseqa/dev_rand_split.jsonl": FIX / "commonsenseqa_dev_rand_split.jsonl",
    "data/TruthfulQA/TruthfulQA.csv": FIX / "TruthfulQA.csv",
    "data/MultiRC/val.jsonl": FIX / "multirc_superglue_val.jsonl",
}
COUNTS = {"fld_local": 2, "folio_local": 2, "science_local": 4, "arts_local": 4}  # WakenLLM; IB: 2 questions each


def documented(family: str) -> dict:
    """The commented paper-dataset entries of benchsmith.yaml for `family`, uncommented and parsed."""
    text = (ROOT / "benchsmith.yaml").read_text()
    block = re.search(rf"# BEGIN paper datasets \({family}\)[^\n]*\n(.*?)\n\s*# END paper datasets \({family}\)",
                      text, re.S).group(1)
    body = [line.split("# ", 1)[1] for line in block.splitlines() if line.strip()]
    indent = min(len(line) - len(line.lstrip()) for line in body)
    return yaml.safe_load("\n".join(line[indent:] for line in body))


def test_the_documented_entries_pair_a_hub_source_with_a_local_release_for_every_paper_dataset():
    for family, names in (("waken", ["fld", "folio", "science", "arts"]),
                          ("ib", ["fld", "folio", "scienceqa", "mmlu", "commonsenseqa", "truthfulqa", "multirc"])):
        entries = documented(family)
        assert sorted(entries) == sorted([*names, *(f"{n}_local" for n in names)])
        for name in names:
            assert "hub" in entries[name]["source"]
            assert entries[f"{name}_local"]["source"].get("path", entries[f"{name}_local"]["source"].get("hub")) in RELEASES


def project(tmp_path: Path) -> Path:
    """A project folder holding the release files where the documented entries expect them."""
    base = tmp_path / "project"
    for rel, fixture in RELEASES.items():
        target = base / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if fixture.is_dir():
            shutil.copytree(fixture, target)
        else:
            shutil.copy(fixture, target)
    pro = [json.loads(line) for line in (FIX / "mmlu_pro.jsonl").read_text().splitlines() if line.strip()]
    (base / "data" / "MMLU-Pro" / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(pro), base / "data" / "MMLU-Pro" / "data" / "test-00000-of-00001.parquet")
    return base


def judge(body):
    text = body["messages"][0]["content"]
    enough = ("Does the context give enough information", "Do the question and options alone")
    return "No." if any(q in text for q in enough) else "Final answer: Unknown"


@pytest.mark.slow
def test_every_paper_dataset_builds_its_items_from_local_release_files_through_dagster(tmp_path):
    base = project(tmp_path)
    waken = {k: {**v, "count": {"demo": COUNTS[k], "paper": COUNTS[k]}}
             for k, v in documented("waken").items() if k.endswith("_local")}
    ib = {k: {**v, "count": {"demo": 2, "paper": 2}} for k, v in documented("ib").items() if k.endswith("_local")}
    miscellany = yaml.safe_load(re.search(r"# (source: \{kind: mmlu_pro, path: [^\n]+)",
                                          (ROOT / "benchsmith.yaml").read_text()).group(1))
    with StubServer(responder=judge) as stub:
        written = stub_config(stub, base, waken={"datasets": waken}, ib={
            "datasets": ib, "miscellany": {"form": "single", **miscellany, "count": {"demo": 1, "paper": 1}}})
        cfg = load_config(written.source)  # relative paths resolve beside the file, not the working directory
        assert cfg.waken.datasets["science_local"].source.path == str(base / "data/ScienceQA/data/scienceqa")
        defs = build_definitions(cfg.source)
        failed = {}
        for name in waken:
            result = materialize(defs, ["waken_items"], name)
            if not result.success:
                failed[f"waken/{name}"] = result
        for name in [*ib, "miscellany"]:
            result = materialize(defs, ["ib_items"], name)
            if not result.success:
                failed[f"ib/{name}"] = result
    assert not failed, sorted(failed)
    wh = Warehouse(cfg.warehouse_path())
    items = {r["dataset"]: (r["n"], r["unknown"]) for r in wh.rows(
        "SELECT dataset, count(*) AS n, count(*) FILTER (label = 'Unknown') AS unknown FROM waken.items GROUP BY ALL")}
    assert items == {name: (n, n // 2) for name, n in COUNTS.items()}
    arts = wh.rows("SELECT question, context FROM waken.items WHERE dataset = 'arts_local' AND label = 'Unknown'")
    assert all(r["context"] and "\n" not in r["question"] for r in arts)
    ib_items = {r["dataset"]: r["n"] for r in wh.rows(
        "SELECT dataset, count(*) AS n FROM ib.items WHERE variant = 'complete' GROUP BY ALL")}
    assert ib_items == {name: 2 for name in ib}
    assert wh.scalar("SELECT count(*) FROM ib.items WHERE dataset = 'miscellany'") == 9  # 2..10 options
    options = wh.rows("SELECT dataset, form, label_type, n_options, gold FROM ib.items "
                      "WHERE variant = 'complete' AND form <> 'judging' AND dataset <> 'miscellany'")
    for r in options:  # 4 options, as the authors' released items
        assert r["n_options"] == 4, r
    multi = [json.loads(r["gold"]) for r in options if r["form"] == "multiple"]
    assert multi and all(len(g) == 2 for g in multi)  # multi-select: 2 true of 4, table 3's GR3 items
    sources = {r["dataset"] for r in wh.rows("SELECT DISTINCT dataset FROM sources.records")}
    assert sources == {f"waken:{n}" for n in waken} | {f"ib:{n}" for n in ib} | {"ib:miscellany"}


def test_folio_is_fact_based_and_scienceqa_story_based_as_paper_000_sorts_them():
    """Paper 000, section 2: FLD and FOLIO under "Fact-based Datasets" (appendix C: 43.66 % fact-based =
    FLD 21.13 % + FOLIO 22.53 %, Figure 2's (600 + 640) / 2,840), ScienceQA's topics story-based; section
    4.1 gives fact-based datasets the detailed stimulation."""
    from configuration import WakenDataset

    entries = documented("waken")
    for name, form in (("fld", "fact"), ("folio", "fact"), ("science", "story"), ("arts", "story")):
        for entry in (entries[name], entries[f"{name}_local"]):
            assert WakenDataset.model_validate(entry).context_form == form, (name, entry)
    # with no `form` written, the kind decides
    for kind, form in (("fld", "fact"), ("folio", "fact"), ("scienceqa", "story")):
        entry = {"kind": kind, "source": {"path": "x"}, "count": {"demo": 2, "paper": 2},
                 **({"topics": ["physics"]} if kind == "scienceqa" else {})}
        assert WakenDataset.model_validate(entry).context_form == form
    assert 100 * (600 + 640) / 2840 == pytest.approx(43.66, abs=0.01)
