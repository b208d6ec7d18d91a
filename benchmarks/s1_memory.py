"""Peak memory of the S1-Bench construction at two sizes, streamed and held, side by side.

A stub model (llm_calls.stub_server in its own process, so its memory is not
counted) answers every validation question. Each run builds the
programmatic candidates of all twelve programmatic subcategories in both
languages and validates each 3 x `--samples` times (at 0, 0.2 and 0.4), in a
fresh Python process whose peak resident memory is reported:

- streamed: validation in chunks of 200 candidates, rows appended to a staging
  table as they are made (what the `s1_items` asset does);
- held: one chunk for everything and every row kept in memory until the end
  (the construction before this change).

Flat memory means the streamed peak barely moves when the run grows 4x.

    python benchmarks/s1_memory.py [--sizes 5 20] [--samples 10]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
    import json, resource, sys
    from configuration import parse_config
    from generators.s1 import PROGRAMMATIC, load_registry
    from generators.s1_construction import Budgets, Construction
    from llm_calls import Ledger, ModelRegistry
    from validators.judge import Judge
    from warehouse import Warehouse

    base_url, db, per, streamed, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "streamed", int(sys.argv[5])
    cfg = parse_config({"warehouse": {"path": db}, "ledger": {"progress_interval_s": 3600},
                        "models": {"stub": {"base_url": base_url, "model": "stub", "concurrency": 64,
                                            "send_seed": False}}, "evaluate": ["stub"], "judge": "stub"}, "bench")
    wh = Warehouse(db)
    with ModelRegistry(cfg) as reg:
        ledger = Ledger(wh, reg, log=type("Q", (), {"info": lambda *a: None})())
        if streamed:
            wh.begin_staging("s1.validations")
        c = Construction(ledger, load_registry(), Judge(ledger, "stub"), 1, generators=[], discriminators=[],
                         validators=["stub"], reducer="stub", temperatures=[0.0, 0.2, 0.4], samples_per_temperature=k,
                         max_rounds=0, dedup_threshold=0.999, budgets=Budgets(),
                         chunk=200 if streamed else 10**9,
                         sink=(lambda t, rows: wh.append_staging(t, rows)) if streamed else None)
        c.run(sorted(PROGRAMMATIC), ["en", "zh"], per, True)
        if streamed:
            wh.replace_partitions({"s1.candidates": c.candidates, "s1.items": c.items}, staged=["s1.validations"])
        else:
            wh.replace_partitions({"s1.candidates": c.candidates, "s1.items": c.items, "s1.validations": c.validations})
    calls = wh.scalar("SELECT count(*) FROM s1.validations")
    print(json.dumps({"candidates": len(c.candidates), "validation_rows": calls,
                      "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[5, 20], help="candidates per subcategory and language")
    parser.add_argument("--samples", type=int, default=10, help="validation samples per temperature (paper: 10)")
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-m", "llm_calls.stub_server", "--delay", "0"],
                              stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        print(f"{'per':>4} {'candidates':>10} {'validations':>11} {'streamed MiB':>12} {'held MiB':>9} {'held/streamed':>13}")
        for per in args.sizes:
            peaks = {}
            for mode in ("streamed", "held"):
                with tempfile.TemporaryDirectory() as tmp:
                    out = subprocess.run([sys.executable, "-c", CHILD, base_url, f"{tmp}/s1.duckdb", str(per), mode,
                                          str(args.samples)],
                                         capture_output=True, text=True, check=True)
                    peaks[mode] = json.loads(out.stdout.strip().splitlines()[-1])
            s, h = peaks["streamed"], peaks["held"]
            print(f"{per:>4} {s['candidates']:>10} {s['validation_rows']:>11} {s['peak_mib']:>12.0f} "
                  f"{h['peak_mib']:>9.0f} {h['peak_mib'] / s['peak_mib']:>13.2f}")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
