"""The calls counted in this process: what the run command's progress line and summary read.

Its own module, without the `openai` client, so that the command can print a summary without
importing it (a run whose steps are all up to date makes no call).
"""

from __future__ import annotations

import threading
import time

# The process's CPU clock is read at most this often by the counts: in the call loop, beside the
# DuckDB threads, `time.process_time()` took about 60 us a read (a py-spy profile of 20,000 calls at
# 5 ms and concurrency 256 put 8 % of the process's samples on it), against 1 us alone.
CPU_READ_EVERY_S = 0.01


class RunTotals:
    """Requests answered from the cache, answered by a model and failed, by every ledger in this
    process since the last `reset` (the command's progress line reads them), and per Dagster run
    (`of`: the command's summary counts each step's calls by its run, as steps run at once).

    `waiting` is set once the process waits on an endpoint: one has its whole concurrency out
    (`llm_calls.flows._Pool`). From then on the interpreter is mostly idle between replies, so
    the run command does the work nothing waits for yet (its first figure) then, not while it
    builds what the first calls need or reads their replies. An answer alone does not set it: the
    models probe's one call is answered while the items are built and the first slice starts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # ledgers of steps running at once count from their own threads
        self.waiting = threading.Event()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.cached = self.answered = self.failed = 0
            self._held: dict[str, float] = {}  # model -> time.monotonic() its rate-limit wait ends
            self._runs: dict[str | None, list[int]] = {}
            self.span: tuple[float, float, float, float] | None = None  # first, last: (monotonic, CPU)
            self._cpu_read = 0.0  # time.monotonic() of the span's last CPU read
            self.waiting.clear()

    def add(self, run_id: str | None, cached: int = 0, answered: int = 0, failed: int = 0) -> None:
        now = time.monotonic()
        with self._lock:
            if self.span is None or now - self._cpu_read >= CPU_READ_EVERY_S:
                cpu, self._cpu_read = time.process_time(), now
            else:  # as last read: at most `CPU_READ_EVERY_S` of the process's time behind
                cpu = self.span[3]
            first = self.span if self.span is not None else (now, cpu)
            self.span = (first[0], first[1], now, cpu)
            self.cached += cached
            self.answered += answered
            self.failed += failed
            counts = self._runs.setdefault(run_id, [0, 0, 0])
            counts[0] += cached
            counts[1] += answered
            counts[2] += failed

    def of(self, run_id: str | None) -> tuple[int, int, int]:
        """(cached, answered, failed) of the ledgers made for the run `run_id` since the last reset."""
        with self._lock:
            return tuple(self._runs.get(run_id, (0, 0, 0)))  # type: ignore[return-value]

    def rate_limited(self, model: str, seconds: float) -> None:
        """A call of `model` waits `seconds` before asking again (HTTP 429, its Retry-After)."""
        with self._lock:
            self._held[model] = max(self._held.get(model, 0.0), time.monotonic() + seconds)

    def held(self) -> dict[str, float]:
        """Models whose calls wait on a rate limit now, with the seconds left of the longest wait."""
        now = time.monotonic()
        with self._lock:
            return {m: until - now for m, until in sorted(self._held.items()) if until > now}

    def calls_span(self) -> tuple[float, float] | None:
        """(seconds, CPU seconds of this process) from the first count since the last `reset` to the
        last: the time the calls took and what the process spent meanwhile (sending, reading,
        storing, and whatever ran beside them); None before any count. The first count is of a
        call already done (an answer, a cache lookup), so the first call's own send is outside."""
        with self._lock:
            if self.span is None:
                return None
            t0, c0, t1, c1 = self.span
            return t1 - t0, c1 - c0

    @property
    def done(self) -> int:
        return self.cached + self.answered + self.failed


TOTALS = RunTotals()

# the name of the thread that makes the calls: the process's call loop (llm_calls/flows.py
# `call_loop`); its I/O threads (the ledger's lookups and writes in DuckDB) are named from it
CALL_THREADS = "benchsmith-calls"


def calls_cpu() -> float | None:
    """CPU seconds the call loop (`CALL_THREADS`) of this process has used so far: sending the
    requests, reading the replies, the flows' own work between calls (prompts, reading the
    replies); not its I/O threads (DuckDB's lookups and writes, which run outside the interpreter
    lock and whose cost per call is mostly per commit, so it says little at demo scale) and not
    the steps' other work (items, tables, Dagster). The call loop is one thread: its CPU per call
    is what bounds how fast it keeps calls going. 0.0 before any call loop; None where the system
    has no per-thread clocks."""
    if not hasattr(time, "pthread_getcpuclockid"):
        return None
    total = 0.0
    for thread in threading.enumerate():
        if thread.name == CALL_THREADS and thread.ident is not None:
            try:
                total += time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            except OSError:  # the thread ended between the listing and the read
                continue
    return total
