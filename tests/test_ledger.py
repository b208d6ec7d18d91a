"""The call ledger against a real local HTTP server that injects faults."""

import random
import time
from pathlib import Path

import pytest

from llm_calls import CallRequest, Ledger, ModelRegistry, call_key
from llm_calls.ledger import backoff_delay, retry_after_seconds
from llm_calls.records import LITERAL_KEYS, Answer, lookup_sql
from llm_calls.stub_server import StubServer
from tests.conftest import stub_config, user
from warehouse import Warehouse


def calls(ledger: Ledger) -> list[dict]:
    return ledger.warehouse.rows("SELECT * FROM llm.calls ORDER BY created_at, key")


def test_second_request_is_answered_from_the_ledger_without_a_request(stub, stub_ledger):
    first = stub_ledger.complete("stub", [CallRequest(user("hello"))])[0]
    second = stub_ledger.complete("stub", [CallRequest(user("hello"))])[0]
    assert first.ok and not first.cached
    assert second.cached and second.text == first.text
    assert stub.contents() == ["hello"]


def test_raising_k_reuses_earlier_sample_indexes(stub, stub_ledger):
    three = stub_ledger.samples("stub", user("q"), k=3)
    five = stub_ledger.samples("stub", user("q"), k=5)
    assert len(stub.requests) == 5  # 3, then only indexes 3 and 4
    assert [r.cached for r in five] == [True, True, True, False, False]
    assert [r.text for r in five[:3]] == [r.text for r in three]
    assert sorted(r["sample_index"] for r in calls(stub_ledger)) == [0, 1, 2, 3, 4]
    # distinct indexes are distinct calls with distinct seeds, hence distinct replies
    assert len({r.text for r in five}) == 5


def test_identical_requests_in_one_batch_are_made_once(stub, stub_ledger):
    results = stub_ledger.complete("stub", [CallRequest(user("dup")), CallRequest(user("dup"))])
    assert results[0] == results[1]
    assert len(stub.requests) == 1


def test_key_covers_model_messages_params_and_index_but_not_purpose():
    base = call_key("m@h", user("x"), {"temperature": 0}, 0)
    assert base != call_key("other@h", user("x"), {"temperature": 0}, 0)
    assert base != call_key("m@h", user("y"), {"temperature": 0}, 0)
    assert base != call_key("m@h", user("x"), {"temperature": 0.5}, 0)
    assert base != call_key("m@h", user("x"), {"temperature": 0}, 1)
    assert base == call_key("m@h", user("x"), {"temperature": 0}, 0)


def test_purpose_does_not_change_the_key_so_reparsing_needs_no_call(stub, stub_ledger):
    stub_ledger.complete("stub", [CallRequest(user("p"))], purpose="first-parser")
    again = stub_ledger.complete("stub", [CallRequest(user("p"))], purpose="fixed-parser")[0]
    assert again.cached and len(stub.requests) == 1


@pytest.mark.slow
def test_failed_call_is_recorded_not_answered_and_retried_next_run(stub, stub_ledger):
    prompt = "[[stub: status=500 times=3]] q"  # 3 attempts in run 1 all fail
    first = stub_ledger.complete("stub", [CallRequest(user(prompt))])[0]
    assert not first.ok and first.text is None
    assert "HTTP 500" in first.error and "retries spent after 3 attempts" in first.error
    row = calls(stub_ledger)[0]
    assert (row["status"], row["response_text"], row["attempts"]) == ("failed", None, 3)

    second = stub_ledger.complete("stub", [CallRequest(user(prompt))])[0]
    assert second.ok and not second.cached and second.text.startswith("reply to:")
    row = calls(stub_ledger)[0]
    assert (row["status"], row["attempts"], row["total_attempts"]) == ("ok", 1, 4)
    assert len(calls(stub_ledger)) == 1


def test_server_error_is_retried_within_the_run(stub, stub_ledger):
    result = stub_ledger.complete("stub", [CallRequest(user("[[stub: status=503 times=2]] q"))])[0]
    assert result.ok and result.attempts == 3


@pytest.mark.slow
def test_429_retry_after_is_honoured(stub, stub_ledger):
    t0 = time.monotonic()
    result = stub_ledger.complete("stub", [CallRequest(user("[[stub: status=429 times=1 retry_after=1]] q"))])[0]
    elapsed = time.monotonic() - t0
    assert result.ok and result.attempts == 2
    times = [r["time"] for r in stub.requests]
    assert times[1] - times[0] >= 0.95  # configured backoff is 0.05 s at most; the server asked for 1 s
    assert elapsed >= 0.95


