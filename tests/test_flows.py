"""Per-item flows (llm_calls/flows.py): an item's next call starts as soon as its own reply is read,
not after the batch; the session keeps the ledger's guarantees (one call per key, answers stored,
failures recorded, a broken warehouse fails the flows instead of hanging them)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from evaluations.ib import FOLLOW_UP, Item, Runner
from evaluations.waken import STIMULATION, Pipeline
from evaluations.waken import Item as WakenItem
from llm_calls import CallRequest, Ledger, ModelRegistry
from llm_calls.records import CallStore
from llm_calls.stub_server import StubServer
from tests.conftest import stub_config, user
from tests.test_waken_pipeline import scripted
from warehouse import Warehouse


def _chat(stub: StubServer) -> list[dict]:
    return [r for r in stub.requests if r["path"].endswith("/chat/completions")]


def _last_first_call_held(responder: Callable[[dict], str | None], firsts: int, is_first: Callable[[dict], bool],
                          later_kinds: dict[str, Callable[[dict], bool]]) -> Callable[[dict], str | None]:
    """`responder`, except that the reply to the `firsts`-th first call waits (at most 10 s, inside
    the test's 30 s client timeout) until a request of every later kind has arrived. Whether a
    later call goes out before the batch's last first call is answered then does not depend on how
    fast this machine reads replies: a run whose later calls wait for every first call sends none
    while the last is held, so its test fails (after the 10 s); a run whose flows go on sends them
    through the other slots. (Unheld, 24 first calls at 0.02 s gave a loaded machine 0.12 s to read
    a reply and send the next call, and CI once missed it by 0.1 ms.)"""
    lock, later_arrived = threading.Lock(), threading.Event()
    firsts_seen: list[dict] = []
    kinds_seen: set[str] = set()

    def respond(body: dict) -> str | None:
        with lock:
            kinds_seen.update(kind for kind, is_kind in later_kinds.items() if is_kind(body))
            if kinds_seen == set(later_kinds):
                later_arrived.set()
            if is_first(body):
                firsts_seen.append(body)
            last = is_first(body) and len(firsts_seen) == firsts
        if last:
            later_arrived.wait(10.0)
        return responder(body)

    return respond


def _ib_items(n: int) -> list[Item]:
    return [Item(f"s{k}:complete", "single", "tense", "complete", (str(k), str(k + 1), "All other options are false"),
                 frozenset({1}), "", f"What is {k} + 0?") for k in range(n)]


def _ib_responder(body):
    text = body["messages"][-1]["content"]
    if text.startswith("A model answered a question with"):
        return "1"
    if text == FOLLOW_UP:
        return "Answer: 1"
    return "I am not sure about this one."  # no option: the judge reads it


@pytest.mark.slow
def test_an_early_items_second_turn_and_judge_call_start_before_the_batchs_last_first_turn_is_answered(tmp_path):
    """IB multi-turn and vanilla over 24 items at concurrency 4: the first turns are one batch of
    48 requests; a flow's later calls go first, so item 0's judge call and second turn are sent
    while first turns are still being answered (the last one's reply is held until they are)."""
    def is_judge(body):
        return body["messages"][-1]["content"].startswith("A model answered")

    responder = _last_first_call_held(
        _ib_responder, 24, lambda b: len(b["messages"]) == 1 and not is_judge(b),
        {"judge": is_judge, "second turn": lambda b: len(b["messages"]) == 3})
    with StubServer(responder=responder, delay_s=0.02) as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "concurrency": 4}}, ledger={"timeout_s": 30.0})
        with ModelRegistry(cfg) as reg:
            runner = Runner(Ledger(Warehouse(cfg.warehouse_path()), reg), "stub", "stub", "stub",
                            {"temperature": 0.0, "max_tokens": 32})
            runner.run(_ib_items(24), [], ["vanilla", "multi_turn"])
        calls = _chat(stub)
    first = [c for c in calls if len(c["body"]["messages"]) == 1
             and not c["body"]["messages"][0]["content"].startswith("A model answered")]
    judge = [c for c in calls if c["body"]["messages"][-1]["content"].startswith("A model answered")]
    second = [c for c in calls if len(c["body"]["messages"]) == 3]
    # vanilla's request is multi-turn's first turn: one call for both
    assert len(first) == 24 and len(second) == 24 and len(judge) == 24
    last_first_answered = max(c["answered"] for c in first)
    assert min(c["time"] for c in judge) < last_first_answered
    assert min(c["time"] for c in second) < last_first_answered
    # and the rows are whole: every item's judge reading and second turn are recorded
    by = {(r["setting"], r["item_id"]): r for r in runner.responses}
    assert len(by) == 48 and all(r["method"] == "judge" for (s, _), r in by.items() if s == "vanilla")
    assert [r["item_id"] for r in runner.responses[:24]] == [i.item_id for i in _ib_items(24)]  # in item order


