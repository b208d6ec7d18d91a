"""`runs.commands`: one row per run of the command that ran a step, with its wall time, its CPU time
and its calls, so that the plan can say what the client's own work costs on this machine
(`reporting.plan.client_cpu`).

A row is written once the steps have ended, before the summary: the command's start (its first
import, `runner.LOADED`) to its last step's end, the process's CPU by then (its imports, Dagster's
runs, the items and the tables included), the span from the first call counted to the last
(`TOTALS.calls_span`), and the CPU of the call loop, the one thread that sends the calls and
reads their replies (`llm_calls.calls_cpu`): what a call costs the client.

The plan reads that figure from a demo-scale pilot, where a run lasts seconds and its fixed costs
weigh on every call. Measured on 2 cores (IB, a pilot of 118 calls, then one paper partition of
9,600 calls, 5 ms stub): the process's CPU over the calls' span was 3.3 ms a call in the pilot
against 0.77 in the paper run (20.3 against 1.3 ms at 0.5 s: every step's items, Dagster runs
and tables ran in that span); the call loop and its DuckDB threads 2.8 against 0.75 ms (the
threads' cost is per commit: a pilot commits a few rows at a time); the call loop alone 0.94
against 0.60 ms. So the call loop's, an over-estimate of about 1.6x from a pilot. Where the
system has no per-thread clocks, the process's CPU over the span stands in.

The record is bookkeeping: a warehouse that cannot take it costs a line on stderr, never the run.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from llm_calls import TOTALS, calls_cpu, usable_cores
from reporting.summary import Done
from runner import LOADED
from warehouse import Warehouse

TABLE = "runs.commands"


def row(done: Sequence[Done], load_avg: float | None) -> dict[str, Any] | None:
    """The command's row from its steps (`done`) and the calls this process counted; None when no
    step ran (every one up to date)."""
    ran = [d for d in done if not d.skipped]
    if not ran:
        return None
    t = os.times()
    wall = time.monotonic() - LOADED[1]
    span = TOTALS.calls_span()
    threads = calls_cpu() if span else None
    cached, answered, failed = (sum(d.calls[i] for d in ran) for i in range(3))
    return {
        "command_id": uuid.uuid4().hex, "started_at": datetime.fromtimestamp(LOADED[0], UTC).replace(tzinfo=None),
        "finished_at": datetime.now(UTC).replace(tzinfo=None), "wall_s": wall,
        "cpu_s": t.user + t.system + t.children_user + t.children_system, "steps": len(ran),
        "calls": cached + answered + failed, "new_calls": answered + failed,
        "calls_s": span[0] if span else None, "calls_cpu_s": (threads if threads is not None else span[1]) if span else None,
        "cores": usable_cores(), "load_avg": load_avg,
    }


def load_now() -> float | None:
    """The machine's 1-minute load average (None where the system has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def record(wh: Warehouse, done: Sequence[Done], load_avg: float | None) -> None:
    """Write the command's row (see the module); a failure is said on stderr and the run goes on."""
    r = row(done, load_avg)
    if r is None:
        return
    try:
        wh.upsert(TABLE, [r])
    except Exception as exc:  # noqa: BLE001 (bookkeeping: the steps' results are stored already)
        print(f"materialize_all: the command's record was not written to {TABLE} "
              f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})", file=sys.stderr)
