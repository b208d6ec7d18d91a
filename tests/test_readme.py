"""The README and the families' documents stay true: their SQL runs against the warehouse schema,
their links lead somewhere, the commands exist."""

import os
import re
from pathlib import Path

import pytest

from warehouse import Warehouse

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DOCS = {path: path.read_text() for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
                                            *sorted((ROOT / "design").glob("*.md"))]}
TEXT = "\n".join(DOCS.values())  # the README and every document, where a recipe may live
README_LINES = 320  # the front door's budget (about 300 lines): the rest goes to docs/ by topic


def readme_queries() -> list[str]:
    """Every SQL block of the README, docs/*.md and design/*.md, one query per statement."""
    out = []
    for block in re.findall(r"```sql\n(.*?)```", TEXT, re.S):
        for q in block.split(";"):
            q = "\n".join(line for line in q.splitlines() if not line.strip().startswith("--")).strip()
            if q:
                out.append(q)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("query", readme_queries())
def test_readme_sql_runs_against_the_schema(query, tmp_path):
    Warehouse(tmp_path / "wh.duckdb").rows(query)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_relative_link_of_the_docs_leads_to_a_file_and_heading_that_exist():
    broken = []
    for path, text in DOCS.items():
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            if not dest.exists():
                broken.append(f"{path.name}: {target}")
            elif anchor and dest.suffix == ".md":
                headings = {_anchor(h) for h in re.findall(r"^#+ (.+)$", dest.read_text(), re.M)}
                if anchor not in headings:
                    broken.append(f"{path.name}: {target}")
    assert broken == []


def test_each_family_has_its_document_and_the_readme_links_it():
    from configuration.families import FAMILIES

    for f in FAMILIES:
        assert (ROOT / "docs" / f"{f.key}.md").exists() and f"(docs/{f.key}.md)" in README


def test_the_readme_is_a_front_door_within_its_line_budget_and_links_every_document():
    """The README stays short (what it is, the two commands, the layout, the families, where to read next);
    the rest lives in docs/ and design/, each document reachable from it."""
    assert len(README.splitlines()) <= README_LINES, f"README.md has {len(README.splitlines())} lines, over {README_LINES}"
    for path in DOCS:
        if path.name != "README.md":
            assert f"({path.relative_to(ROOT)})" in README, f"README.md does not link {path.relative_to(ROOT)}"


def test_each_family_document_cites_its_paper_as_its_release_does():
    """docs/<key>.md follows lm-eval's task template: the paper with its link, the release's own BibTeX
    entry, what it builds, a fidelity checklist and a changelog."""
    import importlib

    from configuration.families import FAMILIES

    for f in FAMILIES:
        text = (ROOT / "docs" / f"{f.key}.md").read_text()
        headings = re.findall(r"^## (.+)$", text, re.M)
        assert [h for h in headings if h in {"Paper", "Citation", "What it builds", "Checklist", "Changelog"}] == \
            ["Paper", "Citation", "What it builds", "Checklist", "Changelog"], f.key
        citation = importlib.import_module(f"releases.{f.key}").PAPER.citation
        assert f"```bibtex\n{citation}\n```" in text, f.key
        url = re.search(r"url=\{(https://arxiv\.org/abs/[\d.]+)\}", citation).group(1)
        assert f"]({url})" in text and "shared/papers" not in text, f.key


def test_readme_names_the_commands_ci_and_the_makefile_run():
    assert "make demo" in README and "make test" in README
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "make test" in ci


def recipe_commands(marker: str = "recipes") -> list[list[str]]:
    """The commands of a recipes block of the README or a document (`<!-- recipes: ...`, `<!-- batch-recipes: ...`),
    as argument lists."""
    assert TEXT.count(f"<!-- {marker}:") == 1, marker
    block = TEXT.split(f"<!-- {marker}:", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.split("#")[0].split() for line in block.splitlines() if line.strip() and not line.startswith("#")]