@pytest.mark.slow
def test_a_rate_limit_wait_is_shown_in_the_progress_line_while_it_lasts(stub, stub_ledger):
    """A Retry-After may hold a call for minutes (up to 600 s per attempt): the run command's progress
    line says which model waits and how long, instead of looking stuck."""
    import threading

    from llm_calls.totals import TOTALS
    from reporting.summary import Progress

    TOTALS.reset()
    seen = []
    call = threading.Thread(target=lambda: stub_ledger.complete(
        "stub", [CallRequest(user("[[stub: status=429 times=1 retry_after=2]] held"))]))
    call.start()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not seen:
        line = Progress(1).line()
        if "rate limited" in line:
            seen.append(line)
        time.sleep(0.05)
    call.join()
    assert seen and "rate limited: stub waits 0:0" in seen[0]
    assert "rate limited" not in Progress(1).line()  # the wait is over


def test_client_error_other_than_429_is_not_retried(stub, stub_ledger):
    result = stub_ledger.complete("stub", [CallRequest(user("[[stub: status=400 times=5]] q"))])[0]
    assert not result.ok and result.attempts == 1 and result.error.startswith("HTTP 400")


@pytest.mark.slow
def test_timeout_is_retried(stub, stub_ledger):
    # the stub hangs 3 s on the first request; the configured timeout is 1 s
    result = stub_ledger.complete("stub", [CallRequest(user("[[stub: hang times=1]] q"))])[0]
    assert result.ok and result.attempts == 2


@pytest.mark.slow
def test_timeout_on_every_attempt_is_a_failure(stub, stub_ledger):
    result = stub_ledger.complete("stub", [CallRequest(user("[[stub: hang times=9]] q"))])[0]
    assert not result.ok and "timeout" in result.error and result.attempts == 3


def test_malformed_json_is_stored_as_a_failure(stub, stub_ledger):
    result = stub_ledger.complete("stub", [CallRequest(user("[[stub: malformed]] q"))])[0]
    assert not result.ok and result.error.startswith("malformed response")
    assert calls(stub_ledger)[0]["status"] == "failed"


def test_empty_choices_is_stored_as_a_failure(stub, stub_ledger):
    result = stub_ledger.complete("stub", [CallRequest(user("[[stub: empty_choices]] q"))])[0]
    assert not result.ok and "empty 'choices'" in result.error
    assert calls(stub_ledger)[0]["response_text"] is None


