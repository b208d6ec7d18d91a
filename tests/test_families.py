"""The family registry (configuration/families.py): each family is described once, every layer finds
its parts by the references its entry holds, and nothing else writes the list of families out."""

import re
from pathlib import Path

import duckdb
import pytest

from assets.definitions import build_definitions
from assets.jobs import job_names
from configuration.families import FAMILIES, KEYS, load
from warehouse import schema

ROOT = Path(__file__).resolve().parent.parent

def test_every_family_s_parts_are_its_layers_contract_types():
    """Each registry entry names its parts; each loads as its layer's contract type (or a function for
    the assets and the panel), and the release part is there exactly when the family has a release."""
    from evaluations.calls import Protocol, protocol_of
    from generators.ahead import ItemsAhead, ahead_of
    from releases import Release, spec
    from warehouse import parts

    for f in FAMILIES:
        assert isinstance(parts.of(f), parts.WarehouseParts)
        assert isinstance(protocol_of(f), Protocol)
        assert callable(load(f.parts.assets)) and callable(load(f.parts.panel))
        assert (f.release is not None) == (f.parts.release is not None)
        if f.parts.release:
            assert isinstance(spec(f.key), Release)
        if f.parts.ahead:
            assert isinstance(ahead_of(f), ItemsAhead)
    assert [f.key for f in FAMILIES if f.parts.ahead] == ["muso"]


def test_a_part_that_is_missing_or_of_the_wrong_type_fails_naming_the_family_and_its_reference():
    import dataclasses

    from evaluations.calls import protocol_of
    from warehouse import parts

    muso = FAMILIES[0]
    with pytest.raises(LookupError, match="warehouse.muso:NOPE: warehouse.muso has no NOPE"):
        parts.of(dataclasses.replace(muso, parts=dataclasses.replace(muso.parts, warehouse="warehouse.muso:NOPE")))
    with pytest.raises(LookupError, match="no module warehouse.nope"):
        load("warehouse.nope:PARTS")
    wrong = dataclasses.replace(muso, parts=dataclasses.replace(muso.parts, protocol="warehouse.muso:PARTS"))
    with pytest.raises(TypeError, match="muso: warehouse.muso:PARTS is a WarehouseParts, not a Protocol"):
        protocol_of(wrong)


def test_a_family_s_tables_and_views_are_in_its_own_schema_and_its_items_table_is_among_them():
    from warehouse import parts

    for f in FAMILIES:
        p = parts.of(f)
        names = [*p.tables, *p.views, *p.item_keys, *p.made_on]
        assert all(n.startswith(f"{f.key}.") for n in names), names
        assert f.items_table in p.tables and f.items_table in p.item_keys
        assert f.key in schema.SCHEMAS
        if f.partition_column:  # the partition column names an item together with the item id
            assert p.item_keys[f.items_table][0] == f.partition_column


def test_the_definitions_and_jobs_are_the_registry_s(tmp_path):
    defs = build_definitions()
    names = {key.path[-1] for a in defs.assets for key in a.keys}
    for f in FAMILIES:
        assert set(f.assets) <= names
        assert {f"build_{f.key}", f"evaluate_{f.key}", f"score_{f.key}"} <= set(job_names())
    assert [n for n in job_names() if n.startswith("build_")] == [f"build_{k}" for k in KEYS]


def _names_three_families(line: str) -> bool:
    return sum(bool(re.search(rf"(['\"]{k}['\".]|\b{k}_|\b{k}\b)", line)) for k in KEYS) >= 3


