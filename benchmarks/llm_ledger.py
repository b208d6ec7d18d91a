"""Ledger throughput against bare `openai` calls, measured side by side in one run.

A local OpenAI-compatible stub server (llm_calls.stub_server, in its own
process) answers every request after a fixed delay, like a model would. For
concurrency 1, 8 and 64 we time the same number of fresh requests made by a
bare `openai.AsyncOpenAI` client and by the ledger (which also hashes, checks
its cache, and commits every result to DuckDB), then rerun the largest ledger
batch fully cached. Printed: requests/s beside the bound concurrency / delay,
ledger / bare ratios (target >= 0.9) and cached-rerun speed-up (target >= 50x).

    python benchmarks/llm_ledger.py [--delay 0.5] [--waves 8]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import openai

from configuration import parse_config
from llm_calls import CallRequest, Ledger, ModelRegistry
from warehouse import Warehouse


async def bare(base_url: str, prompts: list[str], concurrency: int) -> float:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0, timeout=60)
    sem = asyncio.Semaphore(concurrency)

    async def one(p: str) -> None:
        async with sem:
            resp = await client.chat.completions.create(
                model="stub-model", messages=[{"role": "user", "content": p}], temperature=0.0, max_tokens=64
            )
            assert resp.choices[0].message.content

    t0 = time.perf_counter()
    await asyncio.gather(*(one(p) for p in prompts))
    elapsed = time.perf_counter() - t0
    await client.close()
    return elapsed


def ledger_run(base_url: str, db: Path, prompts: list[str], concurrency: int) -> float:
    cfg = parse_config({
        "warehouse": {"path": str(db)},
        "ledger": {"progress_interval_s": 3600},
        "models": {"stub": {"base_url": base_url, "model": "stub-model", "concurrency": concurrency,
                            "send_seed": False, "sampling": {"temperature": 0.0, "max_tokens": 64}}},
        "evaluate": ["stub"], "judge": "stub",
    }, "benchmark")
    with ModelRegistry(cfg) as reg:
        ledger = Ledger(Warehouse(db), reg, log=_Quiet())
        t0 = time.perf_counter()
        results = ledger.complete("stub", [CallRequest([{"role": "user", "content": p}]) for p in prompts])
        elapsed = time.perf_counter() - t0
    assert all(r.ok for r in results), [r.error for r in results if not r.ok][:3]
    return elapsed


class _Quiet:
    def info(self, msg: str, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.5, help="server delay per request (s)")
    parser.add_argument("--waves", type=int, default=8, help="requests per run = concurrency x waves")
    args = parser.parse_args()

    server = subprocess.Popen(
        [sys.executable, "-m", "llm_calls.stub_server", "--delay", str(args.delay)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        base_url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            print(f"stub server {base_url}, delay {args.delay} s, {args.waves} waves per run\n")
            print(f"{'conc':>5} {'requests':>8} {'bound/s':>8} {'bare/s':>8} {'ledger/s':>9} "
                  f"{'bare/bound':>10} {'ledger/bare':>11}")
            last = None
            for c in (1, 8, 64):
                n = c * args.waves
                bound = c / args.delay
                t_bare = asyncio.run(bare(base_url, [f"bare c{c} #{i}" for i in range(n)], c))
                db = Path(tmp) / f"ledger_c{c}.duckdb"
                prompts = [f"ledger c{c} #{i}" for i in range(n)]
                t_ledger = ledger_run(base_url, db, prompts, c)
                bare_rps, ledger_rps = n / t_bare, n / t_ledger
                print(f"{c:>5} {n:>8} {bound:>8.1f} {bare_rps:>8.1f} {ledger_rps:>9.1f} "
                      f"{bare_rps / bound:>10.2f} {ledger_rps / bare_rps:>11.2f}")
                last = (db, prompts, c, t_ledger)
            db, prompts, c, t_first = last
            reruns = sorted(ledger_run(base_url, db, prompts, c) for _ in range(3))
            t_cached = reruns[1]
            print(f"\ncached rerun of the concurrency-{c} batch ({len(prompts)} calls), median of 3 "
                  f"({', '.join(f'{t:.3f}' for t in reruns)} s): vs {t_first:.3f} s first run "
                  f"-> {t_first / t_cached:.0f}x faster")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