@pytest.mark.slow
def test_an_early_items_stage_one_starts_before_the_last_direct_answer_is_answered(tmp_path):
    items = [WakenItem(f"s{k}", "fact", "True", f"sent1: Ada{k} is red", f"Ada{k} is red") for k in range(24)]
    responder = _last_first_call_held(
        scripted, 24, lambda b: b["messages"][0]["content"].startswith("Read the facts"),
        {"stage 1": lambda b: b["messages"][0]["content"].startswith(STIMULATION["detailed"][:40])})
    with StubServer(responder=responder, delay_s=0.02) as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "concurrency": 4}}, ledger={"timeout_s": 30.0})
        with ModelRegistry(cfg) as reg:
            rows = Pipeline(Ledger(Warehouse(cfg.warehouse_path()), reg), "stub", "stub", items, 0.5, 1.0, 64,
                            seed=1).run([1.0], [])
        calls = _chat(stub)
    direct = [c for c in calls if c["body"]["messages"][0]["content"].startswith("Read the facts")]
    stage1 = [c for c in calls if c["body"]["messages"][0]["content"].startswith(STIMULATION["detailed"][:40])]
    assert len(direct) == 24 and stage1
    assert min(c["time"] for c in stage1) < max(c["answered"] for c in direct)
    # every item is in the Vague Perception set, so Remind-then-Guide drew its labels over all 24
    rtg = [r for r in rows if r["step"] == "rtg_label_stage1"]
    assert len(rtg) == 24 and all(r["outcome"] == "FC" for r in rows if r["step"] == "stage1")


def test_two_flows_asking_one_request_make_one_call_and_both_get_its_answer(stub, stub_ledger):
    req = CallRequest(user("the same question"))

    async def flow(s):
        return (await s.ask("stub", req, "t.one")).text

    a, b, c = stub_ledger.run_flows(lambda s: [flow(s), flow(s), flow(s)])
    assert a == b == c and len(_chat(stub)) == 1
    assert stub_ledger.warehouse.scalar("SELECT count(*) FROM llm.calls") == 1
    # and a second session answers it from the warehouse without a request
    assert stub_ledger.run_flows(lambda s: [flow(s)]) == [a] and len(_chat(stub)) == 1


@pytest.mark.slow
def test_a_flows_later_calls_go_before_other_flows_first_calls(tmp_path):
    """Concurrency 1, 0.2 s per reply: flow 0's second call is sent as soon as the slot is free
    after it was asked (the call sent meanwhile is first 1), ahead of the 8 first calls the other
    flows queued before it. A worker takes a request only when it can send it: a second worker
    holding first 2 while first 1 is out would send it ahead of second 0."""
    with StubServer(delay_s=0.2) as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "concurrency": 1}})
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)

            async def flow(s, k):
                await s.ask("stub", CallRequest(user(f"first {k}")), "t.first")
                await s.ask("stub", CallRequest(user(f"second {k}")), "t.second")

            ledger.run_flows(lambda s: [flow(s, k) for k in range(10)])
        asked = [c["body"]["messages"][-1]["content"] for c in _chat(stub)]
    assert asked[:3] == ["first 0", "first 1", "second 0"]
    assert len(asked) == 20


