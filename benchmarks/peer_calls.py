"""The same multiple-choice calls through Benchsmith, a raw asyncio client and Inspect AI, side by side.

    python -m benchmarks.peer_calls [--n 2000] [--inspect] [--busy 2]

One loopback server (`serve` below: asyncio, one process of its own) answers every chat completion
after a fixed delay with a multiple-choice answer, as a model served by vLLM on a GPU node would.
For each setting (0.5 s at concurrency 64, and 5 ms at concurrency 256 by default) each side asks the
same `--n` distinct questions, in a process of its own (started fresh, so its CPU time and peak memory
are its own), and then again in a second fresh process (the cached rerun):

- `raw`: asyncio streams, one keep-alive connection per concurrent request, the request bytes written
  and the reply's JSON read with `json.loads` (`benchmarks/raw_client.py`): the least a client can do,
  and the server's ceiling;
- `benchsmith`: `Ledger.complete` on a fresh warehouse (every call keyed, looked up, sent through the
  ledger's HTTP path and stored in `llm.calls`), the rerun answered from the ledger;
- `inspect` (with `--inspect`): an Inspect AI task (`generate(cache=True)`, the `openai-api` provider
  pointed at the server), the rerun from Inspect's cache. Inspect is installed by this command into
  a virtual environment of its own (`~/.cache/benchsmith/peer-venv`, Inspect AI 0.3.285), never into
  the project's.

Printed per setting and side: the wall time of the calls (for Benchsmith from `Ledger.complete`'s call
to its return: the lookups, the calls and their commits; the fresh warehouse's file and schema are
made before, as a user's warehouse exists before a run), the calls per second that makes, bound /
wall (bound = n x delay / concurrency, the least any client can take), the whole process's CPU time
per call (imports and the schema included), its peak resident memory, and the rerun's wall (the whole
process: start, imports, the lookups). `--busy N` runs N CPU-bound processes beside it all (a loaded machine), to be read beside a
quiet run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEER_VENV = Path(os.environ.get("BENCHSMITH_PEER_VENV", Path.home() / ".cache" / "benchsmith" / "peer-venv"))
INSPECT = "inspect-ai==0.3.285"
MODEL = "peer-model"


def question(k: int) -> str:
    return (f"Question {k}: which of the options is the largest number?\n"
            f"A. {k}\nB. {k + 3}\nC. {k + 1}\nD. {k + 2}\nAnswer with the letter of the option.")


# -- the server ------------------------------------------------------------------------------------

_REPLY = json.dumps({
    "id": "peer", "object": "chat.completion", "created": 0, "model": MODEL,
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Answer: B"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 48, "completion_tokens": 3, "total_tokens": 51}}).encode()
_RESPONSE = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
             + str(len(_REPLY)).encode() + b"\r\n\r\n" + _REPLY)
_MODELS = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]}).encode()
_MODELS_RESPONSE = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                    + str(len(_MODELS)).encode() + b"\r\n\r\n" + _MODELS)


class _Http(asyncio.Protocol):
    """HTTP/1.1 keep-alive: each request answered after the delay, in the order it came."""

    delay = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport, self.buffer = transport, b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        loop = asyncio.get_running_loop()
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15:head.find(b"\r\n", at) if head.find(b"\r\n", at) > 0 else None]) if at >= 0 else 0
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length:]
            reply = _MODELS_RESPONSE if head.startswith(b"get") else _RESPONSE
            loop.call_later(self.delay, self._send, reply)

    def _send(self, reply: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(reply)


def serve(port: int, delay: float) -> None:
    _Http.delay = delay

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_Http, "127.0.0.1", port, backlog=1024)
        print(f"ready {server.sockets[0].getsockname()[1]}", flush=True)  # port 0: a free one
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# -- the sides (each in a process of its own) ------------------------------------------------------

def _raw(port: int, n: int, concurrency: int) -> float:
    from benchmarks.raw_client import replay

    t0 = time.perf_counter()
    bodies = [json.dumps({"model": MODEL, "messages": [{"role": "user", "content": question(k)}],
                          "temperature": 0.0, "max_tokens": 16}).encode() for k in range(n)]
    answers = asyncio.run(replay(f"http://127.0.0.1:{port}/v1/chat/completions", bodies, concurrency))
    assert len(answers) == n and all(answers)
    return time.perf_counter() - t0


def _benchsmith(port: int, n: int, concurrency: int, folder: str, checkout: Path = ROOT) -> float:
    sys.path.insert(0, str(checkout))
    from configuration import parse_config
    from llm_calls import CallRequest, Ledger, ModelRegistry
    from warehouse import Warehouse

    cfg = parse_config({"warehouse": {"path": str(Path(folder) / "wh.duckdb")},
                        "models": {"peer": {"base_url": f"http://127.0.0.1:{port}/v1", "model": MODEL,
                                            "concurrency": concurrency, "sampling": {"temperature": 0.0, "max_tokens": 16}}},
                        "evaluate": ["peer"], "judge": "peer",
                        "ledger": {"endpoint_slots": "run", "progress_interval_s": 3600}}, str(Path(folder) / "peer.yaml"))
    requests = [CallRequest([{"role": "user", "content": question(k)}]) for k in range(n)]
    with ModelRegistry(cfg) as registry:
        warehouse = Warehouse(cfg.warehouse_path())
        with warehouse.connect():  # set-up, outside the calls' time: the warehouse file and its schema
            pass
        ledger = Ledger(warehouse, registry)
        t0 = time.perf_counter()
        results = ledger.complete("peer", requests, purpose="peer.mcq")
        wall = time.perf_counter() - t0
    assert sum(r.ok for r in results) == n, [r.error for r in results if not r.ok][:3]
    return wall


_INSPECT_TASK = '''
import sys, time
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

n, concurrency, log_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
questions = {questions!r}
task = Task(dataset=[Sample(input=q, target="B") for q in questions[:n]], solver=[generate(cache=True)],
            scorer=includes())
t0 = time.perf_counter()
logs = eval(task, model="openai-api/peer/{model}", max_connections=concurrency, log_dir=log_dir, display="none",
            max_tokens=16, temperature=0.0)
wall = time.perf_counter() - t0
assert logs[0].status == "success", logs[0].error
import json, resource
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_kib": usage.ru_maxrss}}))
'''


def _measure(side: str, port: int, n: int, concurrency: int, folder: str, checkout: str | None = None) -> dict[str, float]:
    """Run one side in a fresh process: (wall of the calls, CPU per call, peak MiB, process wall)."""
    t0 = time.perf_counter()
    if side == "inspect":
        script = Path(folder) / "peer_task.py"
        script.write_text(_INSPECT_TASK.format(questions=[question(k) for k in range(n)], model=MODEL))
        env = {**os.environ, "PEER_API_KEY": "x", "PEER_BASE_URL": f"http://127.0.0.1:{port}/v1",
               "INSPECT_CACHE_DIR": str(Path(folder) / "inspect-cache"), "INSPECT_LOG_LEVEL": "warning"}
        command = [str(PEER_VENV / "bin" / "python"), str(script), str(n), str(concurrency), str(Path(folder) / "logs")]
    else:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [sys.executable, "-m", "benchmarks.peer_calls", "--side", side, "--port", str(port), "--n", str(n),
                   "--concurrency", str(concurrency), "--folder", folder] + (["--checkout", checkout] if checkout else [])
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{side}: {done.stderr[-2000:]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    return {"wall": got["wall"], "cpu_ms": got["cpu"] / n * 1000, "peak_mib": got["rss_kib"] / 1024,
            "process_s": time.perf_counter() - t0}


def _install_inspect() -> None:
    if (PEER_VENV / "bin" / "python").exists():
        return
    print(f"installing {INSPECT} into {PEER_VENV} (once)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
    subprocess.run([str(PEER_VENV / "bin" / "python"), "-m", "pip", "install", "-q", INSPECT, "openai"], check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="questions per side")
    parser.add_argument("--settings", nargs="+", default=["0.5:64", "0.005:256"], help="DELAY:CONCURRENCY")
    parser.add_argument("--inspect", action="store_true", help="also Inspect AI (installed once, in a venv of its own)")
    parser.add_argument("--busy", type=int, default=0, help="CPU-bound processes run beside it all")
    parser.add_argument("--baseline", metavar="CHECKOUT", help="also Benchsmith as another checkout has it (before a change)")
    parser.add_argument("--checkout", help=argparse.SUPPRESS)
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--concurrency", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--serve", type=float, metavar="DELAY", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.port, args.serve)
        return 0
    if args.side:  # a child: the calls' wall time, and the whole process's CPU time and peak memory
        wall = _raw(args.port, args.n, args.concurrency) if args.side == "raw" else \
            _benchsmith(args.port, args.n, args.concurrency, args.folder, Path(args.checkout or ROOT))
        usage = resource.getrusage(resource.RUSAGE_SELF)
        print(json.dumps({"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_kib": usage.ru_maxrss}))
        return 0
    if args.inspect:
        _install_inspect()
    sides = ["raw", "benchsmith"] + (["baseline"] if args.baseline else []) + (["inspect"] if args.inspect else [])
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        print(f"{args.n} multiple-choice calls per side; {os.cpu_count()} CPUs; {args.busy} CPU-bound processes beside")
        print(f"{'delay':>6} {'conc':>5} {'side':>11} {'wall s':>8} {'calls/s':>8} {'bound/wall':>10} {'CPU ms/call':>11} "
              f"{'peak MiB':>8} {'rerun s':>8}")
        for setting in args.settings:
            delay, concurrency = float(setting.split(":")[0]), int(setting.split(":")[1])
            bound = args.n * delay / concurrency
            server = subprocess.Popen([sys.executable, "-m", "benchmarks.peer_calls", "--serve", str(delay),
                                       "--port", "0"], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                                      env={**os.environ, "PYTHONPATH": str(ROOT)})
            assert server.stdout is not None
            ready, _, port_text = server.stdout.readline().strip().partition(" ")
            assert ready == "ready", ready
            port = int(port_text)
            try:
                for side in sides:
                    with tempfile.TemporaryDirectory() as folder:
                        checkout = args.baseline if side == "baseline" else None
                        kind = "benchsmith" if side == "baseline" else side
                        first = _measure(kind, port, args.n, concurrency, folder, checkout)
                        rerun = _measure(kind, port, args.n, concurrency, folder, checkout) if side != "raw" else None
                    print(f"{delay:>6} {concurrency:>5} {side:>11} {first['wall']:>8.2f} {args.n / first['wall']:>8.0f} "
                          f"{bound / first['wall']:>10.2f} "
                          f"{first['cpu_ms']:>11.2f} {first['peak_mib']:>8.0f} "
                          f"{rerun['process_s'] if rerun else float('nan'):>8.2f}", flush=True)
            finally:
                server.terminate()
                server.wait()
    finally:
        for p in busy:
            p.kill()
    print(textwrap.dedent("""
        wall: the calls alone (imports and set-up, the warehouse's schema among it, left out); calls/s: n over
        that wall; CPU ms/call: the side's whole process (imports and set-up included) over the calls; peak MiB:
        the side's process's largest resident set; rerun s: a second fresh process asking the same calls,
        answered from its cache, start to end."""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
