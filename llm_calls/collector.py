"""The cyclic garbage collector's pace while calls are in flight.

Python's collector runs its youngest generation after 700 new container objects (dicts, lists,
futures, tasks, frames) and every older one after ten of the younger, and a collection of the
oldest walks every object the process holds: with Dagster, DuckDB, Arrow and polars imported and a
run's requests and answers held, 180,000 objects or more. A call in flight makes dozens of
containers (its request, its task and futures, the reply's JSON, its row), so at thousands of
calls a second the collector ran hundreds of times a second and the oldest generation every
half-second or so, each time stopping the call loop for about 0.1 s, with every reply waiting.

Measured on 20,000 calls through `Ledger.complete` (a 5 ms loopback server, concurrency 256, every
call stored; 2 cores, three runs each): the collector took 0.54-0.59 s of runs of 3.4-3.6 s at
Python's pace (433-442 young collections, 4 of the oldest), and 0.03-0.04 s with the youngest
generation collected after 20,000 new containers instead (7 young collections, none of the oldest).

While any session of the ledger runs in this process, the youngest generation's threshold is
`CALLS_THRESHOLD` (never lowered below what the process set); the older generations keep their
thresholds, so whatever garbage outlives the young collections is still collected in the same
proportion, only a call's short-lived cycles wait longer (at most 20,000 containers, a few MiB).
When the last session ends, the process's own thresholds are back. Nothing is frozen or disabled.
"""

from __future__ import annotations

import gc

from warehouse.per_process import PerProcess

CALLS_THRESHOLD = 20_000  # the youngest generation's threshold while calls are in flight


class CollectorPace:
    """Counts the sessions open in this process; the first sets the calls' pace, the last gives
    back the thresholds it found (unless someone changed them meanwhile: theirs are kept). A
    forked child starts with none open (`PerProcess`: its parent's sessions are not its own)."""

    def __init__(self, threshold: int = CALLS_THRESHOLD):
        self.threshold = threshold
        self._state = PerProcess()  # "open": sessions; "saved", "set": the thresholds found and set

    def __enter__(self) -> CollectorPace:
        with self._state.lock:
            state = self._state.here()
            state["open"] = state.get("open", 0) + 1
            if state["open"] == 1:
                state["saved"] = gc.get_threshold()
                young, *older = state["saved"]
                if young and young < self.threshold:  # 0: collection is off; leave it so
                    gc.set_threshold(self.threshold, *older)
                state["set"] = gc.get_threshold()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._state.lock:
            state = self._state.here()
            if not state.get("open"):  # entered in the parent only
                return
            state["open"] -= 1
            if state["open"] == 0:
                if gc.get_threshold() == state["set"]:
                    gc.set_threshold(*state["saved"])
                state.clear()


PACE = CollectorPace()  # this process's: every session enters it
