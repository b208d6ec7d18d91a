"""One endpoint, one budget: a model's `concurrency` bounds the calls in flight to its endpoint
across every run that calls it, not per run.

Each endpoint (its base URL) has numbered slots; a call holds one while its request is in flight
(`Slots.hold`), once a worker of its endpoint's queue in this process takes it
(`llm_calls/flows.py`). A model with `concurrency: N` may take slots 0..N-1, so five backfills
against one vLLM server never send it more than N requests at once, and
two models served by one endpoint share its slots (the endpoint's bound is the larger of their
concurrencies). The slots are locks that their holder's death releases, so a killed run never
leaves one taken:

- `machine` (the default): an `flock` on one small file per slot under `ledger.slots_dir`, for
  every process on this machine;
- `postgres`: a PostgreSQL advisory lock per slot, in the database whose libpq connection string the
  variable `ledger.slots_env` holds (by default the lake's catalog), for every machine;
- `run`: this process's slots only (in memory): the steps that `materialize_all` runs at once
  share the bound, other processes' runs do not count.

The ledger is the one place a request is sent, so the bound holds however a run was launched (the
UI, `materialize_all`, a backfill, a notebook). Dagster's concurrency pools bound ops, not requests: a
partitioned asset's pool is fixed when it is defined while the endpoint differs per partition, and
one op asks the evaluated model and the judge, so they cannot express this.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import hashlib
import itertools
import os
import random
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from warehouse.per_process import PerProcess


class SlotsError(RuntimeError):
    """The shared slots cannot be used (the Postgres database unreachable, the variable unset)."""


def _wake(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


class Slots:
    """The slots of one endpoint (see the module docstring); `hold(n)` takes one of the first n."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        # the slots this process holds: its own lock on one would not stop a second call of ours (an
        # flock and an advisory lock are re-entrant for their holder), so it is never tried twice
        self._held: set[int] = set()
        self._unheld: set[int] = set()  # the others of the first `_top` (the most asked for), to walk when few
        self._top = 0
        self._mutex = threading.Lock()  # event loops in several threads share this object
        # calls of this process waiting for a slot, first come first woken: (their loop, a future)
        self._waiters: collections.deque[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = collections.deque()

    def _take(self, n: int) -> int | None:
        """A free slot of the first `n`, now held; None if none is. Call with `_mutex` held."""
        if n > self._top:
            self._unheld.update(range(self._top, n))
            self._top = n
        # from a random slot on, round: processes that start together do not all try slot 0 first
        # (a walk, not a shuffled list of all n: this runs once per call, with most slots held)
        start = random.randrange(n) if n > 0 else 0
        if len(self._unheld) * 4 < n:  # most held by this process: walk only the others, not past every held one
            order: Iterable[int] = sorted(self._unheld, key=lambda k: (k < start, k))
        else:
            order = itertools.chain(range(start, n), range(start))
        for k in order:
            if k < n and k not in self._held and self._try(k):
                self._held.add(k)
                self._unheld.discard(k)
                return k
        return None

    def _give_back(self, k: int) -> None:
        """Let go of slot `k` (with `_mutex` held)."""
        self._release(k)
        self._held.discard(k)
        self._unheld.add(k)

    def hold(self, n: int) -> _Held:
        """`async with slots.hold(n) as k:` one of the first `n` slots, `k`, while the block runs. A
        call that finds none waits: for a release in this process, which wakes the first waiter (two
        models of different concurrency on one endpoint have a queue each; waiters in another
        thread's event loop are woken through it), and, while another process may hold one of its
        `n` slots, also for that by polling the locks with backoff (another process's release wakes
        nobody here). A class rather than a generator: a call that finds a slot free takes it
        without a coroutine (the generator's frames were 8 % of the call loop at 5 ms a call)."""
        return _Held(self, n)

    def _queue_up(self, n: int) -> tuple[asyncio.AbstractEventLoop, asyncio.Future, bool]:
        """Wait in line for one of the first `n` (with `_mutex` held, in the same hold as the take
        that found none, so no release between the two is missed): (the loop, the future a release
        sets, whether only a release of ours can free one)."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future = loop.create_future()
        self._waiters.append((loop, woken))
        return loop, woken, not any(k < n for k in self._unheld)

    async def _wait_for(self, n: int, waiting: tuple[asyncio.AbstractEventLoop, asyncio.Future, bool]) -> int:
        """Wait in line (`_queue_up`), try again when woken or polled, until a slot is taken."""
        delay = 0.002
        while True:
            loop, woken, ours = waiting
            try:  # a release of ours wakes us; the timeout is the poll (a lost wake-up costs 0.5 s)
                await asyncio.wait_for(woken, 0.5 if ours else delay * random.uniform(0.5, 1.0))
            except TimeoutError:
                delay = min(delay * 2, 0.05)
            finally:
                with self._mutex:
                    with contextlib.suppress(ValueError):
                        self._waiters.remove((loop, woken))
            with self._mutex:
                got = self._take(n)
                if got is not None:
                    return got
                waiting = self._queue_up(n)

    def _let_go(self, k: int) -> None:
        with self._mutex:
            self._give_back(k)
            while self._waiters:  # the first waiter still waiting (one that timed out is polling)
                waiter_loop, waiter = self._waiters.popleft()
                if not waiter.done():
                    with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                        waiter_loop.call_soon_threadsafe(_wake, waiter)
                    break

    def _try(self, k: int) -> bool:
        raise NotImplementedError

    def _release(self, k: int) -> None:
        raise NotImplementedError


class _Held:
    """One slot held while an `async with` block runs (`Slots.hold`)."""

    __slots__ = ("slots", "n", "k")

    def __init__(self, slots: Slots, n: int):
        self.slots, self.n, self.k = slots, n, -1

    async def __aenter__(self) -> int:
        slots = self.slots
        with slots._mutex:
            got = slots._take(self.n)
            waiting = slots._queue_up(self.n) if got is None else None
        self.k = got if waiting is None else await slots._wait_for(self.n, waiting)
        return self.k

    async def __aexit__(self, *exc: object) -> None:
        self.slots._let_go(self.k)


class ProcessSlots(Slots):
    """Slots of this process alone (`run`): the `_held` set is the whole lock, so the steps that
    `materialize_all` runs at once share the bound, and other processes do not count."""

    def _try(self, k: int) -> bool:
        return True

    def _release(self, k: int) -> None:
        pass


class MachineSlots(Slots):
    """Slots as `flock`s on files `<dir>/<endpoint digest>/<k>` (this machine's processes)."""

    def __init__(self, endpoint: str, directory: Path):
        super().__init__(endpoint)
        self.dir = directory / hashlib.sha256(endpoint.encode()).hexdigest()[:16]
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "endpoint").write_text(endpoint + "\n")  # which endpoint these are, for whoever looks
        self._fds: dict[int, int] = {}

    def _try(self, k: int) -> bool:
        fd = self._fds.get(k)
        if fd is None:
            fd = self._fds[k] = os.open(self.dir / str(k), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _release(self, k: int) -> None:
        fcntl.flock(self._fds[k], fcntl.LOCK_UN)


class PostgresSlots(Slots):
    """Slots as PostgreSQL advisory locks (key: the endpoint's number, the slot), held by one
    session of this process (every machine's processes)."""

    def __init__(self, endpoint: str, dsn: str):
        super().__init__(endpoint)
        self.dsn = dsn
        self.space = int.from_bytes(hashlib.sha256(b"benchsmith.slots:" + endpoint.encode()).digest()[:4], "big",
                                    signed=True)
        self._conn: Any = None
        self._lock = threading.Lock()  # one session, used by one statement at a time

    def _execute(self, sql: str, k: int) -> bool:
        import psycopg2

        with self._lock:
            if self._conn is None or self._conn.closed:
                try:
                    self._conn = psycopg2.connect(self.dsn, connect_timeout=10)
                except psycopg2.Error as exc:
                    raise SlotsError(f"the endpoint slots' database did not answer: {type(exc).__name__}: "
                                     f"{str(exc).replace(self.dsn, '<dsn>')[:300]}") from None
                self._conn.autocommit = True
            with self._conn.cursor() as cur:
                cur.execute(sql, (self.space, k))
                return bool(cur.fetchone()[0])

    def _try(self, k: int) -> bool:
        return self._execute("SELECT pg_try_advisory_lock(%s, %s)", k)

    def _release(self, k: int) -> None:
        self._execute("SELECT pg_advisory_unlock(%s, %s)", k)


_ALL = PerProcess()  # (how, where, endpoint) -> this process's slots of it


def default_dir() -> Path:
    """`<temporary folder>/benchsmith-endpoint-slots-<uid>`: one per user of the machine."""
    return Path(tempfile.gettempdir()) / f"benchsmith-endpoint-slots-{os.getuid()}"


def for_endpoint(endpoint: str, how: str, directory: Path | None = None, dsn_env: str = "") -> Slots | None:
    """This process's slots of `endpoint` (a base URL) for `ledger.endpoint_slots` = `how`."""
    if how == "run":
        where = ""
    elif how == "postgres":
        where = os.environ.get(dsn_env, "").strip()
        if not where:
            raise SlotsError(f"ledger.endpoint_slots is postgres but the environment variable {dsn_env} "
                             "(ledger.slots_env) is not set; it holds a libpq connection string")
    else:
        where = str(directory or default_dir())
    with _ALL.lock:
        _ALL.here()  # a forked child holds none of its parent's locks
        key = (how, where, endpoint)
        if key not in _ALL:
            _ALL[key] = (PostgresSlots(endpoint, where) if how == "postgres" else ProcessSlots(endpoint) if how == "run"
                         else MachineSlots(endpoint, Path(where)))
        return _ALL[key]
