"""Per-item flows: every call of a step through one event loop, with no barrier between items.

A family's protocol is written as one coroutine per item (or per item and setting): it asks a
call, reads the reply, and asks the next call that reply decides (a second turn, a judge
reading, the next stage). `Ledger.run_flows` runs all of them at once in one `Session`, so an
early item's second turn or judge call starts as soon as its first reply is read, not after the
last first turn of the batch; every setting and item of a step shares each model's
concurrency, and the endpoint is busy while any work remains.

The flows are started in order, `_START_CHUNK` at a time, a turn of the event loop apart, and only
while fewer asks than twice the models' concurrency wait for their lookup or for a worker
(`Session._backlog`), and the second chunk only once the first requests are out
(`Session._first_wave_pending`): the first requests go out as soon as the first flows have asked,
and the rest start as requests go out. That orders nothing differently: a flow not yet started
would have its first call queued behind every started flow's (deepest first, then in order) anyway.

What the session does for each `await session.ask(model, request, purpose)`:

- the key is computed as `Ledger.complete` computes it (`Lane.keyed`), and a key already asked in
  this session is answered by the same future (two flows asking one request make one call);
- the asks waiting for their cache lookup go to the warehouse as one query, on the connection the
  commits use (`_db`, one task, so the two never interleave); while each of their endpoints has a
  whole wave queued, they wait for more first (up to 64 asks or 0.1 s: `_LOOKUP_GATHER`);
- a miss is queued for its endpoint (`_Pool`: one queue per endpoint and concurrency in the loop,
  shared by every session there): `concurrency` workers take requests deepest-first (a flow's
  later calls before other flows' first calls: items finish early, and a kill loses less), and
  each is sent by its lane, which holds one of the endpoint's slots (`llm_calls/slots.py`)
  while it is in flight and makes the call with the ledger's retries (`Ledger._call`); one worker
  per slot, so a request is taken off the queue only when a slot is about to be free, and a
  deeper request asked meanwhile, by any session, is not stuck behind shallower ones taken early;
- answers are committed in batches: one transaction once half a lane's back-pressure room has
  answered, nothing else is in flight, or a second has passed (a commit costs the same few ms of
  CPU whatever its size); at most `concurrency + max_unsaved` answers per lane wait for their commit, so a
  kill loses at most that many calls, however slow the disk;
- a model in batch mode (`llm_calls/batch.py`) gathers its misses until nothing else can move
  (no lookup or live call outstanding, and a few turns of the loop without a new request), then
  sends each (model, purpose) group as one batch. In files mode the flows that wait on one stop
  with `BatchPending`, and the session raises every file written this round together once the
  others are done.

A flow awaits only its session's calls (its own work between them is plain Python): that is
what lets the session tell that every flow waits on a batch.

One event loop per process (`call_loop`): `Ledger.run_flows`, called from any thread (the steps
that `materialize_all` runs at once each run in a thread of their own), runs its session in the
process's call loop, a daemon thread, and waits for it (`run_in_call_loop`). The sessions of one
loop share one HTTP client per endpoint (`_Clients`), so every call of the process to an
endpoint goes through one connection pool. Measured at 6,000 calls, concurrency 64, against the
stub (0.2 s): eight sessions, each in a thread with its own loop and client, took 1.8-2.5 ms of
CPU per call where one client alone took 1.4-1.9; the same eight sessions in one loop with one
client took 1.4-1.8. A pool that only one session's share of the calls keeps busy holds idle
connections, and httpcore probes every idle connection's socket each time it assigns a request;
eight loops also wake eight selectors and pass the interpreter lock between eight threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from llm_calls import batch
from llm_calls import http_client as http
from llm_calls.collector import PACE
from llm_calls.endpoints import default_sampling
from llm_calls.records import CallStore, keyed_request
from llm_calls.totals import CALL_THREADS, TOTALS
from llm_calls.transport import HEALTH, Progress, endpoint_unreachable, tls_context
from warehouse.per_process import PerProcess

T = TypeVar("T")

# how long the writer waits for more finished calls before a commit, unless half the back-pressure
# room is full or nothing is left in flight: a commit costs 5-9 ms of CPU whatever its size, so at
# 64 calls in flight at 0.5 s a 0.2 s wait made commits of about 25 rows (the writer's thread spent
# 0.26-0.31 ms of CPU per call) where waiting for 64 spends 0.14-0.18 (design/performance.md, the ledger's
# benchmark). What a kill may lose is bounded by the room (`Lane.unsaved`), not by this wait.
_FLUSH_GATHER_S = 1.0
_IDLE_RELEASE_S = 0.5  # without work this long, the writer yields the warehouse to a process that waits
_IDLE_HOLD_S = 5.0  # and after this long to anyone (a duckdb shell, which cannot say it waits)
# a cache lookup costs about 1 ms of CPU whatever its size: while every endpoint its asks go to
# has a whole wave queued besides (its workers will not idle meanwhile), asks wait for their lookup
# until this many have come, or for at most `_LOOKUP_GATHER_S`, looked at every `_LOOKUP_POLL_S`.
# Replies come one at a time, so looking up at once made one lookup of 3-4 asks per reply: 6,000
# lookups, 6.2 s of CPU, in an Instruction Boundary paper run of 22,500 calls. A later call of a
# flow may so go out up to `_LOOKUP_GATHER_S` later than it would have (after a few of the other
# flows' first calls): the endpoint is busy meanwhile, and the item finishes that much later.
_LOOKUP_GATHER = 64
_LOOKUP_GATHER_S = 0.1
_LOOKUP_POLL_S = 0.01
_QUIET_TURNS = 3  # loop turns without a new request before the pending batch-mode calls are sent
# flows started per turn of the event loop, while the backlog allows: a step's flows (WakenLLM FLD
# at paper scale: 2,800) started all at once ran every one to its first ask, and their lookups
# competed with that for the interpreter lock, before the first request went out (0.3-0.5 s)
_START_CHUNK = 64

# threads for the call loop's blocking work (`asyncio.to_thread`: warehouse reads and commits, a
# server's start): every session at once may wait in one, on the warehouse's lock or a start, and
# one of them waiting for a thread another waiter holds would never end (asyncio's default is 6 on
# two cores; each step's own loop had 6 before the steps shared one); created as needed
_LOOP_THREADS = 64
_WAIT_S = 1.0  # how long a thread waiting for its flows in the call loop waits between looks

# how many calls the running flow has had answered: later calls of a flow go first
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("benchsmith_flow_depth", default=0)


@dataclass(eq=False)  # in a lane's set by identity
class _Ask:
    lane: Lane
    key: str
    request: Any  # CallRequest, as the model is asked it
    params: dict[str, Any]
    purpose: str
    future: asyncio.Future
    depth: int


class Lane:
    """One model's calls in a session: its identity and defaults (for keys), and once a call
    misses the cache its endpoint, the loop's client for it (`_Clients`), the endpoint's workers
    in the loop (`_Pool`, whose workers are the process's bound) and the endpoint's slots."""

    def __init__(self, session: Session, model: str):
        ledger = session.ledger
        self.session, self.model = session, model
        self.config = ledger.registry.config.model(model)
        self.identity = ledger.registry.identity(model)
        self.defaults = default_sampling(self.config)
        self.asked = self.cached = 0
        self.waiting: set[_Ask] = set()  # submitted, not yet taken by a worker
        self._early: list[_Ask] = []  # submitted while the lane was starting
        self._sending: set[asyncio.Task] = set()  # taken by a worker: sent, or about to be
        self._starting: asyncio.Task | None = None
        self.pool: _Pool | None = None
        self.progress = None
        self.client: http.Client | None = None
        self._failed: BaseException | None = None

    def keyed(self, request: Any) -> tuple[Any, dict[str, Any], str]:
        """The request as this model is asked it (its system prompt or prefill), its parameters
        with the model's defaults, and its key: `Ledger.complete`'s, the one definition."""
        return keyed_request(self.config, self.identity, self.defaults, request)

    def submit(self, ask: _Ask) -> None:
        if self._failed is not None:
            self.session._settle(ask, exc=self._failed)
            return
        self.waiting.add(ask)
        if self.pool is not None:
            self.pool.put(ask)
            return
        self._early.append(ask)
        if self._starting is None:
            self._starting = asyncio.create_task(self._start())

    async def _start(self) -> None:
        """Resolve the endpoint (starting the embedded server if it is one), check a down one is
        back, then hand what was asked meanwhile to the endpoint's workers. A failure fails every
        call queued and to come."""
        ledger = self.session.ledger
        try:
            ep = await asyncio.to_thread(ledger.registry.endpoint, self.model)
            if ep.base_url in HEALTH.down:  # down for an earlier run or batch: back now?
                why = await asyncio.to_thread(endpoint_unreachable, ep.base_url)
                if why is None:
                    HEALTH.down.pop(ep.base_url, None)
                else:
                    HEALTH.down[ep.base_url] = f"still unreachable: {why}"
            self.ep = ep
            self.secrets = ledger.registry.secrets()
            self.shared = ledger.slots_for(ep)  # SlotsError: the slots' database unset or unreachable
            # a commit costs a few ms of CPU whatever its size: by default one commit takes a whole wave
            unsaved = ledger.config.max_unsaved or 2 * ep.concurrency
            self.enough = max(1, unsaved // 2)
            self.unsaved = asyncio.Semaphore(ep.concurrency + unsaved)  # requested but not yet committed
            self.progress = Progress(ep.name, total=0, cached=0, run_id=ledger.run_id)
            self.client = _Clients.take(ep, ledger.config.timeout_s, tls_context)
        except BaseException as exc:  # no call of this lane can be sent: each fails, none waits forever
            self._failed = exc
            for ask in self._early:
                self.session._settle(ask, exc=exc)
            self._early, self.waiting = [], set()
            self.session._room.set()
            raise
        self.pool = _Pool.take(ep.base_url, ep.concurrency)
        for ask in self._early:
            self.pool.put(ask)
        self._early = []

    def taken(self, ask: _Ask) -> asyncio.Task:
        """A worker of the pool took `ask`: send it in a task of this lane's."""
        self.waiting.discard(ask)
        self.session._sent = True
        self.session._room.set()  # one fewer waiting: `Session.run` may start more flows
        task = asyncio.create_task(self._send(ask))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)
        return task

    async def _send(self, ask: _Ask) -> None:
        ledger, session = self.session.ledger, self.session
        await self.unsaved.acquire()
        try:
            result, row = await ledger.send(self.client, self.ep, self.identity, ask.purpose, ask.key,
                                             ask.request, ask.params, self.secrets, self.shared, self.pool.pause)
        except Exception as exc:  # not a failed call (that is a result): a fault, which the flow raises
            self.unsaved.release()
            session._settle(ask, exc=exc)
            return
        self.progress.record(result.ok)
        session._commit(row, self)
        session._settle(ask, result)

    async def close(self) -> None:
        """Drop this lane's requests still queued (the flows stopped on an error) unsent; those
        being sent finish and are committed, unless the warehouse broke. Then let go of the
        endpoint's workers and client."""
        if self._starting is None:
            return
        try:
            await self._starting
        except BaseException:
            return
        for ask in self.waiting:  # left in the pool's queue; its workers skip a settled ask
            ask.future.cancel()
            self.session._live -= 1
        self.waiting = set()
        if self.session._broken is not None:
            for task in self._sending:
                task.cancel()
        await asyncio.gather(*self._sending, return_exceptions=True)
        await self.pool.give_back()
        await _Clients.give_back(self.client)
        if self.progress.ok or self.progress.failed:
            self.progress.total = self.asked
            self.progress.cached = self.cached
            self.session.ledger.log.info(self.progress.line(final=True))