@pytest.mark.slow
def test_a_steps_flows_start_as_its_requests_go_out_not_all_before_the_first(tmp_path, monkeypatch):
    """300 flows at concurrency 4: the session starts flows 64 at a time, and more only while at
    most twice the concurrency (here 64) of asks wait for a lookup or a worker; the second chunk
    only once the first requests are on their way. So the first request is sent when only the
    first 64 flows have started, the last flow starts only once most requests have gone out (all
    started at once, none would have), and every flow still runs once."""
    started_when_sent: list[int] = []
    call = Ledger.send

    async def first_calls_counted(self, *args, **kwargs):
        started_when_sent.append(len(sent_when_started))
        return await call(self, *args, **kwargs)

    monkeypatch.setattr(Ledger, "send", first_calls_counted)
    with StubServer(delay_s=0.01) as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "concurrency": 4}})
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)
            sent_when_started: list[int] = []

            async def flow(s, k):
                sent_when_started.append(len(_chat(stub)))
                return (await s.ask("stub", CallRequest(user(f"q {k}")), "t.q")).ok

            assert all(ledger.run_flows(lambda s: [flow(s, k) for k in range(300)]))
        asked = [c["body"]["messages"][-1]["content"] for c in _chat(stub)]
    assert sorted(asked) == sorted(f"q {k}" for k in range(300))
    assert sent_when_started[:64] == [0] * 64
    assert started_when_sent[0] == 64  # the next chunk waited for the first request
    assert sent_when_started[-1] >= 150  # at least 300 - 64 were taken by a worker by then, less those in flight


@pytest.mark.slow
@pytest.mark.parametrize("concurrency", [2, 4])
def test_the_process_counts_as_waiting_on_the_endpoint_once_its_whole_concurrency_is_out(
        tmp_path, concurrency):
    """`TOTALS.waiting` (when the run command draws its first figure): three requests at 0.5 s. At
    concurrency 2 it is set while both slots are out and nothing has been answered; at 4 the
    concurrency is never all out, and answers do not set it."""
    from llm_calls.totals import TOTALS

    seen: list[tuple[int, int]] = []
    done: list[bool] = []
    with StubServer(delay_s=0.5) as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "concurrency": concurrency}})
        TOTALS.reset()

        def watch() -> None:
            if TOTALS.waiting.wait(30) and not done:
                ended = TOTALS.answered + TOTALS.failed
                time.sleep(0.2)  # the requests taken reach the stub (they are answered after 0.5 s)
                seen.append((ended, stub.in_flight))

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with ModelRegistry(cfg) as reg:
                ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)

                async def flow(s, k):
                    return await s.ask("stub", CallRequest(user(f"q {k}")), "t.q")

                assert all(r.ok for r in ledger.run_flows(lambda s: [flow(s, k) for k in range(3)]))
            answered = TOTALS.answered
        finally:
            done.append(True)
            TOTALS.waiting.set()
            watcher.join(timeout=10)
            TOTALS.reset()
    assert answered == 3 and seen == ([(0, 2)] if concurrency == 2 else [])


@pytest.mark.slow
def test_a_slot_left_by_a_call_backing_off_is_used_by_other_requests(tmp_path):
    """Concurrency 1: a call told to retry after 1 s (HTTP 429, Retry-After) leaves its slot to a
    stand-in worker: the four other requests (0.2 s each) are sent and answered during the wait,
    and the retry goes last."""
    with StubServer(delay_s=0.2) as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "concurrency": 1}})
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)
            texts = ["[[stub: status=429 times=1 retry_after=1]] wait", *(f"other {k}" for k in range(4))]

            async def flow(s, text):
                return await s.ask("stub", CallRequest(user(text)), "t.retry")

            results = ledger.run_flows(lambda s: [flow(s, t) for t in texts])
        asked = [c["body"]["messages"][-1]["content"] for c in _chat(stub)]
    assert all(r.ok for r in results) and results[0].attempts == 2
    assert asked == [texts[0], *texts[1:], texts[0]]


def test_a_failed_call_in_a_flow_is_a_failure_and_the_flow_goes_on(stub, stub_ledger):
    async def flow(s):
        bad = await s.ask("stub", CallRequest(user("[[stub: status=400]] no")), "t.bad")
        good = await s.ask("stub", CallRequest(user("fine")), "t.good")
        return bad.ok, bad.text, good.ok

    assert stub_ledger.run_flows(lambda s: [flow(s)]) == [(False, None, True)]
    assert stub_ledger.warehouse.rows("SELECT purpose, status FROM llm.calls ORDER BY purpose") == [
        {"purpose": "t.bad", "status": "failed"}, {"purpose": "t.good", "status": "ok"}]


def test_an_error_in_one_flow_stops_the_others_and_is_raised(stub, stub_ledger):
    async def fails(s):
        await s.ask("stub", CallRequest(user("one")), "t")
        raise ValueError("a protocol bug")

    async def waits(s):
        for k in range(50):
            await s.ask("stub", CallRequest(user(f"more {k}")), "t")

    with pytest.raises(ValueError, match="a protocol bug"):
        stub_ledger.run_flows(lambda s: [fails(s), waits(s)])
    assert len(_chat(stub)) < 50  # the other flow was stopped, not run to its end