def test_a_reply_body_is_read_field_by_field_and_a_field_of_the_wrong_type_is_a_failure():
    """The ledger reads the client's plain JSON (no typed objects in between), so the reader
    itself checks each field it takes: a wrong type fails the call, never becomes an answer."""
    message = {"role": "assistant", "content": "yes", "reasoning": ""}
    good = {"choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2.0, "prompt_tokens_details": None}}
    read = Answer.of(good)
    assert (read.ok, read.text, read.reasoning, read.finish_reason, read.prompt_tokens, read.completion_tokens,
            read.reasoning_tokens, read.cached_prompt_tokens) == (True, "yes", "", "stop", 5, 2, None, None)
    assert Answer.of({**good, "usage": None}).ok  # a server that counts nothing
    wrong = {
        "not an object": ["choices"],
        "choices not a list": {"choices": {"0": good["choices"][0]}},
        "choice not an object": {"choices": ["yes"]},
        "message not an object": {"choices": [{"finish_reason": "stop", "message": "yes"}]},
        "content parts": {"choices": [{"finish_reason": "stop", "message": {"content": [{"text": "yes"}]}}]},
        "finish reason a number": {"choices": [{"finish_reason": 1, "message": message}]},
        "no content": {"choices": [{"finish_reason": "stop", "message": {"role": "assistant"}}]},
        "count as text": {**good, "usage": {"prompt_tokens": "5"}},
        "count a fraction": {**good, "usage": {"completion_tokens_details": {"reasoning_tokens": 1.5}}},
        "count a boolean": {**good, "usage": {"completion_tokens": True}},
    }
    for why, body in wrong.items():
        answer = Answer.of(body)
        assert not answer.ok and answer.text is None and answer.error.startswith("malformed response"), why


def test_length_cut_reply_is_stored_as_truncated(stub, stub_ledger):
    result = stub_ledger.complete("stub", [CallRequest(user("[[stub: length]] q"))])[0]
    assert result.ok and result.truncated
    assert calls(stub_ledger)[0]["finish_reason"] == "length"


def test_row_records_request_tokens_latency_and_host(stub, stub_ledger):
    stub_ledger.complete("stub", [CallRequest(user("one two three"), {"max_tokens": 7}, 2)], purpose="t")
    row = calls(stub_ledger)[0]
    assert row["model"] == "stub" and row["purpose"] == "t" and row["sample_index"] == 2
    assert row["endpoint_host"] == f"127.0.0.1:{stub.port}"
    assert row["prompt_tokens"] == 3 and row["completion_tokens"] > 0 and row["latency_s"] > 0
    assert '"max_tokens": 7' in row["request"] and '"seed":' in row["request"]


@pytest.mark.slow
def test_concurrency_is_bounded_per_model(tmp_path):
    with StubServer(delay_s=0.2) as slow:
        cfg = stub_config(slow, tmp_path, models={"stub": {"base_url": slow.base_url, "model": "m", "concurrency": 2}})
        with ModelRegistry(cfg) as reg:
            Ledger(Warehouse(cfg.warehouse_path()), reg).complete("stub", [CallRequest(user(f"c{i}")) for i in range(6)])
        starts = sorted(r["time"] for r in slow.requests)
    # with 2 at a time and 0.2 s each, the 6 requests start in 3 waves
    assert starts[4] - starts[0] >= 0.35


def test_the_stubs_peak_counts_a_request_until_its_reply_starts_to_go_out():
    """`peak_in_flight`, which the tests of an endpoint's bound read, counts only overlaps the
    client had: one client sending its requests one after another is seen one at a time even when
    the thread that wrote a reply waits (here 0.2 s, as for the CPU on a loaded machine) before it
    is done. Counted until the thread was done, the next request was seen as a second at once."""
    import httpx

    class Slow(StubServer):
        def _handler_class(self):
            class Handler(super()._handler_class()):
                def _send(self, *args):
                    super()._send(*args)
                    time.sleep(0.2)

            return Handler

    with Slow() as stub:
        for k in range(3):  # a connection each: each request gets its own thread
            reply = httpx.post(f"{stub.base_url}/chat/completions", timeout=10,
                               json={"model": "stub-model", "messages": [{"role": "user", "content": f"q{k}"}]})
            assert reply.status_code == 200
        assert len(stub.requests) == 3 and stub.peak_in_flight == 1


def test_progress_is_logged(stub, tmp_path):
    class Log:
        lines: list[str] = []

        def info(self, msg, *args):
            self.lines.append(msg)

    cfg = stub_config(stub, tmp_path)
    log = Log()
    with ModelRegistry(cfg) as reg:
        Ledger(Warehouse(cfg.warehouse_path()), reg, log=log).complete("stub", [CallRequest(user(f"x{i}")) for i in range(4)])
    assert any("4/4 done" in line and "0 failed" in line for line in log.lines)


def test_retry_after_parsing():
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    assert retry_after_seconds({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert retry_after_seconds({}) is None


def test_backoff_grows_exponentially_with_jitter_and_a_cap():
    rng = random.Random(0)
    d = [backoff_delay(a, 1.0, 8.0, None, rng) for a in (1, 2, 3, 4, 5, 6)]
    assert 0.5 <= d[0] <= 1.0 and 1.0 <= d[1] <= 2.0 and 2.0 <= d[2] <= 4.0
    assert all(4.0 <= x <= 8.0 for x in d[3:])
    assert backoff_delay(1, 1.0, 8.0, 30.0, rng) == 30.0  # the server's word wins


def test_api_key_reaches_the_server_but_not_the_ledger(stub, tmp_path, monkeypatch):
    secret = "sk-test-SECRET-4242"
    monkeypatch.setenv("STUB_KEY", secret)
    cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "m", "api_key_env": "STUB_KEY"}})
    wh = Warehouse(cfg.warehouse_path())
    with ModelRegistry(cfg) as reg:
        Ledger(wh, reg).complete("stub", [CallRequest(user("ok")), CallRequest(user("[[stub: status=401]] no"))])
    assert stub.requests[0]["authorization"] == f"Bearer {secret}"
    for row in wh.rows("SELECT * FROM llm.calls"):
        assert secret not in repr(row)
    assert secret.encode() not in cfg.warehouse_path().read_bytes()