class _Pool:
    """One endpoint's workers in the call loop, for the lanes of every session there that call
    it with one concurrency: one queue, deepest first, and `concurrency` workers, so the steps
    that `materialize_all` runs at once share the endpoint through one queue rather than each
    sending its own `concurrency` and waiting for the endpoint's slots (`llm_calls/slots.py`).

    With a queue and `concurrency` workers per lane, eight sessions at once took 512 requests off
    their queues for 64 slots; 448 waited for a slot, polling and waking one another, in an order
    that ignored their depth (a deeper request of one session waited behind every first call
    another had taken). Profiled in the call loop's thread (`benchmarks/llm_ledger.py --sessions 8`,
    1,024 calls), the slot waits and their wake-ups are gone, and the connection pool checks a third
    as many idle connections per request; the process's CPU per call in that benchmark did not
    move beyond its noise (0.72 and 0.73 ms above the bare client's, against 0.68 and 0.73). It is
    made when the first lane takes it and stopped when the last one
    gives it back."""

    _by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, int], _Pool]] = \
        weakref.WeakKeyDictionary()

    def __init__(self, key: tuple[str, int]):
        self.key, self.size = key, key[1]
        self.users = 0
        self._queue: asyncio.PriorityQueue[tuple[tuple[float, int], _Ask | None]] = asyncio.PriorityQueue()
        self._seq = itertools.count()
        self._workers: list[asyncio.Task] = [asyncio.create_task(self._worker()) for _ in range(key[1])]
        self.out = 0  # requests the workers are sending

    @classmethod
    def take(cls, endpoint: str, concurrency: int) -> _Pool:
        ours = cls._by_loop.setdefault(asyncio.get_running_loop(), {})  # only this loop's thread adds to it
        pool = ours.get((endpoint, concurrency))
        if pool is None:
            pool = ours[(endpoint, concurrency)] = _Pool((endpoint, concurrency))
        pool.users += 1
        return pool

    async def give_back(self) -> None:
        self.users -= 1
        if self.users:
            return
        del self._by_loop[asyncio.get_running_loop()][self.key]
        workers = list(self._workers)
        for _ in workers:
            self._queue.put_nowait(((float("inf"), next(self._seq)), None))
        await asyncio.gather(*workers, return_exceptions=True)

    def queued(self) -> int:
        """Requests waiting for a worker (a dropped one too, until a worker skips it)."""
        return self._queue.qsize()

    def put(self, ask: _Ask) -> None:
        self._queue.put_nowait(((-ask.depth, next(self._seq)), ask))

    async def _worker(self, until: asyncio.Event | None = None) -> None:
        """Take requests and send them, one at a time; a stand-in (`until`) stops after the
        request it holds once its worker is back from its backoff."""
        loop = asyncio.get_running_loop()
        while until is None or not until.is_set():
            _, ask = await self._queue.get()
            if ask is None:
                return
            if ask.future.done():  # dropped: its lane closed, or its session's warehouse broke
                continue
            self.out += 1
            if self.out >= self.size and not TOTALS.waiting.is_set():  # the whole concurrency is out
                TOTALS.waiting.set()
            try:
                # its end, awaited through a future of its own: the send is not cancelled with the
                # worker, nor the worker with the send (a broken lane cancels its own)
                ended = loop.create_future()
                ask.lane.taken(ask).add_done_callback(partial(_wake, ended))
                await ended
            finally:
                self.out -= 1

    async def pause(self, seconds: float) -> None:
        """A worker waiting out a retry's backoff: a stand-in takes requests meanwhile, so the slot
        it left is used (one worker per slot would otherwise leave it idle)."""
        back = asyncio.Event()
        stand_in = asyncio.create_task(self._worker(until=back))
        self._workers.append(stand_in)
        stand_in.add_done_callback(self._workers.remove)
        try:
            await asyncio.sleep(seconds)
        finally:
            back.set()


