"""The layers import one way (README, Layout): each folder imports only the folders its row names,
and only `assets/` and `runner/` import Dagster. Every import counts, those inside functions too."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = {"configuration", "warehouse", "llm_calls", "generators", "solvers", "validators", "evaluations", "reporting",
        "releases", "assets", "runner"}
# `python -m assets.materialize_all`, the README's name of the run command, hands over to `runner/`
ENTRY_POINT = "assets/materialize_all.py"
ALLOWED = {
    "configuration": set(),
    "warehouse": {"configuration"},  # the query command finds the configured file
    "solvers": set(),
    "llm_calls": {"configuration", "warehouse"},
    "validators": {"llm_calls"},
    "generators": {"solvers", "validators", "llm_calls", "configuration"},
    "evaluations": {"llm_calls", "validators", "generators", "configuration"},
    "reporting": {"configuration", "warehouse", "llm_calls", "generators", "evaluations", "validators"},
    "releases": {"configuration", "warehouse", "generators"},  # a built family's items, written and read back
    "assets": OURS - {"runner"},  # the definitions: the run command sits above them
    "runner": OURS,
}
DAGSTER = {"assets", "runner"}  # the folders that import Dagster


def imports_of(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.slow
def test_each_layer_imports_only_what_its_row_allows_and_only_assets_and_runner_import_dagster():
    wrong = []
    for folder, allowed in ALLOWED.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            got = imports_of(path)
            if path.relative_to(ROOT).as_posix() == ENTRY_POINT:
                allowed = allowed | {"runner"}
            for name in sorted((got & OURS) - allowed - {folder}):
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
            allowed = ALLOWED[folder]
            if folder not in DAGSTER and got & {"dagster", "dagster_postgres", "dagster_webserver"}:
                wrong.append(f"{path.relative_to(ROOT)} imports dagster")
    assert wrong == []


def test_the_rule_catches_an_import_upward(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from assets.jobs import FAMILIES\n    import dagster\n")
    assert imports_of(bad) == {"assets", "dagster"}


def test_ruff_finds_nothing_under_the_configuration_in_pyproject():
    """The linter the test command runs (pyproject.toml `[tool.ruff]`): unused names, import order,
    bugbear's traps, outdated idioms. Its findings are the failure message."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-fix", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def _family_of(module: str) -> str | None:
    """The family a module belongs to by its name (`evaluations.waken_metrics` -> waken), else None."""
    from configuration.families import KEYS

    last = module.split(".")[-1]
    return next((k for k in KEYS if last == k or last.startswith(f"{k}_")), None)


@pytest.mark.slow
def test_families_never_import_each_other():
    wrong = []
    for path in sorted(ROOT.glob("*/**/*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] not in OURS:
            continue
        own = _family_of(".".join(rel.with_suffix("").parts))
        if own is None:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [f"{node.module}.{a.name}" for a in node.names] + [node.module]
                if isinstance(node, ast.ImportFrom) and node.module else [])
            for name in names:
                other = _family_of(name)
                if other and other != own and name.split(".")[0] in OURS:
                    wrong.append(f"{rel} imports {name}")
    assert wrong == []


def test_a_family_module_is_known_by_its_name():
    assert _family_of("evaluations.waken_metrics") == "waken" and _family_of("warehouse.ib") == "ib"
    assert _family_of("generators.fld") is None and _family_of("reporting.panels") is None


def test_no_private_name_crosses_a_module_no_import_cycle_no_probe_no_global():
    """The house's structure (`benchmarks/house.py`): no `_name` imported from another module of ours,
    no cycle among our modules (imports inside functions count), no module looked up by a family's
    key or probed for a part, process state in objects rather than `global` statements, and no
    function over 60 lines (docstring included)."""
    from benchmarks.house import measure

    found = measure(ROOT)["_detail"]
    assert found == {"private": [], "cycles": [], "probes": [], "globals": [], "long": []}


def test_the_structure_measure_finds_each_kind_of_finding(tmp_path):
    """The measure itself: a private import, a cycle through an import inside a function, a probe
    by a family's key, a `global` and a function of 61 lines (not one of 60) are each found."""
    from benchmarks.house import measure

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("import importlib\nfrom pkg.b import _hidden\n_state = 0\n\n\ndef f(key):\n"
                              "    global _state\n    return importlib.import_module(f'pkg.{key}')\n")
    (pkg / "b.py").write_text("_hidden = 1\n\n\ndef g():\n    from pkg import a\n    return hasattr(module, 'X')\n")
    (pkg / "c.py").write_text("def short():\n" + "    x = 1\n" * 59 + "\n\ndef long():\n" + "    x = 1\n" * 60)
    found = measure(tmp_path)["_detail"]
    assert found["long"] == ["pkg/c.py:63 long (61 lines)"]
    assert [p.split(" ")[-1] for p in found["private"]] == ["pkg.b._hidden"]
    assert found["cycles"] == [["pkg.a", "pkg.b"]]
    assert sorted(p.split(" ")[-1] for p in found["probes"]) == ["hasattr", "import_module"]
    assert len(found["globals"]) == 1


def test_outside_the_call_engine_code_reaches_it_through_its_door():
    """Assets, evaluations, generators, validators and reports import the engine from `llm_calls`
    (its public names, `llm_calls/__init__.py`), never from the modules behind it."""
    wrong = []
    for folder in OURS - {"llm_calls"}:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("llm_calls."):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno} from {node.module}")
                elif isinstance(node, ast.Import):
                    wrong += [f"{path.relative_to(ROOT)}:{node.lineno} import {a.name}" for a in node.names
                              if a.name.startswith("llm_calls.")]
    assert wrong == []


def test_the_definitions_and_the_live_call_path_load_no_openai_client():
    """The `openai` client is for batch mode (its Batch and Files APIs): the definitions, the ledger and
    the flows, the models probe's list included, never import it (0.5-0.65 s and ~60 MiB a command);
    nor `aiohttp`, which only calls through a proxy use (0.17 s)."""
    import subprocess
    import sys

    code = ("import sys, assets.definitions, llm_calls.ledger, llm_calls.flows, llm_calls.http_client, assets.models; "
            "print('openai' in sys.modules, 'llm_calls.batch' in sys.modules, 'aiohttp' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True", "False"]  # batch's module is loaded, its client is not


def test_the_definitions_load_none_of_the_heavy_libraries():
    """Every command, the UI and each run load the definitions (`benchmarks/startup.py`): the solvers,
    the embeddings, the figures, the releases' libraries and the proof graphs are imported where they are
    used, not there (networkx alone was 0.18 s of every command)."""
    import subprocess
    import sys

    heavy = ["networkx", "ortools", "sentence_transformers", "torch", "matplotlib", "datasets", "mlcroissant",
             "pandas", "sqlalchemy"]
    code = f"import sys, assets.definitions; print([m for m in {heavy!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
