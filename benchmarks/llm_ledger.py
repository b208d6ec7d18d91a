"""Ledger throughput against bare `openai` calls, measured side by side in one run.

A local OpenAI-compatible stub server (llm_calls.stub_server, in its own
process) answers every request after a fixed delay, like a model would. For
each delay (0.5 s and 0.05 s by default) and concurrency 1, 8 and 64 we time
the same number of fresh requests made by a bare `openai.AsyncOpenAI` client
and by the ledger, alternately, three times each (the medians are compared), after one untimed
warm-up round per side, (which also hashes, checks its cache and commits every
result to DuckDB), then rerun one ledger batch fully cached. Printed per row:
requests/s of both sides, each side's share of the bound (concurrency /
delay) and ledger / bare (targets: >= 0.95 at 0.5 s, >= 0.9 at 0.05 s); the CPU time
per call of both sides (this process's, the ledger's writer thread included) and the ledger's
extra (target: <= 0.5 ms: request build, key hash, cache lookup, commit); and
the cached rerun's speed-up (target >= 200x). The extra is the median of the alternated pairs'
differences (each pair ran back to back, so a machine's drift between pairs cancels), printed with
their range. Timings cover `Ledger.complete`
only; the warehouse file exists beforehand, as it does in any run after the
first.

The ledger sends through the client's plain POST and reads the reply's JSON itself (`Ledger.send`);
with `--plain` the bare side does the same, so the extra is the project's own cost beyond the very
same HTTP path, where by default it is beyond the typed `create`.

With `--sessions N`, the ledger's side is N steps at once, as `materialize_all` runs an
Instruction Boundary paper run's slices: N threads, each with its own registry and ledger, each
calling `Ledger.complete` on its share of the requests, all sharing the model's concurrency (the
endpoint's slots); the bare side is still one client.

    python benchmarks/llm_ledger.py [--delays 0.5 0.05] [--waves 8] [--sessions 1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2
import openai

from configuration import parse_config
from llm_calls import CallRequest, Ledger, ModelRegistry
from warehouse import Warehouse


async def bare(base_url: str, prompts: list[str], concurrency: int, plain: bool = False) -> tuple[float, float]:
    """(seconds, CPU seconds of this process) for `prompts` through a bare client: its typed
    `chat.completions.create`, or with `plain` its plain POST and `json.loads`, the ledger's path."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0, timeout=60)
    sem = asyncio.Semaphore(concurrency)

    async def one(p: str) -> None:
        messages = [{"role": "user", "content": p}]
        async with sem:
            if plain:
                resp = await client.post("/chat/completions", cast_to=httpx2.Response, body={
                    "model": "stub-model", "messages": messages, "temperature": 0.0, "max_tokens": 64})
                assert json.loads(resp.content)["choices"][0]["message"]["content"]
                return
            resp = await client.chat.completions.create(
                model="stub-model", messages=messages, temperature=0.0, max_tokens=64
            )
            assert resp.choices[0].message.content

    t0, cpu0 = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one(p) for p in prompts))
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await client.close()
    return elapsed, cpu


