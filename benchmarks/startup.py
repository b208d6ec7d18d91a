"""Start-up cost: how long loading the Dagster definitions takes, against the floor of
importing Dagster itself, measured side by side in one run (fresh interpreters, median of N).

Every run, every `dagster` command and the UI pay the definitions' load; heavy imports (the
solvers, sentence embeddings, plotting) stay inside the functions that need them, so loading
the definitions costs little more than importing Dagster. Target: definitions under 3 s.

    python benchmarks/startup.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "python": "pass",
    "import dagster": "import dagster",
    "definitions": "from assets.definitions import defs; defs.get_repository_def()",
}


def seconds(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeats):  # alternated, so drift on a shared machine hits every case alike
        for name, code in CASES.items():
            times[name].append(seconds(code))
    floor = statistics.median(times["import dagster"])
    print(f"{'case':<16} {'median s':>9} {'/ import dagster':>17}   (median of {args.repeats} fresh interpreters)")
    for name, ts in times.items():
        print(f"{name:<16} {statistics.median(ts):>9.2f} {statistics.median(ts) / floor:>17.2f}")
    verdict = "met" if statistics.median(times["definitions"]) < 3.0 else "NOT met"
    print(f"\ntarget: definitions under 3 s: {verdict}")


if __name__ == "__main__":
    main()