@pytest.mark.slow
def test_a_slow_model_does_not_keep_the_warehouse_from_other_processes(tmp_path):
    import subprocess
    import sys
    import textwrap
    import threading

    with StubServer(delay_s=3.0) as slow:
        cfg = stub_config(slow, tmp_path)
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)
            worker = threading.Thread(target=ledger.complete, args=("stub", [CallRequest(user("slow"))]))
            worker.start()
            time.sleep(1.0)  # the batch is waiting on the model
            other = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
                import time
                from warehouse import Warehouse
                t = time.monotonic()
                Warehouse({str(cfg.warehouse_path())!r}, lock_timeout_s=1.5).rows("SELECT count(*) FROM llm.calls")
                print(round(time.monotonic() - t, 2))
            """)], capture_output=True, text=True, cwd=str(Path(__file__).resolve().parent.parent))
            worker.join()
    assert other.returncode == 0, other.stderr  # another process reads while the call is pending


@pytest.mark.slow
def test_back_pressure_bounds_the_answers_waiting_for_their_commit(tmp_path, monkeypatch):
    from warehouse.connection import Writer

    commits: list[tuple[float, int]] = []
    real_upsert = Writer.upsert

    def slow_upsert(self, table, rows, *args, **kwargs):  # a disk much slower than the model
        time.sleep(0.3)
        n = real_upsert(self, table, rows, *args, **kwargs)
        commits.append((time.time(), n))
        return n

    monkeypatch.setattr(Writer, "upsert", slow_upsert)
    with StubServer(delay_s=0.01) as fast:
        cfg = stub_config(fast, tmp_path, models={"stub": {"base_url": fast.base_url, "model": "m", "concurrency": 2}},
                          ledger={"max_unsaved": 3})
        with ModelRegistry(cfg) as reg:
            results = Ledger(Warehouse(cfg.warehouse_path()), reg).complete(
                "stub", [CallRequest(user(f"q{i}")) for i in range(30)])
        sent = sorted(r["time"] for r in fast.requests)
    assert all(r.ok for r in results) and sum(n for _, n in commits) == 30
    for t in sent:  # when each request was sent, at most concurrency + max_unsaved calls were not yet committed
        committed = sum(n for when, n in commits if when <= t)
        assert sent.index(t) + 1 - committed <= 2 + 3


@pytest.mark.slow
def test_answers_are_committed_by_half_the_room_and_the_last_ones_when_nothing_is_in_flight(tmp_path, monkeypatch):
    """A commit costs a few ms of CPU whatever its size, so the writer gathers answers until half
    the lane's back-pressure room (concurrency + max_unsaved) has answered, not by the clock, and
    commits the answers it holds as soon as nothing else is in flight. With the gathering wait made
    a minute long: 40 quick calls at concurrency 4 (room 4 + 8, half: 4) commit in batches of at
    least 4; then a quick and a slow call commit together as the slow one is answered, not a
    minute later (before, the quick one's answer started a timed wait that the slow one's end did
    not cut short)."""
    import threading

    from llm_calls import flows
    from warehouse.connection import Writer

    sizes: list[int] = []
    real_upsert = Writer.upsert

    def counted(self, table, rows, *args, **kwargs):
        sizes.append(len(rows))
        return real_upsert(self, table, rows, *args, **kwargs)

    monkeypatch.setattr(Writer, "upsert", counted)
    monkeypatch.setattr(flows, "_FLUSH_GATHER_S", 60.0)
    with StubServer(delay_s=0.02) as stub:
        cfg = stub_config(stub, tmp_path, ledger={"max_unsaved": 8})
        with ModelRegistry(cfg) as reg:
            ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)
            for batch in ([CallRequest(user(f"q{i}")) for i in range(40)],
                          [CallRequest(user("[[stub: delay=0.1]] quick")), CallRequest(user("[[stub: delay=0.6]] slow"))]):
                sizes.clear()
                out: list = []
                worker = threading.Thread(target=lambda out=out, batch=batch: out.append(ledger.complete("stub", batch)),
                                          daemon=True)
                worker.start()
                worker.join(30)
                assert not worker.is_alive(), f"answers waited for the gathering wait (committed so far: {sizes})"
                assert all(r.ok for r in out[0]) and sum(sizes) == len(batch)
                if len(batch) == 40:
                    assert all(n >= 4 for n in sizes[:-1]) and len(sizes) <= 10, sizes
                else:
                    assert sizes == [2]


@pytest.mark.slow
def test_an_endpoint_that_refuses_connections_is_not_asked_once_per_call(tmp_path):
    """Once a call spends its retries on connection errors the endpoint is down: the batch's other
    calls are recorded as failed without a request, the next batch checks once that it is still
    down, and a server back on the port is used again."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with StubServer() as any_stub:  # only to build the configuration; the model points at the closed port
        cfg = stub_config(any_stub, tmp_path, ledger={"max_attempts": 3},
                          models={"stub": {"base_url": f"http://127.0.0.1:{port}/v1", "model": "stub-model",
                                           "concurrency": 2}})
    wh = Warehouse(cfg.warehouse_path())
    with ModelRegistry(cfg) as registry:
        ledger = Ledger(wh, registry)
        first = ledger.complete("stub", [CallRequest(user(f"q{i}")) for i in range(12)])
        assert not any(r.ok for r in first)
        unsent = [r for r in first if r.attempts == 0]
        # at most the calls that may be out at once (concurrency + max_unsaved, 3 x concurrency by
        # default) tried at all: a call backing off leaves its slot to another, which fails too
        assert len(unsent) >= 12 - 6
        assert all(f"endpoint down (127.0.0.1:{port})" in r.error and "no request sent" in r.error for r in unsent)
        assert sum(r.attempts for r in first) <= 6 * 3
        t0 = time.monotonic()
        second = ledger.complete("stub", [CallRequest(user(f"other {i}")) for i in range(6)])
        assert all(r.attempts == 0 and "still unreachable" in r.error for r in second)
        assert time.monotonic() - t0 < 5  # one short check, no retries with backoff
        with StubServer(port=port) as back:  # the server is back on the same port
            third = ledger.complete("stub", [CallRequest(user(f"q{i}")) for i in range(3)])
            assert all(r.ok for r in third) and len(back.requests) == 3
    rows = wh.rows("SELECT status, attempts, error FROM llm.calls WHERE key IN (SELECT unnest(?::VARCHAR[]))",
                   [[r.key for r in second]])
    assert len(rows) == 6 and all(r["status"] == "failed" and r["attempts"] == 0 for r in rows)  # recorded