def test_a_warehouse_that_fails_a_commit_fails_the_flows_instead_of_hanging_them(stub, stub_ledger, monkeypatch):
    from warehouse.connection import Writer

    def broken(self, *a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(Writer, "upsert", broken)

    async def flow(s, k):
        await s.ask("stub", CallRequest(user(f"a {k}")), "t")
        await s.ask("stub", CallRequest(user(f"b {k}")), "t")

    async def bounded():
        return await asyncio.wait_for(asyncio.to_thread(stub_ledger.run_flows,
                                                        lambda s: [flow(s, k) for k in range(20)]), 30)

    with pytest.raises(OSError, match="disk full"):
        asyncio.run(bounded())


def test_a_partly_cached_batch_looks_up_each_answered_key_once(stub, stub_ledger, monkeypatch):
    """`complete` reads the batch's answers first; the session that asks the misses knows them, so
    only the misses are looked up again (and sent)."""
    requests = [CallRequest(user(f"q {k}")) for k in range(10)]
    stub_ledger.complete("stub", requests[:6])
    looked_up: list[str] = []
    cached = CallStore.lookup

    def counting(self, keys):
        looked_up.extend(keys)
        return cached(self, keys)

    monkeypatch.setattr(CallStore, "lookup", counting)
    results = stub_ledger.complete("stub", requests)
    assert [r.cached for r in results] == [True] * 6 + [False] * 4
    assert len(looked_up) == 10 + 4 and len(_chat(stub)) == 10


def test_complete_keys_each_request_once_and_the_session_sends_it_under_that_key(stub, stub_ledger, monkeypatch):
    """`complete` keys its batch to look it up; the session that asks the misses takes those keys
    (each request keyed once, 20,000 keys were 0.3 s of a 5 ms run), and stores every answer under
    the key a later batch keys it by."""
    from llm_calls import flows, ledger, records

    keyed_by: list[str] = []

    def counting(*args):
        keyed_by.append(args[-1].messages[0]["content"])
        return records.keyed_request(*args)

    monkeypatch.setattr(ledger, "keyed_request", counting)
    monkeypatch.setattr(flows, "keyed_request", counting)
    requests = [CallRequest(user(f"q {k}")) for k in range(8)] + [CallRequest(user("q 0"))]
    results = stub_ledger.complete("stub", requests)
    assert sorted(keyed_by) == sorted(f"q {k}" for k in [*range(8), 0])  # once each, the repeat too
    assert [r.ok for r in results] == [True] * 9 and results[0].key == results[8].key
    monkeypatch.undo()
    again = stub_ledger.complete("stub", requests)
    assert [r.cached for r in again] == [True] * 9 and [r.key for r in again] == [r.key for r in results]
    assert len(_chat(stub)) == 8


def test_a_fault_while_sending_fails_the_flow_instead_of_hanging_it(stub, stub_ledger, monkeypatch):
    """A failed call is a result; anything else raised while sending (a bug, the slots' database
    gone) reaches the flow that asked, which raises it: no flow waits forever for that answer."""
    async def broken(*args, **kwargs):
        raise RuntimeError("the send broke")

    monkeypatch.setattr(Ledger, "send", broken)

    async def flow(s):
        return await s.ask("stub", CallRequest(user("q")), "t")

    raised: list[BaseException] = []

    def step():
        try:
            stub_ledger.run_flows(lambda s: [flow(s)])
        except BaseException as exc:  # noqa: BLE001 (what the step got is the subject)
            raised.append(exc)

    waiting = threading.Thread(target=step, daemon=True)  # left behind if it hangs: the test fails instead
    waiting.start()
    waiting.join(30)
    assert not waiting.is_alive(), "the flow still waits for the answer"
    assert [str(e) for e in raised] == ["the send broke"]


def test_a_lane_that_cannot_start_fails_its_calls_instead_of_waiting_forever(tmp_path, monkeypatch):
    """Anything that stops a model's lane from starting (here: the endpoint slots' database named by a
    variable that is not set) is raised to the flows that asked, promptly: none is left waiting."""
    from llm_calls.slots import SlotsError

    monkeypatch.delenv("BENCHSMITH_NO_SUCH_SLOTS_DSN", raising=False)
    with StubServer() as stub:
        cfg = stub_config(stub, tmp_path, ledger={"endpoint_slots": "postgres",
                                                   "slots_env": "BENCHSMITH_NO_SUCH_SLOTS_DSN"})
        outcome: list[BaseException | object] = []
        with ModelRegistry(cfg) as registry:
            ledger = Ledger(Warehouse(cfg.warehouse_path()), registry)

            def ask() -> None:
                try:
                    outcome.append(ledger.complete("stub", [CallRequest(user("a")), CallRequest(user("b"))]))
                except BaseException as exc:  # noqa: BLE001 - the test reads what was raised
                    outcome.append(exc)

            worker = threading.Thread(target=ask, daemon=True)
            worker.start()
            worker.join(timeout=30)
        assert not worker.is_alive(), "the calls waited for a lane that never started"
    assert len(outcome) == 1 and isinstance(outcome[0], SlotsError), outcome
    assert "BENCHSMITH_NO_SUCH_SLOTS_DSN" in str(outcome[0]) and not _chat(stub)  # no request went out


def test_a_call_waiting_for_a_slot_this_process_holds_is_woken_by_its_release_not_by_polling():
    """Steps at once wait for an endpoint's slots in several event loops of one process: a waiter
    is woken by the release (within milliseconds), and while every slot it may take is this
    process's it does not poll the locks (polling from every waiting worker cost a tenth of a paper
    run's CPU)."""
    from llm_calls.slots import ProcessSlots

    slots = ProcessSlots("http://127.0.0.1:9/v1")
    tries = 0
    take = slots._take

    def counted(n):
        nonlocal tries
        tries += 1
        return take(n)

    slots._take = counted  # type: ignore[method-assign]
    held, released, got_at = threading.Event(), [0.0], [0.0]

    async def first():
        async with slots.hold(1):
            held.set()
            await asyncio.sleep(1.0)
            released[0] = time.monotonic()

    async def second():
        async with slots.hold(1):
            got_at[0] = time.monotonic()

    a = threading.Thread(target=asyncio.run, args=(first(),))
    a.start()
    assert held.wait(10)
    before = tries
    b = threading.Thread(target=asyncio.run, args=(second(),))
    b.start()
    a.join(10)
    b.join(10)
    assert got_at[0] >= released[0] > 0  # never two holders of the one slot
    assert got_at[0] - released[0] < 0.1  # woken by the release
    assert tries - before <= 4, tries - before  # its first try, a safety poll at 0.5 s, the one after the wake-up


def test_a_slot_is_taken_among_the_free_ones_from_a_random_start(tmp_path):
    """`Slots._take(n)`: a slot of the first n that neither this process nor another holds, none
    when every one is held; the first one tried is drawn, so processes that start together spread
    over the slots instead of all trying slot 0."""
    import os

    from llm_calls.slots import MachineSlots

    ours, theirs = MachineSlots("http://127.0.0.1:9/v1", tmp_path), MachineSlots("http://127.0.0.1:9/v1", tmp_path)
    assert theirs._take(1) == 0  # another process holds slot 0 (its flock)
    taken = [ours._take(4) for _ in range(3)]
    assert sorted(taken) == [1, 2, 3]  # each free slot once, never the one held elsewhere
    assert ours._take(4) is None and ours._take(5) == 4  # all of the first 4 held; the 5th is free
    firsts = set()
    for _ in range(200):
        fresh = MachineSlots("http://127.0.0.1:9/v2", tmp_path)
        k = fresh._take(8)
        firsts.add(k)
        fresh._release(k)
        fresh._held.discard(k)
        for fd in fresh._fds.values():
            os.close(fd)
    assert firsts == set(range(8))  # P(some slot never first in 200 draws) < 8 * (7/8) ** 200, about 2e-11


@pytest.mark.slow
def test_steps_running_at_once_in_threads_share_the_call_loop_and_one_client(tmp_path, monkeypatch):
    """Four steps at once, each in a thread with its own ledger and registry, as `materialize_all`
    runs them: their flows run in the process's call loop, in the caller's context, and every
    call goes through one client (one connection pool), closed when the last session ends."""
    import contextvars

    from llm_calls import http_client

    made: list[http_client.Client] = []

    class Counted(http_client.Client):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

    monkeypatch.setattr(http_client, "Client", Counted)
    step = contextvars.ContextVar("step", default=None)
    start = threading.Barrier(4)
    seen: dict[int, list[tuple[str, int | None]]] = {}

    async def flow(s, k, n):
        r = await s.ask("stub", CallRequest(user(f"step {k} question {n}")), "t")
        seen.setdefault(k, []).append((threading.current_thread().name, step.get()))
        return r.text

    def run_step(k):
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(Warehouse(cfg.warehouse_path(), lock_timeout_s=30), reg)
            step.set(k)
            start.wait()
            out[k] = ledger.run_flows(lambda s: [flow(s, k, n) for n in range(8)])

    out: dict[int, list[str]] = {}
    with StubServer(delay_s=0.5) as stub:
        cfg = stub_config(stub, tmp_path)  # written once: four threads writing one file would read it half-written
        threads = [threading.Thread(target=run_step, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(_chat(stub)) == 32
    assert sorted(out) == [0, 1, 2, 3] and all(len(texts) == 8 and all(texts) for texts in out.values())
    assert {k: set(v) for k, v in seen.items()} == {k: {("benchsmith-calls", k)} for k in range(4)}
    assert len(made) == 1 and made[0].is_closed()


@pytest.mark.slow
def test_steps_at_once_share_one_queue_per_endpoint_so_a_deeper_call_of_one_goes_before_anothers_first_calls(
        tmp_path):
    """Two steps at once against one endpoint at concurrency 2, each with its own ledger: step B's
    two first calls take both slots; step A then asks six first calls. When B's first reply comes
    (0.3 s), a slot goes to A's first call, and B's flow asks its second call: deeper, it is sent
    at the next free slot (0.8 s), before A's second first call. With a queue and workers per step,
    A's workers held two of its first calls waiting for a slot before B's worker took B's second,
    and the slots are given first come, first served: A's second went first."""

    def run_step(name, flows_of):
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(Warehouse(cfg.warehouse_path(), lock_timeout_s=30), reg)
            ledger.run_flows(flows_of)

    async def b_x(s):
        await s.ask("stub", CallRequest(user("b x first [[stub: delay=0.3]]")), "t")
        await s.ask("stub", CallRequest(user("b x second [[stub: delay=0.1]]")), "t")

    async def b_y(s):
        await s.ask("stub", CallRequest(user("b y first [[stub: delay=0.9]]")), "t")

    async def a(s, k):
        await s.ask("stub", CallRequest(user(f"a {k} [[stub: delay=0.5]]")), "t")

    with StubServer() as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "concurrency": 2}})
        step_b = threading.Thread(target=run_step, args=("b", lambda s: [b_x(s), b_y(s)]))
        step_b.start()
        deadline = time.monotonic() + 30
        while len(_chat(stub)) < 2 and time.monotonic() < deadline:  # B's first calls are out
            time.sleep(0.01)
        step_a = threading.Thread(target=run_step, args=("a", lambda s: [a(s, k) for k in range(6)]))
        step_a.start()
        step_a.join(60)
        step_b.join(60)
        asked = [c["body"]["messages"][-1]["content"].split(" [[")[0] for c in _chat(stub)]
    assert sorted(asked) == sorted(["b x first", "b y first", "b x second"] + [f"a {k}" for k in range(6)])
    assert asked[:2] in (["b x first", "b y first"], ["b y first", "b x first"])
    assert asked.index("b x second") < asked.index("a 1"), asked


