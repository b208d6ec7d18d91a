"""The demo's model calls on the embedded model: through the pipeline against a direct server, on
idle cores and beside a CPU-bound neighbour, measured side by side in one run.

Pipeline: `python -m assets.materialize_all` on the repository's configuration (the embedded
SmolLM2, the demo scale) with a fresh warehouse, so every call is made: the Dagster runs, the
ledger and the one shared embedded server (llm_calls/embedded.py). Direct: the same requests,
read back from that run's ledger in the order they were made, sent one at a time with the
`openai` client to a llama.cpp server started directly on the same model file with the same
threads (llm_calls.embedded.server_threads). Calls per second over the span from the first request to the last answer. Then both
again beside a neighbour process that keeps one core busy. Never two servers at once: each side
stops its server before the next starts.

    python benchmarks/demo_calls.py [--select ib --partition fld]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llm_calls.embedded import _free_port, embedded_model_path, server_threads, usable_cores  # noqa: E402
from warehouse import Warehouse  # noqa: E402


def pipeline(select: list[str], partition: list[str], work: Path) -> tuple[int, float, int, list[dict]]:
    """(calls, seconds, completion tokens, requests in order) of one run on a fresh warehouse."""
    work.mkdir(parents=True)
    text = (ROOT / "benchsmith.yaml").read_text()
    text = re.sub(r"(?m)^(\s*path:\s*)data/benchsmith\.duckdb", rf"\g<1>{work / 'wh.duckdb'}", text, count=1)
    cfg = work / "benchsmith.yaml"
    cfg.write_text(text)
    (work / "home").mkdir()
    args = [a for s in select for a in ("--select", s)] + [a for p in partition for a in ("--partition", p)]
    env = {**os.environ, "BENCHSMITH_CONFIG": str(cfg), "DAGSTER_HOME": str(work / "home"), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-m", "assets.materialize_all", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    if out.returncode not in (0, 1):
        raise SystemExit(f"the pipeline run failed:\n{out.stderr[-3000:]}")
    rows = Warehouse(work / "wh.duckdb").rows(
        "SELECT request, completion_tokens, created_at, finished_at FROM llm.calls WHERE status = 'ok' "
        "ORDER BY created_at")
    span = (max(r["finished_at"] for r in rows) - min(r["created_at"] for r in rows)).total_seconds()
    return len(rows), span, sum(r["completion_tokens"] or 0 for r in rows), [json.loads(r["request"]) for r in rows]


def _embedded_gone(timeout_s: float = 60) -> None:
    """Wait until no embedded server of ours is running (the pipeline's stops when its run ends)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        if "llm_calls.serve_embedded" not in ps and "llama_cpp.server" not in ps:
            return
        time.sleep(0.5)
    raise SystemExit("an embedded server is still running; not starting a second one")


@contextlib.contextmanager
def llama_server(python: str = sys.executable, startup_s: float = 120) -> Iterator[int]:
    """A llama.cpp server on the embedded model file, started directly with `python`'s llama_cpp and
    the embedded server's threads (never beside another one); yields its port once it lists the model."""
    _embedded_gone()
    port = _free_port()
    threads = str(server_threads())
    server = subprocess.Popen(
        [python, "-m", "llama_cpp.server", "--model", str(embedded_model_path("smollm2-135m-instruct")),
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads", threads,
         "--n_threads_batch", threads], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + startup_s
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2)
                break
            except OSError as err:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"the llama.cpp server of {python} did not start") from err
                time.sleep(0.25)
        yield port
    finally:
        server.terminate()
        server.wait(30)


def direct(requests: list[dict]) -> tuple[int, float, int]:
    """(calls, seconds, completion tokens) of the same requests against a directly started server."""
    import openai

    with llama_server() as port:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="not-needed", max_retries=0,
                               timeout=300)
        tokens = 0
        t0 = time.monotonic()
        for req in requests:
            params = dict(req["params"])
            named = {k: params.pop(k) for k in ("temperature", "top_p", "max_tokens", "stop", "seed") if k in params}
            resp = client.chat.completions.create(model="smollm2", messages=req["messages"],
                                                  extra_body=params or None, **named)
            tokens += resp.usage.completion_tokens if resp.usage else 0
        return len(requests), time.monotonic() - t0, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--select", action="append", default=None, help="families to run (default: ib)")
    parser.add_argument("--partition", action="append", default=None, help="partitions (default: fld)")
    args = parser.parse_args()
    select, partition = args.select or ["ib"], args.partition or ["fld"]
    results: dict[tuple[str, str], tuple[int, float, int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for condition in ("idle", "busy"):
            neighbour = None
            if condition == "busy":  # one core kept busy by another process, as on a laptop doing other work
                neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            try:
                calls, span, tokens, requests = pipeline(select, partition, Path(tmp) / condition)
                results[(condition, "pipeline")] = (calls, span, tokens)
                results[(condition, "direct")] = direct(requests)
            finally:
                if neighbour is not None:
                    neighbour.kill()
                    neighbour.wait()
    print(f"demo calls ({' '.join(select)} / {' '.join(partition)}) on the embedded model, {usable_cores()} cores")
    print(f"{'condition':<10}{'side':<10}{'calls':>7}{'seconds':>10}{'calls/s':>10}{'tokens/s':>10}")
    for (condition, side), (calls, seconds, tokens) in results.items():
        print(f"{condition:<10}{side:<10}{calls:>7}{seconds:>10.1f}{calls / seconds:>10.2f}{tokens / seconds:>10.1f}")

    def rate(c: str, s: str) -> float:
        calls, seconds, _ = results[(c, s)]
        return calls / seconds

    print(f"pipeline / direct, idle: {rate('idle', 'pipeline') / rate('idle', 'direct'):.2f}")
    print(f"pipeline / direct, busy: {rate('busy', 'pipeline') / rate('busy', 'direct'):.2f}")
    print(f"busy / idle, pipeline:   {rate('busy', 'pipeline') / rate('idle', 'pipeline'):.2f}")
    print(f"busy / idle, direct:     {rate('busy', 'direct') / rate('idle', 'direct'):.2f}")


if __name__ == "__main__":
    main()