@pytest.mark.slow
def test_no_source_file_but_the_registry_writes_out_the_list_of_families():
    """A line naming three or more family keys is a list of families; only the registry has one."""
    found = []
    for path in sorted(ROOT.glob("*/**/*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in (".venv", "tests", "benchmarks", "data") or rel == Path("configuration/families.py"):
            continue
        found += [f"{rel}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1) if _names_three_families(line)]
    assert found == []


def test_the_list_detector_sees_a_list_of_families():
    assert _names_three_families('FAMILIES = ("muso", "waken", "ib", "s1")')
    assert _names_three_families("from assets import muso_metrics, waken_metrics, s1_metrics")
    assert not _names_three_families('SELECT * FROM muso.metrics JOIN waken.metrics USING (model)')


def test_the_configuration_has_one_section_per_family_from_its_own_module():
    from configuration import Config
    from configuration.base import Section

    for f in FAMILIES:
        assert issubclass(f.config, Section) and f.config.__module__ == f"configuration.{f.key}"
        assert Config.model_fields[f.key].annotation is f.config
    assert [k for k in Config.model_fields if k in KEYS] == list(KEYS)


FIFTH = ROOT / "tests" / "fixtures" / "fifth_family"


def _project_with_a_fifth_family(dest: Path) -> None:
    """A copy of the project (the files git tracks) with the fixture's family modules laid over it
    and one registry entry added: exactly what docs/adding-a-family.md asks of a newcomer."""
    import shutil
    import subprocess

    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for rel in tracked:
        if rel.startswith("tests/fixtures/fifth_family/") or not (ROOT / rel).is_file():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest / rel)
    for path in FIFTH.rglob("*"):
        if path.is_file() and path.name != "README.md":
            target = dest / path.relative_to(FIFTH)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    registry = dest / "configuration" / "families.py"
    text = registry.read_text()
    if 'Family("toy"' in text:  # the suite itself runs in such a copy: the family is there already
        return
    text = text.replace("from configuration.waken import WakenConfig\n",
                        "from configuration.toy import ToyConfig\nfrom configuration.waken import WakenConfig\n", 1)
    entry = ('    Family("toy", "Toy", "dataset", "toy_items", "toy_responses", "toy_metrics", "toy.items", "dataset",'
             ' ToyConfig, Parts.of("toy", release=False)),\n)\nKEYS')
    assert text.count(")\nKEYS") == 1
    registry.write_text(text.replace(")\nKEYS", entry, 1))
    # and its row in the README's table of families, which links its document
    readme = dest / "README.md"
    row = "| S1-Bench (`s1`) |"
    text = readme.read_text()
    assert text.count(row) == 1
    at = text.index("\n", text.index(row)) + 1
    readme.write_text(text[:at] + "| Toy (`toy`) | none | [docs/toy.md](docs/toy.md) | `configuration/toy.py`, "
                      "`evaluations/toy.py`, `warehouse/toy.py`, `assets/toy.py`, `reporting/panels/toy.py` |\n"
                      + text[at:])


@pytest.mark.slow
def test_a_fifth_family_is_its_own_modules_and_one_registry_entry(tmp_path):
    """The fixture family runs end to end in a copy of the project with nothing else changed: its
    jobs, tables, views, headline and mechanism rows, plan lines, summary line and report panel."""
    import os
    import subprocess
    import sys

    import yaml

    from llm_calls.stub_server import StubServer

    project = tmp_path / "project"
    _project_with_a_fifth_family(project)

    def reply(body):
        said = body["messages"][-1]["content"]
        return said.split("Repeat the word: ", 1)[1] if "Repeat the word: " in said else "Answer: 1"

    with StubServer(responder=reply) as stub:
        cfg = {"warehouse": {"path": str(tmp_path / "wh.duckdb")}, "models": {"stub": {"base_url": stub.base_url,
               "model": "stub-model", "concurrency": 4}}, "evaluate": ["stub"], "judge": "stub",
               "toy": {"datasets": ["colours", "shades"], "count": {"demo": 3, "paper": 3}}}
        (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
        env = {**os.environ, "BENCHSMITH_CONFIG": str(tmp_path / "cfg.yaml"), "DAGSTER_HOME": str(tmp_path),
               "PYTHONPATH": str(project)}
        run = subprocess.run([sys.executable, "-m", "assets.materialize_all", "--select", "toy"], cwd=project,
                             env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        plan = subprocess.run([sys.executable, "-m", "assets.materialize_all", "--plan", "--select", "toy",
                               "--latency", "0.1"], cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert plan.returncode == 0 and "toy.repeat" in plan.stdout, plan.stdout + plan.stderr
    assert "Toy" in run.stdout and "FAILED" not in run.stdout
    # read as the copy wrote it: this process's schema (no toy family) would redo the report views
    con = duckdb.connect(str(tmp_path / "wh.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM toy.items WHERE item_digest IS NOT NULL").fetchall() == [(6,)]
    assert con.execute("SELECT scope, value FROM report.headline WHERE family = 'toy' ORDER BY scope").fetchall() == [
        ("colours", 1.0), ("shades", 1.0)]
    assert con.execute("SELECT bool_and(reached) FROM report.mechanisms WHERE family = 'toy'").fetchall() == [(True,)]
    con.close()
    page = (tmp_path / "reports" / "stub.html").read_text()
    assert 'id="toy"' in page and "toy.table1" in page