def ledger_run(base_url: str, db: Path, prompts: list[str], concurrency: int, sessions: int = 1
               ) -> tuple[float, float]:
    """(seconds, CPU seconds of this process, its writer thread included) `Ledger.complete` takes
    for `prompts` (registries set up before the clock starts); with `sessions` > 1, that many
    threads at once, each with its own registry and ledger and every `sessions`-th prompt."""
    cfg = parse_config({
        "warehouse": {"path": str(db)},
        "ledger": {"progress_interval_s": 3600},
        "models": {"stub": {"base_url": base_url, "model": "stub-model", "concurrency": concurrency,
                            "send_seed": False, "sampling": {"temperature": 0.0, "max_tokens": 64}}},
        "evaluate": ["stub"], "judge": "stub",
    }, "benchmark")
    shares = [prompts[k::sessions] for k in range(sessions)]
    results: list[list] = [[] for _ in shares]
    with contextlib.ExitStack() as stack:
        ledgers = [Ledger(Warehouse(db), stack.enter_context(ModelRegistry(cfg)), log=_Quiet()) for _ in shares]

        def one(k: int) -> None:
            results[k] = ledgers[k].complete("stub", [CallRequest([{"role": "user", "content": p}]) for p in shares[k]])

        t0, cpu0 = time.perf_counter(), time.process_time()
        if sessions == 1:
            one(0)
        else:
            threads = [threading.Thread(target=one, args=(k,)) for k in range(sessions)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    flat = [r for rs in results for r in rs]
    assert len(flat) == len(prompts) and all(r.ok for r in flat), [r.error for r in flat if not r.ok][:3]
    return elapsed, cpu


class _Quiet:
    def info(self, msg: str, *args: object) -> None:
        pass


def bench_delay(delay: float, waves: int, repeats: int, tmp: Path, levels: tuple[int, ...] = (1, 8, 64),
                sessions: int = 1, plain: bool = False) -> tuple[list[float], tuple[Path, list[str], int, float, list[float]] | None]:
    server = subprocess.Popen([sys.executable, "-m", "llm_calls.stub_server", "--delay", str(delay)],
                              stdout=subprocess.PIPE, text=True)
    try:
        base_url = server.stdout.readline().strip()
        db = tmp / f"ledger_{delay}.duckdb"
        Warehouse(db).rows("SELECT 1")  # the file and its schema exist, as after any first run
        # one untimed round each: the client's, DuckDB's and Arrow's first-use costs are paid once
        # per process, not per batch (fast start is measured apart)
        asyncio.run(bare(base_url, [f"warm bare {delay} #{i}" for i in range(16)], 8))
        ledger_run(base_url, db, [f"warm ledger {delay} #{i}" for i in range(16)], 8, sessions)
        ratios, last = [], None
        for c in levels:
            n = c * waves
            bound = c / delay
            t_bare, t_ledger, cpu_bare, cpu_ledger = [], [], [], []
            for rep in range(repeats):  # alternated, so drift on a shared machine hits both sides alike
                t, cpu = asyncio.run(bare(base_url, [f"bare {delay} c{c} r{rep} #{i}" for i in range(n)], c, plain))
                t_bare.append(t)
                cpu_bare.append(cpu)
                prompts = [f"ledger {delay} c{c} r{rep} #{i}" for i in range(n)]
                t, cpu = ledger_run(base_url, db, prompts, c, sessions)
                t_ledger.append(t)
                cpu_ledger.append(cpu)
            bare_rps, ledger_rps = n / statistics.median(t_bare), n / statistics.median(t_ledger)
            ms_bare, ms_ledger = (1000 * statistics.median(x) / n for x in (cpu_bare, cpu_ledger))
            # each pair ran back to back, so its difference leaves out the drift between pairs
            extra = sorted(1000 * (b - a) / n for a, b in zip(cpu_bare, cpu_ledger))
            ratios.append(ledger_rps / bare_rps)
            print(f"{delay:>6} {c:>5} {n:>8} {bound:>8.1f} {bare_rps:>8.1f} {ledger_rps:>9.1f} "
                  f"{bare_rps / bound:>10.2f} {ledger_rps / bound:>12.2f} {ledger_rps / bare_rps:>11.2f} "
                  f"{ms_bare:>9.2f} {ms_ledger:>10.2f} {statistics.median(extra):>9.2f} "
                  f"{extra[0]:>6.2f}..{extra[-1]:.2f}", flush=True)
            last = (db, prompts, c, t_ledger[-1])
        if delay == max(DELAYS_SEEN):
            db, prompts, c, t_first = last
            reruns = sorted(ledger_run(base_url, db, prompts, c)[0] for _ in range(3))
            return ratios, (db, prompts, c, t_first, reruns)
        return ratios, None
    finally:
        server.terminate()
        server.wait()


DELAYS_SEEN: list[float] = []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delays", type=float, nargs="+", default=[0.5, 0.05], help="server delays (s)")
    parser.add_argument("--waves", type=int, default=8, help="requests per run = concurrency x waves")
    parser.add_argument("--repeats", type=int, default=3, help="alternated runs per side; the median is printed")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 64], help="concurrency levels")
    parser.add_argument("--sessions", type=int, default=1,
                        help="the ledger's side as this many steps at once, each in its own thread")
    parser.add_argument("--plain", action="store_true",
                        help="the bare side through the client's plain POST (the ledger's own path), not `create`")
    args = parser.parse_args()
    DELAYS_SEEN.extend(args.delays)

    print(f"stub server in its own process; {args.waves} waves of requests per run; median of {args.repeats} "
          f"alternated runs per side; the ledger's side as {args.sessions} step(s) at once; the bare side through "
          f"{'the plain POST' if args.plain else '`chat.completions.create`'}\n")
    print(f"{'delay':>6} {'conc':>5} {'requests':>8} {'bound/s':>8} {'bare/s':>8} {'ledger/s':>9} "
          f"{'bare/bound':>10} {'ledger/bound':>12} {'ledger/bare':>11} {'bare ms':>9} {'ledger ms':>10} "
          f"{'extra ms':>9} {'pairs':>12}  (CPU per call; extra: the median of the pairs' differences, then their range)")
    cached = None
    with tempfile.TemporaryDirectory() as tmp:
        for delay in args.delays:
            _, rerun = bench_delay(delay, args.waves, args.repeats, Path(tmp), tuple(args.concurrency),
                                   args.sessions, args.plain)
            cached = rerun or cached
    if cached:
        _, prompts, c, t_first, reruns = cached
        t_cached = reruns[1]
        print(f"\ncached rerun of the concurrency-{c} batch ({len(prompts)} calls) at the longest delay, median of 3 "
              f"({', '.join(f'{t:.4f}' for t in reruns)} s) vs {t_first:.3f} s first run "
              f"-> {t_first / t_cached:.0f}x faster")


if __name__ == "__main__":
    main()