def _read_out(future: asyncio.Future) -> None:
    """A future's outcome read, so that asyncio does not log its error as never retrieved."""
    if not future.cancelled():
        future.exception()


def _wake(waiter: asyncio.Future, _: object) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Session:
    """The calls of many flows through one event loop: `async with Session(ledger) as s`, then
    `await s.ask(...)` from any number of tasks; `Ledger.run_flows` is the usual way in."""

    def __init__(self, ledger: Any):
        self.ledger = ledger
        self._lanes: dict[str, Lane] = {}
        self._asked: dict[str, asyncio.Future] = {}  # key -> its answer (one call per key per session)
        self._lookups: list[_Ask] = []
        self._lookup_lanes: set[Lane] = set()  # the lanes of the asks in `_lookups`
        self._lookups_since = 0.0  # when the first of `_lookups` was asked
        self._rows_since = 0.0  # when the first of `_rows` was answered
        self._rows: list[tuple[dict[str, Any], Lane]] = []
        self._known: set[str] = set()  # keys with a row (failed ones too): a commit of others is a plain insert
        self._deferred: dict[tuple[str, str], list[_Ask]] = {}  # batch-mode calls waiting for a quiet loop
        self._live = 0  # asks looked up or sent, not yet answered
        self._looking = 0  # asks in the lookup under way
        self._room = asyncio.Event()  # set when asks stop waiting (looked up, or taken by a worker)
        self._sent = False  # a worker has taken one of this session's requests
        self._pending: list[batch.BatchPending] = []
        self._wake = asyncio.Event()  # work for the warehouse: a lookup or an answer
        self._hurry = asyncio.Event()  # a lookup, or enough answers for a commit: stop gathering
        self._deferring = asyncio.Event()  # a batch-mode call waits (or the flows are done)
        self._lock = asyncio.Lock()  # the writer's connection: one thread at a time
        self._writer = None
        self._closing = False
        self._flows_done = False
        self._all_started = asyncio.Event()  # no `run` is still starting flows: batch mode waits for it
        self._all_started.set()
        self._broken: BaseException | None = None  # the warehouse failed: every open call fails with it

    async def __aenter__(self) -> Session:
        PACE.__enter__()  # the collector's pace while calls are in flight (`llm_calls/collector.py`)
        try:
            self._writer = self.ledger.warehouse.writer()
        except BaseException:
            PACE.__exit__()
            raise
        self._db_task = asyncio.create_task(self._db())
        self._batch_task = asyncio.create_task(self._batches())
        self._report_task = asyncio.create_task(self._report())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._flows_done = True
        self._deferring.set()
        self._report_task.cancel()
        await asyncio.gather(self._batch_task, return_exceptions=True)
        try:
            await asyncio.gather(*(lane.close() for lane in self._lanes.values()))
        finally:
            self._closing = True
            self._wake.set()
            self._hurry.set()
            try:
                await self._db_task
            finally:
                try:
                    await asyncio.to_thread(self._writer.close)
                finally:
                    PACE.__exit__()

    # -- asking -------------------------------------------------------------------------------

    def lane(self, model: str) -> Lane:
        lane = self._lanes.get(model)
        if lane is None:
            lane = self._lanes[model] = Lane(self, model)
        return lane

    def answered(self, model: str, results: dict[str, Any]) -> None:
        """Answers read from the warehouse already (by key), counted as cached: asked here, they
        make no lookup."""
        lane = self.lane(model)
        loop = asyncio.get_running_loop()
        for key, result in results.items():
            if key not in self._asked:
                future = self._asked[key] = loop.create_future()
                future.set_result(result)
                lane.asked += 1
                lane.cached += 1

    async def ask(self, model: str, request: Any, purpose: str = "") -> Any:
        """The `CallResult` of one request (from the cache, this session, or a call)."""
        lane = self.lane(model)
        result = await asyncio.shield(self._future(lane, lane.keyed(request), purpose))
        _DEPTH.set(_DEPTH.get() + 1)
        return with_prefill(lane.config, result)

    async def ask_all(self, model: str, requests: Sequence[Any], purpose: str = "") -> list[Any]:
        """Results of `requests`, in order, asked at once: each request's future registered here,
        then one wait for them all (not a task per request: at 20,000 calls that halved the
        collector's young collections, `llm_calls/collector.py`). A fault (not a failed call,
        which is a result) is raised as soon as it comes; a cancelled `ask_all` leaves the calls
        it shares with other flows running."""
        lane = self.lane(model)
        return await self.ask_keyed(model, [lane.keyed(r) for r in requests], purpose)

    async def ask_keyed(self, model: str, keyed: Sequence[tuple[Any, dict[str, Any], str]], purpose: str = ""
                        ) -> list[Any]:
        """`ask_all` of requests keyed for this model already (`Lane.keyed`, `records.keyed_request`:
        `Ledger.complete` keys its batch for its lookup), so none is keyed twice."""
        lane = self.lane(model)
        futures = [self._future(lane, k, purpose) for k in keyed]
        pending = {f for f in futures if not f.done()}
        while pending:  # the futures themselves: one wait for them all, none cancelled with it
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
            faults = [f for f in done if f.cancelled() or f.exception() is not None]  # each one read
            if faults:  # its error (a fault, not a failed call), as `ask` would raise it
                for f in pending:  # read when they end too, as the `ask` of each would have
                    f.add_done_callback(_read_out)
                faults[0].result()
        _DEPTH.set(_DEPTH.get() + 1)  # one step deeper, as each call of `ask` makes its flow
        return [with_prefill(lane.config, f.result()) for f in futures]

    def _future(self, lane: Lane, keyed: tuple[Any, dict[str, Any], str], purpose: str) -> asyncio.Future:
        """The future of one keyed request's answer (`Lane.keyed`): this session's, or a new one,
        looked up (and sent if missing) by the warehouse's task."""
        req, params, key = keyed
        future = self._asked.get(key)
        if future is None:
            loop = asyncio.get_running_loop()
            future = self._asked[key] = loop.create_future()
            lane.asked += 1
            self._live += 1
            if not self._lookups:
                self._lookups_since = loop.time()
                self._hurry.set()  # the writer looks whether this one can wait
            self._lookups.append(_Ask(lane, key, req, params, purpose, future, _DEPTH.get()))
            self._lookup_lanes.add(lane)
            self._wake.set()
            if len(self._lookups) >= _LOOKUP_GATHER:
                self._hurry.set()
        return future

    def _settle(self, ask: _Ask, result: Any = None, exc: BaseException | None = None) -> None:
        if not ask.future.done():
            if exc is not None:
                ask.future.set_exception(exc)
            else:
                ask.future.set_result(result)
        self._live -= 1
        if not self._live:  # nothing left in flight: the answers gathered are all that will come for now
            self._hurry.set()

    def _commit(self, row: dict[str, Any], lane: Lane) -> None:
        if not self._rows:
            self._rows_since = asyncio.get_running_loop().time()
        self._rows.append((row, lane))
        self._wake.set()
        if len(self._rows) >= lane.enough:
            self._hurry.set()

    # -- the warehouse: lookups and commits on one connection -----------------------------------

    async def _db(self) -> None:
        try:
            await self._db_loop()
        except BaseException as exc:  # a lookup or a commit failed: no flow may wait for it forever
            self._broken = exc
            for future in self._asked.values():
                if not future.done():
                    future.set_exception(exc)
            raise

    async def _db_loop(self) -> None:
        while True:
            if not self._lookups and not self._rows:
                if self._closing:
                    return
                self._wake.clear()
                idle = 0.0
                while not self._wake.is_set():
                    try:
                        await asyncio.wait_for(self._wake.wait(), _IDLE_RELEASE_S)
                    except TimeoutError:  # nothing to do for a while: the file for whoever waits for it
                        idle += _IDLE_RELEASE_S
                        if idle >= _IDLE_HOLD_S or self._writer.someone_waits():
                            async with self._lock:
                                await asyncio.to_thread(self._writer.close)
                            await self._wake.wait()
                continue
            now = asyncio.get_running_loop().time()
            if self._lookups and not self._lookups_can_wait(now):  # lookups first: they unblock flows
                await self._look_up()
                continue
            if self._rows and (self._closing or not self._live or len(self._rows) >= self._rows[0][1].enough
                               or now >= self._rows_since + _FLUSH_GATHER_S):
                # one commit for many answers (each costs a few ms of CPU), but only up to half the
                # back-pressure room, so requests keep flowing while this batch is written
                rows, self._rows = self._rows, []
                fresh = not any(r["key"] in self._known for r, _ in rows)
                async with self._lock:
                    await asyncio.to_thread(CallStore(self._writer).save, [r for r, _ in rows], fresh)
                for r, lane in rows:
                    self._known.add(r["key"])
                    lane.unsaved.release()
                continue
            # wait for more: answers to commit, asks to look up, or a queue that runs low
            waits = []
            if self._rows:
                waits.append(self._rows_since + _FLUSH_GATHER_S - now)
            if self._lookups:
                waits.append(_LOOKUP_POLL_S)
            self._hurry.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._hurry.wait(), max(0.0, min(waits)))

    def _lookups_can_wait(self, now: float) -> bool:
        """Whether the asks waiting for their lookup may wait for more (`_LOOKUP_GATHER`): not
        closing, fewer than that, not waiting `_LOOKUP_GATHER_S` yet, and each of their endpoints
        with a whole wave queued besides (its workers have that to send meanwhile)."""
        if self._closing or len(self._lookups) >= _LOOKUP_GATHER or now >= self._lookups_since + _LOOKUP_GATHER_S:
            return False
        return all(lane.pool is not None and lane.pool.queued() >= lane.pool.size for lane in self._lookup_lanes)

    async def _look_up(self) -> None:
        """Every ask waiting for its lookup, in one query: a cached answer settles its ask, a
        batch-mode model's miss waits for the batch, any other miss is sent."""
        asks, self._lookups = self._lookups, []
        self._lookup_lanes = set()
        self._looking = len(asks)
        async with self._lock:
            found, known = await asyncio.to_thread(CallStore(self._writer).lookup, [a.key for a in asks])
        self._looking = 0
        self._room.set()
        self._known |= known
        TOTALS.add(self.ledger.run_id, cached=len(found))
        for a in asks:
            if a.key in found:
                a.lane.cached += 1
                self._settle(a, found[a.key])
            elif batch.mode(self.ledger.registry.config, a.lane.model, a.purpose) is not None:
                self._live -= 1
                self._deferred.setdefault((a.lane.model, a.purpose), []).append(a)
                self._deferring.set()
            else:
                a.lane.submit(a)

    # -- batch mode ---------------------------------------------------------------------------

    async def _batches(self) -> None:
        """Send the batch-mode calls once nothing else can move: every flow waits on one."""
        while not self._flows_done:
            if not self._deferred:
                self._deferring.clear()
                await self._deferring.wait()
                continue
            await asyncio.sleep(0.01)
            if not self._all_started.is_set() or self._live or self._lookups:
                continue
            waiting = sum(map(len, self._deferred.values()))
            for _ in range(_QUIET_TURNS):
                await asyncio.sleep(0)
            if self._live or self._lookups or sum(map(len, self._deferred.values())) != waiting:
                continue
            groups, self._deferred = self._deferred, {}
            for (model, purpose), asks in groups.items():
                lane = self._lanes[model]
                todo = {a.key: (a.request, a.params) for a in asks}
                try:
                    async with self._lock:
                        out = await self.ledger.batch_turn(model, lane.identity, purpose, todo, self._known, self._writer)
                except batch.BatchPending as exc:
                    self._pending.append(exc)
                    for a in asks:
                        a.future.set_exception(exc)
                    continue
                except BaseException as exc:
                    for a in asks:
                        a.future.set_exception(exc)
                    raise
                self._known |= set(out)
                for a in asks:
                    a.future.set_result(out[a.key])

    async def _report(self) -> None:
        while True:
            await asyncio.sleep(self.ledger.config.progress_interval_s)
            for lane in self._lanes.values():
                if lane.progress is not None:
                    lane.progress.total, lane.progress.cached = lane.asked, lane.cached
                    self.ledger.log.info(lane.progress.line())

    # -- running flows ------------------------------------------------------------------------

    def _backlog(self) -> int:
        """Asks waiting for their lookup or for a worker to send them (not batch mode's)."""
        return len(self._lookups) + self._looking + sum(len(lane.waiting) for lane in self._lanes.values())

    def _backlog_limit(self) -> int:
        """Enough waiting to keep every model's workers busy through a round of lookups: twice
        their configured concurrency."""
        return max(_START_CHUNK, 2 * sum(lane.config.concurrency for lane in self._lanes.values()))

    def _first_wave_pending(self) -> bool:
        """Before the session's first request is out, whether asks of the flows started wait for
        their lookup or a worker: the next flows start once they have gone out. Started at once,
        the next chunks' flows ran to their first asks (about 1 ms of CPU each) before the first
        lookup was made, and the first request went out after 192 flows had asked, not 64."""
        return not self._sent and self._backlog() > 0

    async def run(self, flows: Iterable[Awaitable[T]]) -> list[T]:
        """Every flow at once; their results in order. A flow stopped by batch files is left
        out and the files of this round are raised together when the rest are done; any other
        error cancels the other flows and is raised."""
        async def guarded(flow: Awaitable[T]) -> T | None:
            try:
                return await flow
            except batch.BatchPending:
                return None

        try:
            async with asyncio.TaskGroup() as group:
                tasks = []
                self._all_started.clear()
                try:
                    for f in flows:
                        tasks.append(group.create_task(guarded(f)))
                        if len(tasks) % _START_CHUNK == 0:
                            await asyncio.sleep(0)  # the flows started so far run to their first ask
                            while self._backlog() > self._backlog_limit() or self._first_wave_pending():
                                self._room.clear()
                                await self._room.wait()
                finally:
                    self._all_started.set()
        except BaseExceptionGroup as eg:
            raise _first(eg) from None
        if self._pending:
            raise batch.BatchPending.combined(self._pending)
        return [t.result() for t in tasks]