@pytest.mark.slow
def test_the_readme_recipes_do_what_they_say(tmp_path, monkeypatch):
    """Run one family; run one partition; add a model and evaluate only it; compare two models in
    SQL; open the report: the README's own commands, in order, on a small stub configuration
    (`smollm2` stands for the stub model, `qwen7b` for a second one)."""
    import yaml

    from assets.materialize_all import main as materialize_all
    from llm_calls.stub_server import StubServer
    from tests.conftest import stub_config
    from tests.test_plan import SMALL

    commands = recipe_commands()
    runs = [c for c in commands if c[:3] == [".venv/bin/python", "-m", "assets.materialize_all"]]
    opens = [c for c in commands if c[0] == "xdg-open"]
    assert [r[3:] for r in runs] == [["--select", "waken"], ["--select", "ib", "--partition", "fld"],
                                     ["--model", "qwen7b"]] and len(opens) == 1
    compare = next(q for q in readme_queries() if "FILTER (model = 'qwen7b')" in q)
    with StubServer(responder=lambda body: "Answer: 1") as stub:
        small = {**SMALL, "muso": {**SMALL["muso"], "timetabling": {"bins": [[1, 50]]}}}
        cfg = stub_config(stub, tmp_path, **small)
        data = yaml.safe_load(Path(cfg.source).read_text())
        data["models"] = {"smollm2": {"base_url": stub.base_url, "model": "stub-model"}}
        data["evaluate"], data["judge"] = ["smollm2"], "smollm2"
        Path(cfg.source).write_text(yaml.safe_dump(data, sort_keys=False))
        monkeypatch.setenv("BENCHSMITH_CONFIG", cfg.source)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
        wh = Warehouse(cfg.warehouse_path())

        assert materialize_all(runs[0][3:]) == 0  # one family
        assert wh.scalar("SELECT count(DISTINCT dataset) FROM waken.outcomes") == 1
        assert wh.scalar("SELECT count(*) FROM ib.items") == 0 and wh.scalar("SELECT count(*) FROM muso.instances") == 0

        assert materialize_all(runs[1][3:]) == 0  # one partition
        assert [r["dataset"] for r in wh.rows("SELECT DISTINCT dataset FROM ib.responses")] == ["fld"]

        # add a model, as the README says: under `models` and in `evaluate`
        data["models"]["qwen7b"] = {"base_url": stub.base_url, "model": "second-model"}
        data["evaluate"].append("qwen7b")
        Path(cfg.source).write_text(yaml.safe_dump(data, sort_keys=False))
        before = wh.rows("SELECT * FROM ib.responses WHERE model = 'smollm2' ORDER BY ALL")
        assert materialize_all(runs[2][3:]) == 0  # only the new model's slices
        assert wh.rows("SELECT * FROM ib.responses WHERE model = 'smollm2' ORDER BY ALL") == before
        by_model = {r["model"]: r["n"] for r in wh.rows(
            "SELECT model, count(DISTINCT dataset) AS n FROM ib.responses GROUP BY model")}
        assert by_model == {"smollm2": 1, "qwen7b": 3}  # fld, arithmetic, miscellany for the new one
        assert wh.scalar("SELECT count(*) FROM s1.responses WHERE model = 'smollm2'") == 0

        # compare two models in SQL: both columns filled where both were evaluated
        both = [r for r in wh.rows(compare) if r["smollm2"] is not None and r["qwen7b"] is not None]
        assert {r["family"] for r in both} == {"waken", "ib"}

    # open the report: the file the README names exists, beside the warehouse
    report = cfg.warehouse_path().parent / Path(opens[0][1]).relative_to("data")
    assert report.name == "qwen7b.html" and "<h1>Benchsmith report: qwen7b</h1>" in report.read_text()


