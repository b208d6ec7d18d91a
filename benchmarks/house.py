"""The structure of a checkout, measured: what a newcomer's first hour runs into.

    python -m benchmarks.house [CHECKOUT ...]

prints, per checkout (default: this one), side by side:

- the largest source file and function (lines, `tests/` and `benchmarks/` left out);
- files over 500 lines and functions over 60 (named, with `--detail`);
- private names (`_x`) imported from another module of ours (`from a.b import _x`, or `a.b._x`);
- module import cycles, counting imports inside functions too (the strongly connected components
  of the module graph with more than one module, by networkx);
- places that look a family's module up by name (`import_module` / `find_spec` with a name formatted
  from a family's key) or probe a module for a part (`hasattr` / `getattr` with a default on a module);
- `global` statements;
- README lines.

Plain `ast`, no import of the checkout's code, so two checkouts (before and after a change) are
measured by one process.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import networkx as nx

SKIP = {"tests", "benchmarks", ".venv", "build", "data", ".git"}


def sources(root: Path) -> dict[str, Path]:
    """module name -> file, for every package of ours (a top-level folder with an __init__.py)."""
    out = {}
    for init in sorted(root.glob("*/__init__.py")):
        if init.parent.name in SKIP:
            continue
        for path in sorted(init.parent.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _resolve(module: str, name: str | None, modules: dict[str, Path]) -> str | None:
    """The module of ours an import names: `a.b` itself, or `a.b.name` when that is a module."""
    if name and f"{module}.{name}" in modules:
        return f"{module}.{name}"
    return module if module in modules else None


def measure(root: Path) -> dict:
    modules = sources(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    largest_file = max((len(p.read_text().splitlines()), str(p.relative_to(root))) for p in modules.values())
    functions, private, probes, globals_ = [], [], [], []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions.append((node.end_lineno - node.lineno + 1, f"{path.relative_to(root)}:{node.lineno} {node.name}"))
            elif isinstance(node, ast.Global):
                globals_.append(f"{path.relative_to(root)}:{node.lineno}")
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                for alias in node.names:
                    target = _resolve(base, alias.name, modules)
                    if target and target != name:
                        graph.add_edge(name, target)
                        if alias.name.startswith("_") and not alias.name.startswith("__") and target == base:
                            private.append(f"{path.relative_to(root)}:{node.lineno} {base}.{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    target = _resolve(alias.name, None, modules)
                    if target and target != name:
                        graph.add_edge(name, target)
            elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                chain = []
                inner = node.value
                while isinstance(inner, ast.Attribute):
                    chain.append(inner.attr)
                    inner = inner.value
                if isinstance(inner, ast.Name):
                    dotted = ".".join([inner.id, *reversed(chain)])
                    if dotted in modules and dotted != name:
                        private.append(f"{path.relative_to(root)}:{node.lineno} {dotted}.{node.attr}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
                fn = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                first = node.args[0] if node.args else None
                formatted = ast.unparse(first) if isinstance(first, ast.JoinedStr) else ""
                if fn in {"import_module", "find_spec"} and ("key" in formatted or "family" in formatted):
                    probes.append(f"{path.relative_to(root)}:{node.lineno} {fn}")
                elif fn == "hasattr" and isinstance(first, ast.Name) and first.id in {"module", "m", "protocol", "family"}:
                    probes.append(f"{path.relative_to(root)}:{node.lineno} hasattr")
                elif fn == "getattr" and len(node.args) == 3 and isinstance(first, ast.Name) and \
                        first.id in {"module", "m", "protocol", "_module"}:
                    probes.append(f"{path.relative_to(root)}:{node.lineno} getattr")
    # a package imports its own modules to re-export them: `a/__init__` -> `a.x` is no cycle by itself
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    readme = root / "README.md"
    return {
        "largest file": f"{largest_file[0]} lines, {largest_file[1]}",
        "largest function": "{} lines, {}".format(*max(functions)),
        "files over 500 lines": sum(len(p.read_text().splitlines()) > 500 for p in modules.values()),
        "functions over 60 lines": sum(n > 60 for n, _ in functions),
        "private names imported across modules": len(private),
        "import cycles (modules in them)": f"{len(cycles)} ({sum(map(len, cycles))})",
        "places probing for a family's module": len(probes),
        "global statements": len(globals_),
        "source lines": sum(len(p.read_text().splitlines()) for p in modules.values()),
        "README lines": len(readme.read_text().splitlines()) if readme.exists() else 0,
        "_detail": {"private": private, "cycles": cycles, "probes": probes, "globals": globals_,
                    "long": [f"{where} ({n} lines)" for n, where in sorted(functions, reverse=True) if n > 60]},
    }


def main(argv: list[str]) -> int:
    roots = [Path(a).resolve() for a in argv] or [Path(__file__).resolve().parent.parent]
    results = [measure(r) for r in roots]
    width = max(len(k) for k in results[0] if not k.startswith("_"))
    print(" " * width + "  " + "  |  ".join(str(r) for r in roots))
    for key in results[0]:
        if not key.startswith("_"):
            print(f"{key:<{width}}  " + "  |  ".join(str(r[key]) for r in results))
    if "--detail" in sys.argv:
        for root, r in zip(roots, results):
            print(f"\n{root}:")
            for kind, rows in r["_detail"].items():
                for row in rows:
                    print(f"  {kind}: {row}")
    return 0


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if not a.startswith("--")]))
