"""A paper-scale run at the endpoint's bound: Instruction Boundary and WakenLLM FLD end to end
against a stub endpoint, beside a bare `openai` client replaying the same requests, in one run.

The endpoint is the project's stub server (llm_calls/stub_server.py, its own process), answering
every request after `--delay` seconds; one model at `--concurrency` is evaluated and is its own
judge and polisher, so every call shares one budget. For each family, on a fresh warehouse:

- a pilot: the same selection at `scale: demo` (10 FLD items; 2 questions per IB dataset), as one
  would run before paying for the paper run; its calls stay in the warehouse and are not counted
  below (the paper run reuses those whose items it shares);
- the plan (`materialize_all --plan --latency DELAY`) at paper scale: its range (no bounded branch
  taken - every bound reached) and its expected time, each bounded step at the rate the pilot took
  it, with the steps' own time (reporting/plan.py `branch_rates`), before any paper-scale call;
- the run: `python -m assets.materialize_all --select ib` (every IB dataset and the miscellany) or
  `--select waken --partition fld` at `scale: paper`, timed from the command's start to its end
  (items, Dagster and the warehouse included), its CPU time (user + system) measured;
- the bound: the run's calls x delay / concurrency, the least wall time any client can take;
- the bare client: the same requests (their stored bodies, read from `llm.calls`), sent by one
  `openai.AsyncOpenAI` at the same concurrency as one stream, with its wall and CPU time; twice:
  through `chat.completions.create` (the typed layer: the anchor the goal is set against), then
  through the client's plain POST, the path the ledger takes, so the project's own cost beyond
  the very same HTTP path is printed too; then a raw asyncio client (`benchmarks/raw_client.py`:
  HTTP/1.1 bytes over asyncio streams, `json.loads`), the least any client can spend, so the run's
  CPU per call beyond it is printed as well;
- a rerun of one partition (`--partition fld`), nothing changed: every step up to date
  (runner/up_to_date.py), none run; then the same with `--all`: every step runs again, every call
  from the cache, the run's own time.

Printed per family: calls, bound, wall, bound / wall, the span from the first request to the last
answer, the plan's range and its expected time against the wall (goal: within 25 %), the
bare client's wall and bound / wall, the CPU per call of both sides (the run's includes building
items, Dagster and the tables; the project's own per-call cost is `benchmarks/llm_ledger.py`'s)
and the two reruns' seconds (up to date; `--all`, every call cached). Goal: bound / wall >= 0.9 for both families.
Then the run's CPU split in two: the same selection run again with `--all` (IB's whole selection,
a third rerun) does every step's work, items, Dagster, prompts, reading the replies, the tables,
with every answer from the cache; the rest of the run's CPU is what making the calls cost (the
client, the ledger's writes), per call beside the bare client's (goal: within 0.5 ms of `create`'s),
and beside the plain POST's.

Then where the wall time beyond the bound went, from the stored calls (each one's request went
out `latency_s` before its `finished_at`) and the command's start and end; the parts add up to
wall - bound:

- before the first request: imports, the models probe (its one call included), the items, the
  first slice's own start;
- no call out, between the first request and the tail: a slice waiting for its items, the steps'
  own work while nothing else is asked (the slices run at once, so this is no longer a gap per slice);
- fewer than `concurrency` calls out while work remained: the first wave's lookups, the event
  loops busy reading replies;
- the tail: after the last moment `concurrency` calls were out (the last items' chains);
- after the last answer: the metrics, the summary and reports, the command's own end.

The project's modules are compiled to bytecode first, as `make` does before every target: with
PYTHONDONTWRITEBYTECODE set (as on the machines these figures were taken on), each command would
otherwise compile them again as it starts (0.3-0.5 s of every run and rerun here).

Also printed: the call loop's CPU per new call as the plan saw it from the pilot (`runs.commands`,
the plan's client line) beside the paper run's own record of it. `--busy N` runs N CPU-bound processes
beside it all (the stub, the runs, the bare client): a loaded machine.

    python benchmarks/paper_calls.py [--delay 0.5] [--concurrency 64] [--families ib waken] [--busy 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.raw_client import timed_replay  # noqa: E402 (the project's root first)

SELECT = {"ib": ["--select", "ib"], "waken": ["--select", "waken", "--partition", "fld"]}


def stub(delay: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "llm_calls.stub_server", "--delay", str(delay)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def config(folder: Path, url: str, concurrency: int, scale: str = "paper") -> Path:
    data = yaml.safe_load((ROOT / "benchsmith.yaml").read_text())
    data.update({
        "scale": scale, "warehouse": {"path": str(folder / "wh.duckdb")},
        "models": {"stub": {"base_url": url, "model": "stub-model", "concurrency": concurrency}},
        "evaluate": ["stub"], "judge": "stub",
        "ledger": {"timeout_s": 60, "progress_interval_s": 600, "slots_dir": str(folder / "slots")},
    })
    data["ib"] = {**data["ib"], "polisher": None}
    data["s1"] = {**data["s1"], "validators": ["stub"]}  # no other model: the embedded one is never started
    # the stub's replies ("reply to: ...") answer nothing, so every reply is undecided: the checks
    # that would stop such a run are widened here, where the calls' timing is what is measured
    data["reply_checks"] = {"failed_calls": 0.0, "undecided_replies": 1.0, "truncated_replies": 1.0}
    path = folder / f"benchsmith.{scale}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_family(family: str, args: argparse.Namespace, url: str, tmp: Path) -> dict:
    folder = Path(tempfile.mkdtemp(dir=tmp, prefix=f"{family}-"))
    path = config(folder, url, args.concurrency)
    env = {**os.environ, "BENCHSMITH_CONFIG": str(path), "DAGSTER_HOME": str(folder / "dagster")}
    (folder / "dagster").mkdir()
    # the pilot: the same selection at demo scale, as one would before paying for the paper run; the
    # plan's expected time takes each bounded step at the rate the pilot took it
    pilot = subprocess.run([sys.executable, "-m", "assets.materialize_all", *SELECT[family]], cwd=ROOT,
                           env={**env, "BENCHSMITH_CONFIG": str(config(folder, url, args.concurrency, "demo"))},
                           capture_output=True, text=True)
    if pilot.returncode != 0:
        print(pilot.stdout[-3000:], pilot.stderr[-3000:], sep="\n")
        raise SystemExit(f"{family}: the demo-scale pilot failed ({pilot.returncode})")
    plan = subprocess.run([sys.executable, "-m", "assets.materialize_all", *SELECT[family], "--plan",
                           "--latency", str(args.delay)], cwd=ROOT, env=env, capture_output=True, text=True)
    estimate = plan_seconds(plan.stdout)
    client = re.search(r"^The client's own work: its call loop's (\d+(?:\.\d+)?) ms of CPU per new call", plan.stdout, re.M)
    cpu0, t0, began = _children_cpu(), time.monotonic(), datetime.now(UTC).replace(tzinfo=None)
    done = subprocess.run([sys.executable, "-m", "assets.materialize_all", *SELECT[family]], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    wall, cpu = time.monotonic() - t0, _children_cpu() - cpu0
    ended = datetime.now(UTC).replace(tzinfo=None)
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
        raise SystemExit(f"{family}: the run failed ({done.returncode})")
    from warehouse import Warehouse

    wh = Warehouse(folder / "wh.duckdb")
    made = wh.scalar("SELECT count(*) FROM llm.calls")
    piloted = wh.scalar("SELECT count(*) FROM llm.calls WHERE created_at < ?", [began])
    measured = wh.rows("SELECT calls_cpu_s / calls AS per_call FROM runs.commands WHERE started_at >= ? "
                       "ORDER BY finished_at LIMIT 1", [began])  # the run's own record of its calls' CPU
    # one partition again: up to date (skipped), then run again from the cache; then, where the
    # selection is more than that partition (IB), the whole selection from the cache, for the CPU
    one = [*SELECT[family][:2], "--partition", "fld"]
    commands = [one, [*one, "--all"]] + ([[*SELECT[family], "--all"]] if SELECT[family] != one else [])
    reruns, rerun_cpu = [], []
    for command in commands:
        t1, c1 = time.monotonic(), _children_cpu()
        again = subprocess.run([sys.executable, "-m", "assets.materialize_all", *command], cwd=ROOT, env=env,
                               capture_output=True, text=True)
        reruns.append(time.monotonic() - t1)
        rerun_cpu.append(_children_cpu() - c1)
        if again.returncode != 0 or wh.scalar("SELECT count(*) FROM llm.calls") != made:
            raise SystemExit(f"{family}: the rerun {command} failed or made calls ({again.returncode})")
        if command is one and "steps up to date, not run again" not in again.stdout:
            raise SystemExit(f"{family}: the rerun with nothing changed ran steps:\n{again.stdout[-2000:]}")
    rows = wh.rows("SELECT request, created_at, finished_at, latency_s, status, run_id, purpose FROM llm.calls "
                   "WHERE created_at >= ? ORDER BY created_at, key", [began])  # the paper run's own calls
    span = (max(r["finished_at"] for r in rows) - min(r["created_at"] for r in rows)).total_seconds()
    parts = decomposition(rows, began, ended, args.delay, args.concurrency)
    bodies = [json.loads(r["request"]) for r in rows]
    bare_wall, bare_cpu = asyncio.run(replay(url, bodies, args.concurrency))
    plain_wall, plain_cpu = asyncio.run(replay(url, bodies, args.concurrency, plain=True))
    raw_wall, raw_cpu = timed_replay(url.rstrip("/") + "/chat/completions", [json.dumps(
        {"model": "stub-model", "messages": b["messages"], **b["params"]}).encode() for b in bodies], args.concurrency)
    calls = len(rows)
    return {"family": family, "calls": calls, "piloted": piloted, "failed": sum(r["status"] != "ok" for r in rows),
            "bound": calls * args.delay / args.concurrency, "wall": wall, "span": span, "estimate": estimate,
            "client_planned_ms": float(client.group(1)) if client else None,
            "client_measured_ms": 1000 * measured[0]["per_call"] if measured and measured[0]["per_call"] else None,
            "cpu_ms": 1000 * cpu / calls, "rerun": reruns[0], "forced": reruns[1], "parts": parts,
            # the selection run again with `--all` does all the run's work but the requests (every
            # answer from the cache): what is left of the run's CPU is what making the calls cost
            "calls_cpu_ms": 1000 * (cpu - rerun_cpu[-1]) / calls, "cached_cpu_s": rerun_cpu[-1],
            "bare_wall": bare_wall, "bare_cpu_ms": 1000 * bare_cpu / calls,
            "plain_wall": plain_wall, "plain_cpu_ms": 1000 * plain_cpu / calls,
            "raw_wall": raw_wall, "raw_cpu_ms": 1000 * raw_cpu / calls}


def decomposition(rows: list[dict], began: datetime, ended: datetime, delay: float, concurrency: int
                  ) -> dict[str, float]:
    """Where the wall time beyond the bound went (see the module docstring): seconds per part,
    from each call's send time (`finished_at - latency_s`) and answer time. The slices run at once,
    so the calls are one stream: from its first request to its last answer, the time beyond its
    bound is its tail (after the last moment `concurrency` calls were out), the time with no call
    out at all before that (a step between, a slice waiting for its items), and the rest (some
    calls out but fewer than `concurrency`)."""
    calls = [((r["finished_at"] - began).total_seconds() - (r["latency_s"] or 0.0),
              (r["finished_at"] - began).total_seconds())
             for r in rows if r["purpose"] != "models.probe"]  # the probe's call is part of the start
    first, last = min(s for s, _ in calls), max(e for _, e in calls)
    events = sorted([(s, 1) for s, _ in calls] + [(e, -1) for _, e in calls])
    out_now, full = 0, first
    for t, step in events:
        out_now += step
        if out_now >= concurrency:
            full = t
    out_now, since, idle_before_tail = 0, first, 0.0
    for t, step in events:
        if t > full:
            break
        if out_now == 0:
            idle_before_tail += t - since
        out_now += step
        since = t
    lost = (last - first) - len(calls) * delay / concurrency
    return {"before the first request": first,
            "no call out (before the tail)": idle_before_tail,
            "fewer than concurrency out": lost - (last - full) - idle_before_tail,
            "tail (after the last full wave)": last - full,
            "after the last answer": (ended - began).total_seconds() - last}


def plan_seconds(text: str) -> tuple[float, float, float | None] | None:
    """The plan's estimate: (no reply takes a bounded branch, every bound reached, expected with the
    steps' own time; None when the plan gives none)."""
    m = re.search(r"at once: (\d+(?:\.\d+)?) (s|min|h) if no reply .*? at most (\d+(?:\.\d+)?) (s|min|h)\b",
                  text, re.S)
    if not m:
        return None
    unit = {"s": 1, "min": 60, "h": 3600}
    e = re.search(r"^Expected: .*with the steps below, about (\d+(?:\.\d+)?) (s|min|h)\b", text, re.M)
    return (float(m.group(1)) * unit[m.group(2)], float(m.group(3)) * unit[m.group(4)],
            float(e.group(1)) * unit[e.group(2)] if e else None)