@pytest.mark.slow
def test_the_readme_batch_recipes_export_run_import_and_continue_until_nothing_waits(tmp_path, monkeypatch, capsys):
    """The README's batch-file commands, as written: export, the stub's run_batch for each file (the
    command line itself, FILE replaced), import, and the export again until no file waits; MuSoBench's
    responses are then all there."""
    import subprocess
    import sys

    from assets.materialize_all import main as materialize_all
    from llm_calls.stub_server import StubServer
    from tests.conftest import stub_config
    from tests.test_plan import SMALL

    export, run, load, again = recipe_commands("batch-recipes")
    assert export == again and export[3:5] == ["--select", "muso"] and "--export-batch" in export
    assert run[:4] == [".venv/bin/python", "-m", "llm_calls.stub_server", "--run-batch"] and "--import-batch" in load
    with StubServer(responder=lambda body: "Solutions: [[1]]\nConfidence: 50") as stub:
        small = {**SMALL, "muso": {**SMALL["muso"], "timetabling": {"bins": [[1, 50]]}, "temperature": [0.0]}}
        cfg = stub_config(stub, tmp_path, **small)
        monkeypatch.setenv("BENCHSMITH_CONFIG", cfg.source)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
        monkeypatch.chdir(tmp_path)
        for _ in range(8):
            status = materialize_all(export[3:])
            printed = capsys.readouterr().out
            if "waiting on batch files" not in printed:
                break
            assert status == 1
            rounds = re.findall(r"^  (\S+/round-\S+)\.jsonl  \(", printed, re.M)
            assert len(rounds) == 1  # one model: one file per round
            for path in rounds:
                name = Path(path).name
                assert Path(path).parent == tmp_path / "data" / "batches"
                line = [sys.executable if a == ".venv/bin/python" else a.replace("ROUND", name) for a in run]
                subprocess.run(line, check=True, cwd=tmp_path, capture_output=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
            assert materialize_all(load[3:]) == 0
        else:
            raise AssertionError("files still waited after 8 rounds")
        assert status == 0
        wh = Warehouse(cfg.warehouse_path())
        assert wh.scalar("SELECT count(*) FROM muso.responses") > 0
        assert wh.scalar("SELECT count(*) FROM llm.calls WHERE purpose LIKE 'muso.%' AND endpoint_host LIKE 'batch file %'") \
            == wh.scalar("SELECT count(*) FROM llm.calls WHERE purpose LIKE 'muso.%'")


@pytest.mark.slow
def test_the_readme_plan_recipes_print_calls_time_tokens_and_cost(tmp_path, monkeypatch, capsys):
    """The README's plan commands, as written, after a small run of `smollm2`, with `qwen7b` priced as
    the README's price line shows: each prints the calls, the time and the tokens, and the one for
    `qwen7b` prices its calls."""
    import yaml

    from assets.materialize_all import main as materialize_all
    from llm_calls.stub_server import StubServer
    from tests.conftest import stub_config
    from tests.test_plan import SMALL

    price = yaml.safe_load(TEXT.split("    price: ", 1)[1].split("\n", 1)[0])
    commands = recipe_commands("plan-recipes")
    assert [c[3:] for c in commands] == [["--plan"], ["--plan", "--select", "waken", "--latency", "2.5"],
                                         ["--plan", "--model", "qwen7b"]]
    with StubServer(responder=lambda body: "Answer: 1") as stub:
        cfg = stub_config(stub, tmp_path, **{**SMALL, "ib": {**SMALL["ib"], "settings": ["vanilla"]}})
        data = yaml.safe_load(Path(cfg.source).read_text())
        data["models"] = {"smollm2": {"base_url": stub.base_url, "model": "stub-model"},
                          "qwen7b": {"base_url": stub.base_url, "model": "second-model", "price": price}}
        data["evaluate"], data["judge"] = ["smollm2"], "smollm2"
        Path(cfg.source).write_text(yaml.safe_dump(data, sort_keys=False))
        monkeypatch.setenv("BENCHSMITH_CONFIG", cfg.source)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
        assert materialize_all(["--select", "ib"]) == 0
        data["evaluate"].append("qwen7b")
        Path(cfg.source).write_text(yaml.safe_dump(data, sort_keys=False))
        capsys.readouterr()
        for command in commands:
            assert materialize_all(command[3:]) == 0
            text = capsys.readouterr().out
            assert "Capacity plan for" in text and "prompt tokens" in text and "Total cost of the new calls:" in text
        qwen = [ln for ln in text.splitlines() if ln.startswith("ib ") and "qwen7b" in ln and "ib.vanilla" in ln]
        assert any("counted" in ln and "USD" in ln for ln in qwen)


@pytest.mark.slow
def test_the_readme_release_recipes_write_releases_that_datasets_loads_and_a_configuration_reads_back(
        tmp_path, monkeypatch, capsys):
    """The README's release commands and its `load_dataset` line, as written (VERSION filled in), after
    a small run; then its `release.load` lines read the waken release back in another configuration."""
    import yaml
    from datasets import load_dataset

    import releases
    from assets.materialize_all import main as materialize_all
    from llm_calls.stub_server import StubServer
    from tests.conftest import stub_config
    from tests.test_plan import SMALL

    every, one = recipe_commands("release-recipes")
    assert every == [".venv/bin/python", "-m", "releases"] and one[3:5] == ["--select", "waken"]
    snippet = TEXT.split("from datasets import load_dataset\n", 1)[1].split("\n", 1)[0]
    folder, config, split = re.match(r'ds = load_dataset\("([^"]+)", "(\w+)", split="(\w+)"\)', snippet).groups()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "a").mkdir()
    with StubServer(responder=lambda body: "Answer: 1") as stub:
        cfg = stub_config(stub, tmp_path / "a", **{**SMALL, "ib": {**SMALL["ib"], "settings": ["vanilla"]}})
        monkeypatch.setenv("BENCHSMITH_CONFIG", cfg.source)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "a"))
        monkeypatch.chdir(tmp_path / "a")
        assert materialize_all(["--select", "waken", "--select", "ib"]) == 0
        import subprocess
        import sys

        # the command line itself (MuSoBench and S1-Bench have no items here: named, skipped, exit 1)
        run = subprocess.run([sys.executable, *every[1:]], cwd=tmp_path / "a", capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert run.returncode == 1, run.stderr[-2000:]
        assert "WakenLLM:" in run.stdout and "Instruction Boundary:" in run.stdout
        assert "MuSoBench: not released" in run.stderr
        assert releases.main(one[3:]) == 0
        path = folder.replace("VERSION", releases.version(cfg, "waken"))
        ds = load_dataset(path, config, split=split, cache_dir=str(tmp_path / "hf"))
        assert ds.num_rows == Warehouse(cfg.warehouse_path()).scalar("SELECT count(*) FROM waken.items")
        # read back: the README's `release.load` block, the waken release only
        block = TEXT.split("```yaml\nrelease:\n", 1)[1].split("```", 1)[0]
        load = yaml.safe_load("release:\n" + block)["release"]["load"]
        assert set(load) == {"waken", "muso"}
        (tmp_path / "b").mkdir()
        other = stub_config(stub, tmp_path / "b", **{**SMALL, "seed": 5},
                            release={"load": {"waken": str(tmp_path / "a" / load["waken"].replace(
                                "VERSION", releases.version(cfg, "waken")))}})
        monkeypatch.setenv("BENCHSMITH_CONFIG", other.source)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "b"))
        assert materialize_all(["--select", "waken"]) == 0
    same = "SELECT item_id, question, label FROM waken.items ORDER BY ALL"
    assert Warehouse(other.warehouse_path()).rows(same) == Warehouse(cfg.warehouse_path()).rows(same)


