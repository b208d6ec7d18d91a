"""Peak memory of `--import-batch` against the size of the output file it reads (issue D14).

A batch output file of a paper-scale run can be gigabytes; the import used to hold the whole text,
every parsed line and every row at once (about 9x the file). It now streams: the file is read twice,
a line at a time, and rows are written `IMPORT_CHUNK` at a time, so memory holds the keys and one
chunk. This benchmark exports N requests to a batch file (files mode, no model called), writes an
output file answering each with a reply of R characters, and imports it in a fresh process, for
two file sizes side by side: each import's peak resident memory (ru_maxrss) beside the same
process's peak before the import (interpreter, DuckDB, the project), and, in a second run of the
same import, the peak of the Python heap it allocated (tracemalloc) as a share of the file's size.

    python benchmarks/batch_import.py                    # 8,000 and 32,000 replies of 2,000 characters
    python benchmarks/batch_import.py --requests 4000 16000 --reply-chars 4000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = textwrap.dedent("""
    import json, resource, sys, time
    from pathlib import Path
    from configuration import load_config
    from llm_calls import ModelRegistry
    from llm_calls.batch import import_file
    from warehouse import Warehouse
    cfg = load_config(sys.argv[1])
    wh = Warehouse(cfg.warehouse_path())
    with ModelRegistry(cfg) as reg:
        wh.scalar("SELECT count(*) FROM llm.batch_requests")  # the warehouse opened, as the import opens it
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if sys.argv[3] == "trace":
            import tracemalloc
            tracemalloc.start()
        t0 = time.perf_counter()
        report = import_file(wh, reg, Path(sys.argv[2]))
        took = time.perf_counter() - t0
        heap = tracemalloc.get_traced_memory()[1] if sys.argv[3] == "trace" else None
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"before_kib": before, "after_kib": after, "answered": report.answered, "s": took,
                      "heap_peak": heap}))
""")


def setup(home: Path, n: int, reply_chars: int) -> tuple[str, Path]:
    """A configuration, N requests exported to a batch file, and an output file answering each."""
    sys.path.insert(0, str(ROOT))
    from llm_calls import CallRequest, Ledger, ModelRegistry
    from llm_calls.batch import BatchPending
    from tests.conftest import write_config
    from warehouse import Warehouse

    path = write_config(home, {
        "warehouse": {"path": str(home / "wh.duckdb")},
        "models": {"m": {"base_url": "http://127.0.0.1:9/v1", "model": "served-m", "concurrency": 4,
                         "batch": {"mode": "files", "dir": str(home / "batches")}}},
        "evaluate": ["m"], "judge": "m"})
    from configuration import load_config

    cfg = load_config(path)
    with ModelRegistry(cfg) as reg:
        ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)
        try:
            ledger.complete("m", [CallRequest([{"role": "user", "content": f"Question {i}"}]) for i in range(n)],
                            purpose="bench.ask")
        except BatchPending as pending:
            exported = pending.path
    filler = ("An answer that runs on\u2028with a raw line break. " * (reply_chars // 45 + 1))[:reply_chars]
    out = home / "out.jsonl"
    with open(exported, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for k, line in enumerate(src):
            key = json.loads(line)["custom_id"]
            body = {"id": f"r{k}", "object": "chat.completion", "created": 0, "model": "served-m",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": filler},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": reply_chars // 4, "total_tokens": 0}}
            dst.write(json.dumps({"id": f"b{k}", "custom_id": key, "error": None,
                                  "response": {"status_code": 200, "body": body}}, ensure_ascii=False) + "\n")
    return path, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, nargs="+", default=[8_000, 32_000])
    p.add_argument("--reply-chars", type=int, default=2_000)
    args = p.parse_args(argv)
    print(f"{'requests':>9} {'file MiB':>9} {'RSS peak before':>16} {'RSS peak after':>15} {'Python heap peak':>17} "
          f"{'heap / file':>12} {'import s':>9}")
    growth = []
    for n in args.requests:
        with tempfile.TemporaryDirectory() as tmp:
            config, out = setup(Path(tmp), n, args.reply_chars)
            size = out.stat().st_size / 2**20
            runs = {}
            for mode in ("rss", "trace"):  # the resident peak untraced, then the Python heap's peak traced
                wh = Path(tmp) / "wh.duckdb"
                copy = Path(tmp) / f"wh-{mode}.duckdb"
                copy.write_bytes(wh.read_bytes())
                cfg_text = Path(config).read_text().replace(str(wh), str(copy))
                cfg = Path(tmp) / f"{mode}.yaml"
                cfg.write_text(cfg_text)
                got = subprocess.run([sys.executable, "-c", _CHILD, str(cfg), str(out), mode], cwd=ROOT,
                                     capture_output=True, text=True,
                                     env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": tmp})
                if got.returncode != 0:
                    print(got.stderr, file=sys.stderr)
                    return 1
                runs[mode] = json.loads(got.stdout.strip().splitlines()[-1])
            r = {**runs["rss"], "heap_peak": runs["trace"]["heap_peak"]}
            assert r["answered"] == n, r
            before, after = r["before_kib"] / 1024, r["after_kib"] / 1024
            heap = r["heap_peak"] / 2**20
            print(f"{n:>9} {size:>9.1f} {before:>16.0f} {after:>15.0f} {heap:>17.1f} {heap / size:>12.2f} {r['s']:>9.1f}")
            growth.append((size, heap))
    if len(growth) >= 2:
        (s0, g0), (s1, g1) = growth[0], growth[-1]
        print(f"file {s1 / s0:.1f}x larger, the import's Python heap peak {g1 / g0:.2f}x "
              "(the resident peak also holds DuckDB's buffer pool, which grows with the warehouse written, "
              "not with the file)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