class _Clients:
    """One HTTP client (`llm_calls/http_client.py`) per endpoint (URL, key, timeout) per event loop, for every session's
    lane in that loop; closed when the last lane using it closes. A client belongs to its loop
    (its connections are that loop's sockets), so each loop has its own."""

    _lock = threading.Lock()  # the loops of several threads add their entries at once
    _by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple, list]] = weakref.WeakKeyDictionary()

    @classmethod
    def take(cls, ep: Any, timeout_s: float, tls: Callable[[], Any]) -> http.Client:
        with cls._lock:
            ours = cls._by_loop.setdefault(asyncio.get_running_loop(), {})
        key = (ep.base_url, ep.api_key, timeout_s)
        entry = ours.get(key)
        if entry is None:
            client = http.Client(ep.base_url, ep.api_key, timeout_s, tls() if ep.base_url.startswith("https") else None)
            entry = ours[key] = [client, 0, key]
        entry[1] += 1
        return entry[0]

    @classmethod
    async def give_back(cls, client: http.Client) -> None:
        ours = cls._by_loop.get(asyncio.get_running_loop(), {})
        entry = next((e for e in ours.values() if e[0] is client), None)
        if entry is not None:
            entry[1] -= 1
            if entry[1] > 0:
                return
            del ours[entry[2]]
        await client.close()


