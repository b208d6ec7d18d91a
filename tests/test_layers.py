"""The layers import one way (README, Layout): each folder imports only the folders its row names,
and only `assets/` imports Dagster. Every import counts, those inside functions too."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OURS = {"configuration", "warehouse", "llm_calls", "generators", "solvers", "validators", "evaluations", "assets"}
ALLOWED = {
    "configuration": set(),
    "warehouse": {"configuration"},  # the query command finds the configured file
    "solvers": set(),
    "llm_calls": {"configuration", "warehouse"},
    "validators": {"llm_calls"},
    "generators": {"solvers", "validators", "llm_calls", "configuration"},
    "evaluations": {"llm_calls", "validators", "generators", "configuration"},
    "assets": OURS,
}


def imports_of(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_each_layer_imports_only_what_its_row_allows_and_only_assets_import_dagster():
    wrong = []
    for folder, allowed in ALLOWED.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            got = imports_of(path)
            for name in sorted((got & OURS) - allowed - {folder}):
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
            if folder != "assets" and got & {"dagster", "dagster_postgres", "dagster_webserver"}:
                wrong.append(f"{path.relative_to(ROOT)} imports dagster")
    assert wrong == []


def test_the_rule_catches_an_import_upward(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from assets.jobs import FAMILIES\n    import dagster\n")
    assert imports_of(bad) == {"assets", "dagster"}
