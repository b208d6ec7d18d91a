"""Several run processes writing one warehouse at once: the DuckDB file against a DuckLake with a
PostgreSQL catalog, measured side by side in one run.

Each worker is a process, as a machine of its own would be, evaluating its own model on its own
endpoint: a stub server process (llm_calls.stub_server) answering every request after `--delay`
seconds. A worker asks `--calls` fresh requests through the ledger at `--concurrency`, so the
endpoint bound of a round is calls x delay / concurrency, the same for 1, 2 or 4 workers (each has
its endpoint). Printed per backend and number of workers: calls, the bound, the round's wall time
(from the first worker's start to the last one's end, process start-up included), bound / wall,
calls per second, and the checks: every call a row, one row per key, no failure. A private
PostgreSQL is started in a temporary folder and stopped at the end (tests/postgres.py).

    python benchmarks/lake_writers.py [--workers 1 2 4] [--calls 400] [--delay 0.5] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.postgres import PostgresServer  # noqa: E402
from warehouse import open_warehouse  # noqa: E402

WORKER = textwrap.dedent("""
    import sys
    from configuration import load_config
    from llm_calls import CallRequest, Ledger, ModelRegistry
    from warehouse import open_warehouse
    cfg = load_config(sys.argv[1])
    model, n = sys.argv[2], int(sys.argv[3])
    with ModelRegistry(cfg) as reg:
        out = Ledger(open_warehouse(cfg), reg).complete(
            model, [CallRequest([{"role": "user", "content": f"{model} question {i}"}]) for i in range(n)])
    sys.exit(0 if all(r.ok for r in out) else 1)
""")


def stub(delay: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "llm_calls.stub_server", "--delay", str(delay)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def config(folder: Path, backend: str, urls: list[str], concurrency: int) -> Path:
    models = {f"w{k}": {"base_url": u, "model": "stub-model", "concurrency": concurrency,
                        "sampling": {"temperature": 0.0, "max_tokens": 32}} for k, u in enumerate(urls)}
    warehouse = {"path": str(folder / "wh.duckdb")}
    if backend == "lake":
        warehouse["lake"] = {"catalog": "postgres", "data_path": str(folder / "lake")}
    data = {"warehouse": warehouse, "models": models, "evaluate": list(models), "judge": "w0",
            "ledger": {"timeout_s": 30, "progress_interval_s": 600, "slots_dir": str(folder / "slots")}}
    path = folder / "benchsmith.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def round_of(backend: str, workers: int, args: argparse.Namespace, urls: list[str], tmp: Path) -> dict:
    folder = Path(tempfile.mkdtemp(dir=tmp, prefix=f"{backend}-{workers}-"))
    path = config(folder, backend, urls[:workers], args.concurrency)
    if backend == "lake":
        open_warehouse_schema(path)  # the catalog and the schema exist beforehand, as after any first run
    else:
        subprocess.run([sys.executable, "-c", f"from warehouse import Warehouse; Warehouse({str(folder / 'wh.duckdb')!r})"
                        ".rows('SELECT 1')"], cwd=ROOT, check=True)
    t0 = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(path), f"w{k}", str(args.calls)], cwd=ROOT)
             for k in range(workers)]
    codes = [p.wait() for p in procs]
    wall = time.monotonic() - t0
    from configuration import load_config

    wh = open_warehouse(load_config(path))
    got = wh.rows("SELECT count(*) AS n, count(DISTINCT key) AS keys, count(*) FILTER (status <> 'ok') AS failed "
                  "FROM llm.calls")[0]
    calls = workers * args.calls
    bound = args.calls * args.delay / args.concurrency
    return {"backend": backend, "workers": workers, "calls": calls, "bound": bound, "wall": wall,
            "ok": codes == [0] * workers and got == {"n": calls, "keys": calls, "failed": 0}}


def open_warehouse_schema(path: Path) -> None:
    from configuration import load_config

    with open_warehouse(load_config(path)).connect():
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    stubs = [stub(args.delay) for _ in range(max(args.workers))]
    rows = []
    try:
        with PostgresServer() as pg, tempfile.TemporaryDirectory() as tmp:
            for workers in args.workers:
                for backend in ("file", "lake"):
                    os.environ["BENCHSMITH_LAKE_CATALOG"] = pg.database(f"lake_{workers}")
                    rows.append(round_of(backend, workers, args, [u for _, u in stubs], Path(tmp)))
    finally:
        for proc, _ in stubs:
            proc.terminate()
    print(f"\n{args.calls} calls per worker, {args.delay} s per call, concurrency {args.concurrency} per endpoint; "
          f"{os.cpu_count()} CPUs\n")
    print(f"{'backend':<8}{'workers':>8}{'calls':>7}{'bound s':>9}{'wall s':>8}{'bound/wall':>11}{'calls/s':>9}  checks")
    for r in rows:
        print(f"{r['backend']:<8}{r['workers']:>8}{r['calls']:>7}{r['bound']:>9.1f}{r['wall']:>8.1f}"
              f"{r['bound'] / r['wall']:>11.2f}{r['calls'] / r['wall']:>9.0f}  "
              f"{'every call one row, none failed' if r['ok'] else 'FAILED'}")
    by = {(r["backend"], r["workers"]): r for r in rows}
    for w in args.workers:
        f, lk = by[("file", w)], by[("lake", w)]
        print(f"{w} worker(s): lake / file throughput {f['wall'] / lk['wall']:.2f}")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