@pytest.mark.slow
@pytest.mark.parametrize("concurrency", [1, 10])
def test_asks_wait_for_their_lookup_together_only_while_their_endpoint_has_a_wave_queued(tmp_path, monkeypatch,
                                                                                        concurrency):
    """A cache lookup costs the same whatever its size. Eight asks made 30 ms apart once the first
    reply is in: at concurrency 1, with three first calls still queued for the one slot, they wait
    for their lookup together (one to three queries, not eight: each waits 0.1 s at most,
    `_LOOKUP_GATHER_S`); at concurrency 10, nothing queued, each is looked up as it is asked (a
    worker would otherwise idle)."""
    looked_up: list[list[str]] = []
    cached = CallStore.lookup

    def recording(self, keys):
        looked_up.append(list(keys))
        return cached(self, keys)

    monkeypatch.setattr(CallStore, "lookup", recording)
    late = [CallRequest(user(f"late {i} [[stub: delay=0.05]]")) for i in range(8)]

    async def first(s, k):
        await s.ask("stub", CallRequest(user(f"first {k} [[stub: delay=0.3]]")), "t")

    async def spaced(s):
        await first(s, 0)  # once the first reply is in: at concurrency 1, three first calls still queued
        asks = []
        for request in late:
            asks.append(asyncio.ensure_future(s.ask("stub", request, "t")))
            await asyncio.sleep(0.03)
        return [r.ok for r in await asyncio.gather(*asks)]

    with StubServer() as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "concurrency": concurrency}})
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)
            out = ledger.run_flows(lambda s: [*(first(s, k) for k in range(5)), spaced(s)])
            late_keys = set(ledger.keys("stub", late)[2])
        assert out[-1] == [True] * 8 and len(_chat(stub)) == 13
    lookups_with_late = [keys for keys in looked_up if late_keys & set(keys)]
    assert sum(len(late_keys & set(keys)) for keys in lookups_with_late) == 8
    if concurrency == 1:
        assert len(lookups_with_late) <= 3, [len(k) for k in lookups_with_late]
    else:
        assert len(lookups_with_late) >= 6, [len(k) for k in lookups_with_late]