def test_a_key_echoed_inside_a_successful_reply_is_masked_in_everything_stored(tmp_path, monkeypatch):
    secret = "sk-canary-" + "7" * 24
    monkeypatch.setenv("BENCH_ECHO_KEY", secret)
    with StubServer(responder=lambda body: f"Your key is {secret}; the answer is 4.") as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "api_key_env": "BENCH_ECHO_KEY"}})
        ledger = Ledger(Warehouse(cfg.warehouse_path()), ModelRegistry(cfg))
        [r] = ledger.complete("stub", [CallRequest(user("2 + 2?"))])
        [again] = ledger.complete("stub", [CallRequest(user("2 + 2?"))])
    assert r.ok and secret not in r.text and r.text == "Your key is ***; the answer is 4."
    assert again.cached and again.text == r.text
    dump = ledger.warehouse.rows("SELECT * FROM llm.calls")
    assert secret not in repr(dump)


def test_a_lookup_finds_exactly_the_stored_keys_in_either_form_quotes_and_all(tmp_path):
    """`lookup_sql` writes a few keys as literals and many as a list parameter: both find the stored
    keys and nothing else, and a quote inside a key is a character of the key, not SQL."""
    wh = Warehouse(tmp_path / "wh.duckdb")
    stored = [f"stored {i}" for i in range(150)] + ["it's", "a'); DROP TABLE llm.calls; --"]
    with wh.connect() as con:
        con.execute("INSERT INTO llm.calls (key, model, model_identity, request, sample_index, status, response_text, "
                    "attempts, total_attempts, created_at, finished_at) SELECT k, 'm', 'm@host', '{}', 0, 'ok', "
                    "'reply to ' || k, 1, 1, now(), now() FROM unnest(?::VARCHAR[]) AS t(k)", [stored])
    for asked in (["it's", "stored 3", "never stored", "a'); DROP TABLE llm.calls; --"],  # literals
                  [*stored[:100], "never stored", "nor this"]):  # a list parameter
        assert (len(asked) <= LITERAL_KEYS) == (asked[0] == "it's")
        with wh.connect(read_only=True) as con:
            found = {row[0]: row[2] for row in con.execute(*lookup_sql(asked)).fetchall()}
        assert found == {k: f"reply to {k}" for k in asked if k in stored}
    assert wh.scalar("SELECT count(*) FROM llm.calls") == len(stored)
