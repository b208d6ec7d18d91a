"""`runs.commands`: one row per run of the command that ran a step, with its wall time, its CPU time
and its calls, so that the plan can say what the client's own work costs on this machine
(`reporting.plan.client_cpu`).

A row is written once the steps have ended, before the summary: the command's start (its first
import, `runner.LOADED`) to its last step's end, the process's CPU by then (its imports, Dagster's
runs, the items and the tables included), and the span from the first call counted to the last
(`TOTALS.calls_span`) with the CPU spent in it: what sending the calls, reading and storing
their replies cost per call, with whatever else ran meanwhile. The record is bookkeeping: a
warehouse that cannot take it costs a line on stderr, never the run.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from llm_calls import TOTALS, usable_cores
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
    cached, answered, failed = (sum(d.calls[i] for d in ran) for i in range(3))
    return {
        "command_id": uuid.uuid4().hex, "started_at": datetime.fromtimestamp(LOADED[0], UTC).replace(tzinfo=None),
        "finished_at": datetime.now(UTC).replace(tzinfo=None), "wall_s": wall,
        "cpu_s": t.user + t.system + t.children_user + t.children_system, "steps": len(ran),
        "calls": cached + answered + failed, "new_calls": answered + failed,
        "calls_s": span[0] if span else None, "calls_cpu_s": span[1] if span else None,
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