@pytest.mark.slow
def test_the_readme_batch_api_configuration_sends_each_turn_through_the_batch_endpoints(tmp_path, monkeypatch):
    """The README's `batch: {mode: api}` line on the stub (which serves Files and Batches), polled
    faster than the README's default so the test is quick: every MuSoBench call goes through a batch."""
    import yaml

    from assets.materialize_all import main as materialize_all
    from llm_calls.stub_server import StubServer
    from tests.conftest import stub_config
    from tests.test_plan import SMALL

    block = re.split(r"^#+ Batch mode", TEXT, maxsplit=1, flags=re.M)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    batch = yaml.safe_load(block)["models"]["gpt5mini"]["batch"]
    assert batch == {"mode": "api"}
    with StubServer(responder=lambda body: "Solutions: [[1]]\nConfidence: 50") as stub:
        small = {**SMALL, "muso": {**SMALL["muso"], "timetabling": {"bins": [[1, 50]]}, "temperature": [0.0]}}
        models = {"stub": {"base_url": stub.base_url, "model": "stub-model",
                           "batch": {**batch, "poll_s": 0.01, "poll_max_s": 0.05}}}
        cfg = stub_config(stub, tmp_path, models=models, **small)
        monkeypatch.setenv("BENCHSMITH_CONFIG", cfg.source)
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
        assert materialize_all(["--select", "muso"]) == 0
        wh = Warehouse(cfg.warehouse_path())
        assert wh.scalar("SELECT count(*) FROM muso.responses") > 0
        calls = wh.scalar("SELECT count(*) FROM llm.calls WHERE purpose LIKE 'muso.%'")
        via = wh.scalar("SELECT sum(n_requests) FROM llm.batches WHERE mode = 'api' AND status = 'read'")
        assert calls == via > 0 and len(stub.batches) == wh.scalar("SELECT count(*) FROM llm.batches")
        chat = [r for r in stub.requests if r["path"].endswith("/chat/completions")]
        assert [r["body"]["messages"][-1]["content"] for r in chat] == [cfg.probe_prompt]  # only the probe asked live
