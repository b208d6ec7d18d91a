"""The portable llama.cpp build (x86-64-v3, what `make install` builds) against a native one
(`GGML_NATIVE=ON`, built for this machine's CPU), side by side in one run: the same model file,
threads, prompts and token budgets, one server at a time, rounds alternated (portable, native,
portable, ...) so that drift in the machine's load falls on both alike.

The native build runs from a scratch venv: `--native-python` names one that has it, else the
native wheel is built (once, about 10 minutes on 2 cores, kept beside the portable one by
llm_calls/llama_build.py) and installed into a venv in a temporary folder.

    python benchmarks/llama_build.py [--rounds 3] [--calls 12] [--native-python PATH]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "benchmarks"))

from demo_calls import llama_server  # noqa: E402

from llm_calls import llama_build  # noqa: E402
from llm_calls.embedded import server_threads  # noqa: E402

PROMPTS = [
    "Name three colours.", "What is 12 times 7?", "Write one sentence about the sea.",
    "List the days of the week.", "What is the capital of Italy?", "Give a synonym for happy.",
]


def native_python(given: str | None, work: Path) -> str:
    if given:
        return given
    version, extras = llama_build.pinned_requirement()
    wheel = llama_build.build_wheel(version, llama_build.cmake_args(native=True))
    venv = work / "native-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--quiet", f"{wheel}{extras}"], check=True)
    return python


def features(python: str) -> str:
    code = "import llama_cpp, sys; sys.stdout.write(llama_cpp.llama_print_system_info().decode())"
    info = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout
    return " ".join(name for name, on in llama_build.system_features(info).items()
                    if on and name not in ("LLAMAFILE", "OPENMP", "REPACK"))


def one_round(python: str, calls: int, max_tokens: int) -> tuple[float, float]:
    """(calls/s, completion tokens/s) of `calls` requests sent one at a time to a fresh server."""
    import openai

    with llama_server(python) as port:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Hi"}], max_tokens=1)
        tokens = 0
        t0 = time.monotonic()
        for i in range(calls):
            resp = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                max_tokens=max_tokens, temperature=0.0, seed=i)
            tokens += resp.usage.completion_tokens
        seconds = time.monotonic() - t0
        return calls / seconds, tokens / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=12, help="calls per round")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--native-python", help="a python whose llama_cpp is a native build")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sides = {"portable": sys.executable, "native": native_python(args.native_python, Path(tmp))}
        print(f"server threads: {server_threads()}; {args.rounds} rounds x {args.calls} calls, "
              f"{args.max_tokens} tokens at most, one request at a time")
        for side, python in sides.items():
            print(f"  {side:9s} features: {features(python)}")
        results: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        for _ in range(args.rounds):
            for side, python in sides.items():
                results[side].append(one_round(python, args.calls, args.max_tokens))
    print(f"\n{'build':10s}{'calls/s':>10s}{'tokens/s':>10s}   per round (calls/s)")
    med = {}
    for side, rounds in results.items():
        med[side] = (statistics.median(r[0] for r in rounds), statistics.median(r[1] for r in rounds))
        print(f"{side:10s}{med[side][0]:10.2f}{med[side][1]:10.1f}   " + " ".join(f"{r[0]:.2f}" for r in rounds))
    print(f"\nportable / native: {med['portable'][0] / med['native'][0]:.2f} (calls/s), "
          f"{med['portable'][1] / med['native'][1]:.2f} (tokens/s); medians over the rounds")


if __name__ == "__main__":
    main()