_call_loop = PerProcess()  # "loop" -> the process's call loop


def new_call_loop() -> asyncio.AbstractEventLoop:
    """A new event loop for the calls: uvloop's (libuv, written in Cython) where it is installed
    (not on Windows), else the standard library's. Against a loopback server that answers in 5 ms,
    at concurrency 256, 20,000 calls through `Ledger.complete`, every call stored, the two side by
    side in one run (`benchmarks/peer_calls.py --n 20000 --settings 0.005:256 --baseline`, 2 cores):
    2,926-2,930 calls/s on uvloop's loop against 2,716-2,809 on asyncio's, quiet (4-8 % more);
    1,686-1,692 against 1,640-1,751 beside two CPU-bound processes (no difference beyond the spread).
    The loop is a small part of a call's CPU; the HTTP client's request and reply are most of it."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def call_loop() -> asyncio.AbstractEventLoop:
    """The process's event loop for model calls (`new_call_loop`), running in a daemon thread of
    its own (started on first use; a forked child starts its own)."""
    with _call_loop.lock:
        if "loop" not in _call_loop.here():
            loop = new_call_loop()
            loop.set_default_executor(ThreadPoolExecutor(_LOOP_THREADS, thread_name_prefix=f"{CALL_THREADS}-io"))
            threading.Thread(target=loop.run_forever, name=CALL_THREADS, daemon=True).start()
            _call_loop["loop"] = loop
        return _call_loop["loop"]


def run_in_call_loop(coro: Coroutine[Any, Any, T]) -> T:
    """`coro` run in the process's call loop, in the caller's context (its context variables: a
    Dagster run's captured output, `runner/compute_logs.py`); waits for its end and returns its
    result or raises its error. Interrupted while waiting (Ctrl-C), it cancels `coro`, waits until
    that has wound down (the calls in flight answered and committed, as a cancelled session
    does) and raises the interruption."""
    loop = call_loop()
    context = contextvars.copy_context()
    ended = threading.Event()
    outcome: list[tuple[bool, Any]] = []
    task: list[asyncio.Task] = []

    async def main() -> None:
        try:
            outcome.append((True, await coro))
        except BaseException as exc:  # raised in the waiting thread: a KeyboardInterrupt here would stop the loop
            outcome.append((False, exc))

    def start() -> None:
        task.append(loop.create_task(main(), context=context))
        task[0].add_done_callback(lambda _: ended.set())  # set even if it is cancelled before it starts

    loop.call_soon_threadsafe(start)
    try:
        while not ended.wait(_WAIT_S):  # timed: once polars is imported (the warehouse does), an untimed wait ignores Ctrl-C
            pass
    except BaseException:
        loop.call_soon_threadsafe(lambda: task[0].cancel())  # after `start`: the loop runs them in order
        ended.wait()
        coro.close()  # never started: no warning that it was never awaited
        raise
    ok, value = outcome[0]
    if ok:
        return value
    raise value


def with_prefill(config: Any, result: Any) -> Any:
    """A `CallResult` as the flow sees it: with the start of the reply the model was given to
    continue (its configured `prefill`), which the stored text leaves out."""
    return replace(result, prefill=config.prefill) if config.prefill else result


def _first(eg: BaseExceptionGroup) -> BaseException:
    exc: BaseException = eg
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def run_flows(ledger: Any, build: Callable[[Session], Iterable[Awaitable[T]]]) -> list[T]:
    async with Session(ledger) as session:
        return await session.run(build(session))