def test_an_interrupted_wait_for_the_call_loop_winds_the_flows_down_before_it_raises():
    """Ctrl-C while a thread waits for its flows in the call loop: the flows are cancelled, and
    the interruption is raised only once they have finished winding down (a session's in-flight
    calls committed), not while they still run."""
    import signal

    from llm_calls import flows

    events: list[str] = []

    async def flows_of_a_step():
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(0.3)  # the in-flight calls answered and committed
            events.append("wound down")
            raise

    main = threading.get_ident()
    # Python's own Ctrl-C handler: an earlier test's Dagster run may have left its own installed
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Timer(0.3, signal.pthread_kill, (main, signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            flows.run_in_call_loop(flows_of_a_step())
    finally:
        signal.signal(signal.SIGINT, before)
    events.append("raised")
    assert events == ["wound down", "raised"]
    assert flows.run_in_call_loop(asyncio.sleep(0, "the loop still runs")) == "the loop still runs"


def test_the_call_loop_is_uvloops_where_it_is_installed_and_asyncios_where_not(monkeypatch):
    """The calls run on uvloop's event loop (`new_call_loop`), whose turns cost less CPU than the
    selector loop's; without uvloop (Windows, which it does not build for) the standard loop runs
    the same flows. Both loops run a flow that calls another thread's work and sets a context
    variable, as a step's calls do."""
    import contextvars
    import sys

    import uvloop

    from llm_calls import flows

    assert isinstance(flows.call_loop(), uvloop.Loop)
    seen = contextvars.ContextVar("seen", default="none")

    async def flow() -> tuple[str, int]:
        seen.set("set in the flow")
        return seen.get(), await asyncio.to_thread(lambda: 2 + 2)

    for loop in (flows.new_call_loop(), None):
        if loop is None:
            monkeypatch.setitem(sys.modules, "uvloop", None)  # `import uvloop` raises ImportError
            loop = flows.new_call_loop()
            assert isinstance(loop, asyncio.BaseEventLoop) and not isinstance(loop, uvloop.Loop)
        try:
            assert loop.run_until_complete(flow()) == ("set in the flow", 4)
        finally:
            loop.close()


def test_with_most_slots_held_here_a_take_walks_only_the_others_and_finds_each_released_one():
    """At concurrency 256 nearly every slot is this process's at any moment; `_take` then walks the
    few it does not hold (a walk past every held one cost 4 % of the call loop's CPU at 5 ms a call),
    and still takes only free ones, each released one again, and none when all are held."""
    from llm_calls.slots import ProcessSlots

    slots = ProcessSlots("http://127.0.0.1:9/v1")
    tried: list[int] = []
    slots._try = lambda k: tried.append(k) or True  # type: ignore[method-assign]
    taken = [slots._take(256) for _ in range(256)]
    assert sorted(taken) == list(range(256)) and slots._take(256) is None
    for k in (17, 200, 3):
        slots._give_back(k)

    class Looked(set):  # counts the held set's lookups: one per slot walked past or tried
        looks = 0

        def __contains__(self, k):
            Looked.looks += 1
            return super().__contains__(k)

    slots._held = Looked(slots._held)
    tried.clear()
    again = {slots._take(256) for _ in range(3)}
    assert again == {3, 17, 200} and len(tried) == 3 and Looked.looks <= 6  # no held slot walked past
    assert slots._take(256) is None and slots._take(300) in range(256, 300)  # a larger concurrency: the slots above


def test_a_cancelled_ask_all_leaves_the_call_it_shares_with_another_flow_running(tmp_path):
    """`ask_all` waits on the session's futures themselves: cancelling it (its flow stopped) must
    not cancel a call another flow of the session waits for too."""
    with StubServer(delay_s=0.3) as stub:
        cfg = stub_config(stub, tmp_path)
        with ModelRegistry(cfg) as registry:
            ledger = Ledger(Warehouse(cfg.warehouse_path()), registry)
            shared, other = CallRequest(user("shared question")), CallRequest(user("another question"))

            async def main():
                from llm_calls.flows import Session

                async with Session(ledger) as s:
                    both = asyncio.create_task(s.ask_all("stub", [shared, other], "t.all"))
                    alone = asyncio.create_task(s.ask("stub", shared, "t.one"))
                    while len(_chat(stub)) < 2:  # both requests out
                        await asyncio.sleep(0.01)
                    both.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await both
                    return await alone

            result = asyncio.run(main())
    assert result.ok and result.text and len(_chat(stub)) == 2
    stored = ledger.warehouse.rows("SELECT status FROM llm.calls")
    assert [r["status"] for r in stored] == ["ok", "ok"]  # the cancelled flow's other call finished too


def test_ask_all_raises_a_fault_as_it_comes_without_waiting_for_the_other_calls(stub, stub_ledger, monkeypatch):
    """A fault while sending one request of `ask_all` (not a failed call: a bug) is raised to the
    flow as it comes, while another request of the same `ask_all` is still out."""
    send = Ledger.send

    async def breaks_one(self, client, ep, identity, purpose, key, req, params, *rest, **kw):
        if req.messages[-1]["content"] == "breaks":
            raise RuntimeError("the send broke")
        return await send(self, client, ep, identity, purpose, key, req, params, *rest, **kw)

    monkeypatch.setattr(Ledger, "send", breaks_one)
    with pytest.raises(RuntimeError, match="the send broke"):
        stub_ledger.complete("stub", [CallRequest(user("[[stub: delay=0.5]] slow")), CallRequest(user("breaks"))])
    # the fault, not an error about the other request's answer not being there yet; that call,
    # out when the fault came, was answered and committed as the session wound down
    assert stub_ledger.warehouse.rows("SELECT status FROM llm.calls") == [{"status": "ok"}]


def test_ask_all_gives_each_request_its_answer_in_order_one_call_per_distinct_request(stub, stub_ledger):
    requests = [CallRequest(user(q)) for q in ("one", "two", "one", "three", "two")]
    results = stub_ledger.complete("stub", requests)
    assert len(_chat(stub)) == 3 and stub_ledger.warehouse.scalar("SELECT count(*) FROM llm.calls") == 3
    texts = [r.text for r in results]
    assert texts[0] == texts[2] and texts[1] == texts[4] and len(set(texts)) == 3
    sent = {c["body"]["messages"][-1]["content"]: c for c in _chat(stub)}
    assert set(sent) == {"one", "two", "three"}


def test_ask_all_reads_every_fault_so_none_is_logged_as_never_retrieved(stub, stub_ledger, monkeypatch, caplog):
    """Two requests of one `ask_all` fault at once and a third faults after `ask_all` raised:
    the first fault is raised, and asyncio logs none of them as "never retrieved" (it logs that
    with a traceback from the call loop's thread, which on Python 3.11 formats it with `ast`)."""
    import gc
    import logging

    send = Ledger.send

    async def breaks(self, client, ep, identity, purpose, key, req, params, *rest, **kw):
        content = req.messages[-1]["content"]
        if content.startswith("breaks"):
            if content == "breaks later":
                await asyncio.sleep(0.3)
            raise RuntimeError(f"the send broke: {content}")
        return await send(self, client, ep, identity, purpose, key, req, params, *rest, **kw)

    monkeypatch.setattr(Ledger, "send", breaks)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        with pytest.raises(RuntimeError, match="the send broke"):
            stub_ledger.complete("stub", [CallRequest(user(q)) for q in ("breaks one", "breaks two", "breaks later")])
        gc.collect()  # a future's unread error is logged when it is collected
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