async def replay(url: str, bodies: list[dict], concurrency: int, plain: bool = False) -> tuple[float, float]:
    """The bare client: every stored request body, `concurrency` at a time, as one stream, through
    `chat.completions.create` (its typed layer, the issue's anchor), or with `plain` through the
    client's plain POST and `json.loads`, the path the ledger takes (`Ledger.send`)."""
    import httpx2
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="not-needed", max_retries=0, timeout=60)
    sem = asyncio.Semaphore(concurrency)

    async def one(body: dict) -> None:
        params = dict(body["params"])
        async with sem:
            if plain:
                resp = await client.post("/chat/completions", cast_to=httpx2.Response,
                                         body={"model": "stub-model", "messages": body["messages"], **params})
                json.loads(resp.content)["choices"][0]["message"]["content"]
                return
            extra = {k: params.pop(k) for k in list(params) if k not in ("temperature", "max_tokens", "seed", "top_p")}
            await client.chat.completions.create(model="stub-model", messages=body["messages"],
                                                 extra_body=extra or None, **params)

    cpu0, t0 = time.process_time(), time.monotonic()
    await asyncio.gather(*(one(b) for b in bodies))
    wall, cpu = time.monotonic() - t0, time.process_time() - cpu0
    await client.close()
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--families", nargs="+", default=["ib", "waken"], choices=sorted(SELECT))
    parser.add_argument("--busy", type=int, default=0, help="CPU-bound processes run beside it all (a loaded machine)")
    args = parser.parse_args()
    import compileall

    for package in sorted(p for p in ROOT.iterdir() if (p / "__init__.py").exists()):
        compileall.compile_dir(package, quiet=1, workers=0)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    proc, url = stub(args.delay)
    out = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for family in args.families:
                out.append(run_family(family, args, url, Path(tmp)))
    finally:
        proc.terminate()
        for p in busy:
            p.terminate()
    print(f"\nscale paper, one model (its own judge) at concurrency {args.concurrency}, stub {args.delay} s per call; "
          f"{os.cpu_count()} CPUs; {args.busy} CPU-bound processes beside\n")
    print(f"{'family':<7}{'calls':>7}{'failed':>7}{'bound s':>9}{'wall s':>8}{'bound/wall':>11}{'span s':>8}"
          f"{'plan s':>10}{'expected s':>11}{'exp./wall':>10}{'bare s':>8}{'bare b/w':>9}{'cpu ms/call':>12}"
          f"{'bare ms/call':>13}{'rerun s':>9}{'--all s':>9}")
    for r in out:
        est = r["estimate"]
        plan = f"{est[0]:.0f}-{est[1]:.0f}" if est else "-"
        expected, ratio = (f"{est[2]:.0f}", f"{est[2] / r['wall']:.2f}") if est and est[2] is not None else ("-", "-")
        print(f"{r['family']:<7}{r['calls']:>7}{r['failed']:>7}{r['bound']:>9.1f}{r['wall']:>8.1f}"
              f"{r['bound'] / r['wall']:>11.2f}{r['span']:>8.1f}{plan:>10}{expected:>11}{ratio:>10}{r['bare_wall']:>8.1f}"
              f"{r['bound'] / r['bare_wall']:>9.2f}{r['cpu_ms']:>12.2f}{r['bare_cpu_ms']:>13.2f}{r['rerun']:>9.1f}"
              f"{r['forced']:>9.1f}")
    for r in out:
        print(f"{r['family']}: the demo-scale pilot before the plan made {r['piloted']} calls (not counted above)")
    for r in out:
        planned, measured = r["client_planned_ms"], r["client_measured_ms"]
        print(f"{r['family']}: the call loop's CPU per new call: the plan's (from the pilot) "
              f"{'-' if planned is None else f'{planned:.2f} ms'}, the run's own (runs.commands) "
              f"{'-' if measured is None else f'{measured:.2f} ms'}")
    for r in out:
        print(f"{r['family']}: CPU {r['cpu_ms'] * r['calls'] / 1000:.1f} s for the run; {r['cached_cpu_s']:.1f} s for the "
              f"same selection again from the cache (`--all`); the difference, the calls' own: "
              f"{r['calls_cpu_ms']:.2f} ms a call; the bare client's {r['bare_cpu_ms']:.2f} through "
              f"`create` ({r['calls_cpu_ms'] - r['bare_cpu_ms']:+.2f}), {r['plain_cpu_ms']:.2f} through its plain "
              f"POST, the ledger's path ({r['calls_cpu_ms'] - r['plain_cpu_ms']:+.2f}; its wall {r['plain_wall']:.1f} s)")
    for r in out:
        print(f"{r['family']}: a raw asyncio client (benchmarks/raw_client.py) on the same requests: wall "
              f"{r['raw_wall']:.1f} s (bound / wall {r['bound'] / r['raw_wall']:.2f}), {r['raw_cpu_ms']:.2f} ms of CPU a "
              f"call; the run's own CPU beyond it {r['cpu_ms'] - r['raw_cpu_ms']:.2f} ms a call (the calls' own "
              f"{r['calls_cpu_ms'] - r['raw_cpu_ms']:+.2f}, the rest of the run's work "
              f"{r['cpu_ms'] - r['calls_cpu_ms']:.2f})")
    for r in out:
        parts = r["parts"]
        print(f"\n{r['family']}: wall - bound = {r['wall'] - r['bound']:.1f} s, of which")
        for name, seconds in parts.items():
            print(f"  {name:<34} {seconds:6.1f} s")
        print(f"  {'(sum; the probe call is in the first)':<34} {sum(parts.values()):6.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
