"""Batch mode (llm_calls/batch.py): requests as OpenAI batch files, through a Batch API or by hand,
stored as live answers are."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llm_calls import CallRequest, Ledger, ModelRegistry, call_key
from llm_calls.batch import BatchImportError, BatchPending, import_file
from llm_calls.stub_server import StubServer, run_batch
from tests.conftest import stub_config, user
from tests.tables_digest import digests
from warehouse import Warehouse

REQUESTS = [CallRequest(user("What is 2 + 2?")), CallRequest(user("Name a prime. [[stub: reasoning]]")),
            CallRequest(user("Say a long thing. [[stub: length]]")), CallRequest(user("Fail me. [[stub: status=400]]")),
            CallRequest(user("What is 2 + 2?"))]  # asked twice: one key, one line
SHAPE = ["status", "response_text", "finish_reason", "prompt_tokens", "completion_tokens", "reasoning_text",
         "reasoning_tokens", "model_identity", "served_model", "purpose", "request", "sample_index"]


def _ledger(stub, tmp_path, name="wh", batch=None):
    models = {"stub": {"base_url": stub.base_url, "model": "stub-model", "concurrency": 4,
                       "sampling": {"temperature": 0.0, "max_tokens": 64}, **({"batch": batch} if batch else {})}}
    cfg = stub_config(stub, tmp_path, warehouse={"path": str(tmp_path / f"{name}.duckdb")}, models=models)
    return Ledger(Warehouse(cfg.warehouse_path(), lock_timeout_s=30), ModelRegistry(cfg)), cfg


def _shape(wh, where="TRUE"):
    return wh.rows(f"SELECT key, {', '.join(SHAPE)} FROM llm.calls WHERE {where} ORDER BY key")


def _files(tmp_path):
    return {"mode": "files", "dir": str(tmp_path / "batches")}


@pytest.mark.slow
def test_files_mode_writes_one_line_per_pending_request_with_the_body_a_live_call_sends(stub, tmp_path):
    live, _ = _ledger(stub, tmp_path, "live")
    live.complete("stub", REQUESTS, purpose="t.ask")
    sent = {json.dumps(r["body"], sort_keys=True) for r in stub.requests}
    ledger, cfg = _ledger(stub, tmp_path, batch=_files(tmp_path))
    before = len(stub.requests)
    with pytest.raises(BatchPending) as caught:
        ledger.complete("stub", REQUESTS, purpose="t.ask")
    assert len(stub.requests) == before  # nothing was sent
    path = caught.value.path
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    identity = ledger.registry.identity("stub")
    params = {"temperature": 0.0, "max_tokens": 64}
    assert [x["custom_id"] for x in lines] == list(dict.fromkeys(
        call_key(identity, r.messages, params, r.sample_index) for r in REQUESTS))
    assert {(x["method"], x["url"]) for x in lines} == {("POST", "/v1/chat/completions")}
    assert {json.dumps(x["body"], sort_keys=True) for x in lines} == sent  # the seed and parameters as sent live
    assert "import-batch" in str(caught.value) and str(path) in str(caught.value)
    wh = ledger.warehouse
    assert wh.scalar("SELECT count(*) FROM llm.calls") == 0
    assert wh.rows("SELECT mode, status, n_requests, input_file FROM llm.batches") == [
        {"mode": "files", "status": "exported", "n_requests": 4, "input_file": str(path)}]
    with pytest.raises(BatchPending):  # asked again before the import: the same file, the same batch
        ledger.complete("stub", REQUESTS, purpose="t.ask")
    assert wh.scalar("SELECT count(*) FROM llm.batches") == 1 and wh.scalar("SELECT count(*) FROM llm.batch_requests") == 4


@pytest.mark.slow
def test_a_vllm_run_batch_output_is_stored_as_the_live_answers_are(stub, tmp_path):
    live, _ = _ledger(stub, tmp_path, "live")
    live_results = live.complete("stub", REQUESTS, purpose="t.ask")
    ledger, _ = _ledger(stub, tmp_path, batch=_files(tmp_path))
    with pytest.raises(BatchPending) as caught:
        ledger.complete("stub", REQUESTS, purpose="t.ask")
    out = tmp_path / "results.jsonl"
    run_batch(str(caught.value.path), str(out), StubServer())  # the cluster's run_batch
    report = import_file(ledger.warehouse, ledger.registry, out)
    assert (report.answered, report.failed, report.still_pending) == (3, 1, 0)
    assert ledger.warehouse.scalar("SELECT count(*) FROM llm.calls WHERE run_id = ?", [report.run_id]) == 4
    ok = "status = 'ok'"
    assert _shape(ledger.warehouse, ok) == _shape(live.warehouse, ok)  # content, reasoning, length, usage alike
    failed = ledger.warehouse.rows("SELECT status, error, latency_s, endpoint_host FROM llm.calls WHERE status <> 'ok'")
    assert len(failed) == 1 and "HTTP 400" in failed[0]["error"] and failed[0]["latency_s"] is None
    assert failed[0]["endpoint_host"] == "batch file results.jsonl"
    assert ledger.warehouse.scalar("SELECT status FROM llm.batches") == "imported"
    # the answers are the ledger's now: the same requests are answered from it, the failed one exported again
    with pytest.raises(BatchPending) as again:
        ledger.complete("stub", REQUESTS, purpose="t.ask")
    assert again.value.n == 1
    cached = ledger.complete("stub", REQUESTS[:3], purpose="t.ask")
    assert all(r.cached for r in cached)
    assert [(r.reply, r.truncated, r.reasoning) for r in cached] == [(r.reply, r.truncated, r.reasoning)
                                                                     for r in live_results[:3]]


@pytest.mark.slow
def test_an_import_refuses_every_line_that_is_not_a_pending_request_naming_it_and_writes_nothing(stub, tmp_path):
    ledger, _ = _ledger(stub, tmp_path, batch=_files(tmp_path))
    with pytest.raises(BatchPending) as caught:
        ledger.complete("stub", REQUESTS[:2], purpose="t.ask")
    out = tmp_path / "results.jsonl"
    run_batch(str(caught.value.path), str(out), StubServer())
    good = out.read_text().splitlines()
    stranger = json.loads(good[0]) | {"custom_id": "0" * 64}
    out.write_text("\n".join([good[0], json.dumps(stranger), good[0]]) + "\n")
    with pytest.raises(BatchImportError) as refused:
        import_file(ledger.warehouse, ledger.registry, out)
    text = str(refused.value)
    assert "nothing written" in text and "line 2: custom_id 000" in text and "line 3:" in text and "twice" in text
    assert ledger.warehouse.scalar("SELECT count(*) FROM llm.calls") == 0
    out.write_text("\n".join(good) + "\n")
    assert import_file(ledger.warehouse, ledger.registry, out).answered == 2
    again = import_file(ledger.warehouse, ledger.registry, out)  # the same file twice: the stored answers stay
    assert (again.answered, again.already) == (0, 2) and "2 already answered, kept as stored" in again.line()
    # another configuration's models cannot take these answers
    other = StubServer().start()
    try:
        stranger_ledger, _ = _ledger(other, tmp_path, batch=_files(tmp_path))
        with pytest.raises(BatchImportError, match="does not have"):
            import_file(ledger.warehouse, stranger_ledger.registry, _third_answered(ledger, tmp_path))
    finally:
        other.stop()


def _third_answered(ledger, tmp_path):
    """An output file for a request exported and not answered yet (a third request)."""
    with pytest.raises(BatchPending) as caught:
        ledger.complete("stub", [CallRequest(user("A third question."))], purpose="t.ask")
    path = tmp_path / "third.jsonl"
    run_batch(str(caught.value.path), str(path), StubServer())
    return path


@pytest.mark.slow
def test_api_mode_sends_each_turn_as_one_batch_and_stores_answers_as_live_ones(tmp_path):
    with StubServer() as stub:
        live, _ = _ledger(stub, tmp_path, "live")
        live.complete("stub", REQUESTS, purpose="t.ask")
        direct = len(stub.requests)
        ledger, _ = _ledger(stub, tmp_path, batch={"mode": "api", "poll_s": 0.01, "poll_max_s": 0.05})
        results = ledger.complete("stub", REQUESTS, purpose="t.ask")
        assert len(stub.requests) == direct  # no live chat request: every line went through the batch
        assert len(stub.batches) == 1
        assert [r.ok for r in results] == [True, True, True, False, True]
        assert "HTTP 400" in results[3].error
        ok = "status = 'ok'"
        assert _shape(ledger.warehouse, ok) == _shape(live.warehouse, ok)
        row = ledger.warehouse.rows("SELECT status, n_ok, n_failed, provider_batch_id FROM llm.batches")[0]
        assert (row["status"], row["n_ok"], row["n_failed"]) == ("read", 3, 1)
        assert row["provider_batch_id"] in stub.batches
        # a second turn built on the first one's answers is its own batch
        second = [CallRequest([*r.messages, {"role": "assistant", "content": res.text}, *user("And why?")])
                  for r, res in zip(REQUESTS[:2], results[:2])]
        assert all(r.ok for r in ledger.complete("stub", second, purpose="t.why"))
        assert len(stub.batches) == 2
        assert ledger.complete("stub", REQUESTS[:3], purpose="t.ask")[0].cached  # cached: no third batch
        assert len(stub.batches) == 2


def test_api_mode_sends_the_batch_of_a_session_asked_from_its_own_tasks_without_run(tmp_path):
    """A `Session` used directly (`await s.ask(...)` from any tasks, no `Session.run`): its
    batch-mode calls are still sent as one batch once nothing else can move."""
    import asyncio

    from llm_calls.flows import Session

    with StubServer() as stub:
        ledger, _ = _ledger(stub, tmp_path, batch={"mode": "api", "poll_s": 0.01, "poll_max_s": 0.05})

        async def main():
            async with Session(ledger) as s:
                return await asyncio.wait_for(asyncio.gather(*(s.ask("stub", r, "t.ask") for r in REQUESTS)), 30)

        results = asyncio.run(main())
        assert [r.ok for r in results] == [True, True, True, False, True]
        assert len(stub.batches) == 1 and not [r for r in stub.requests if r["path"].endswith("/chat/completions")]


@pytest.mark.slow
def test_an_expired_batch_keeps_the_answers_it_has_and_the_rest_are_asked_again(tmp_path):
    with StubServer(batch_expire_after=2) as stub:
        ledger, _ = _ledger(stub, tmp_path, batch={"mode": "api", "poll_s": 0.01, "poll_max_s": 0.05})
        asked = [CallRequest(user(f"Question {i}")) for i in range(5)]
        first = ledger.complete("stub", asked, purpose="t.ask")
        assert [r.ok for r in first] == [True, True, False, False, False]
        assert all("batch_expired" in r.error for r in first[2:])
        stub.batch_expire_after = None
        second = ledger.complete("stub", asked, purpose="t.ask")
        assert all(r.ok for r in second) and [r.cached for r in second] == [True, True, False, False, False]
        inputs = [b["input_file_id"] for b in stub.batches.values()]
        assert [len(stub.files[f].splitlines()) for f in inputs] == [5, 3]  # only the unanswered went again


def test_a_batch_api_that_refuses_batches_fails_the_calls_and_says_why(tmp_path):
    with StubServer() as stub:
        ledger, _cfg = _ledger(stub, tmp_path, batch={"mode": "api", "poll_s": 0.01})
        stub.files = None  # every upload now fails inside the server: HTTP 500
        ledger.config = ledger.config.model_copy(update={"max_attempts": 1})
        results = ledger.complete("stub", REQUESTS[:2], purpose="t.ask")
        assert not any(r.ok for r in results) and all("batch API" in r.error for r in results)
        assert ledger.warehouse.scalar("SELECT count(*) FROM llm.calls WHERE status = 'failed'") == 2


_KILLED = """
import sys
from configuration import load_config
from llm_calls import CallRequest, Ledger, ModelRegistry
from warehouse import Warehouse
cfg = load_config(sys.argv[1])
ledger = Ledger(Warehouse(cfg.warehouse_path(), lock_timeout_s=30), ModelRegistry(cfg))
ledger.complete("stub", [CallRequest([{"role": "user", "content": f"Question {i}"}]) for i in range(3)], purpose="t.ask")
"""


@pytest.mark.slow
def test_a_run_killed_while_its_batch_is_in_flight_resumes_it_and_never_creates_it_twice(tmp_path):
    with StubServer(batch_polls=10**9) as stub:  # the batch stays in progress until the test lets it end
        ledger, cfg = _ledger(stub, tmp_path, batch={"mode": "api", "poll_s": 0.01, "poll_max_s": 0.05})
        root = Path(__file__).resolve().parent.parent
        proc = subprocess.Popen([sys.executable, "-c", _KILLED, cfg.source], cwd=root,
                                env={**os.environ, "PYTHONPATH": str(root)})
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(b["_polls"] >= 2 for b in stub.batches.values()):
                time.sleep(0.05)
            assert len(stub.batches) == 1, "the run never got as far as polling its batch"
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        assert ledger.warehouse.scalar("SELECT status FROM llm.batches") == "submitted"
        stub.batch_polls = 0
        results = ledger.complete("stub", [CallRequest(user(f"Question {i}")) for i in range(3)], purpose="t.ask")
        assert all(r.ok for r in results)
        assert len(stub.batches) == 1  # polled the batch the killed run created
        assert ledger.warehouse.scalar("SELECT count(*) FROM llm.calls") == 3


def _answer(body):
    """Replies that differ per conversation (equal replies would merge follow-up requests)."""
    import zlib

    return f"Answer: 1 (reply {zlib.crc32(json.dumps(body['messages']).encode())})"


@pytest.mark.slow
def test_a_run_through_batch_files_turn_by_turn_makes_the_tables_a_live_run_makes(tmp_path, monkeypatch, capsys):
    """Export, run the files as a cluster would, import, run again: until nothing waits. Every
    family table then equals the live run's (MuSoBench's three turns; IB's two-turn setting, whose
    first turn is the vanilla request, written once; its polisher)."""
    from assets.materialize_all import main as materialize_all
    from tests.test_plan import SMALL

    small = {**SMALL, "muso": {**SMALL["muso"], "timetabling": {"bins": [[1, 50]]}, "temperature": [0.0]},
             "ib": {**SMALL["ib"], "settings": ["vanilla", "multi_turn", "conformity", "prompt_polishing"]}}
    dbs = {}
    with StubServer(responder=_answer) as stub:
        for how in ("live", "files"):
            home = tmp_path / how
            home.mkdir()
            cfg = stub_config(stub, home, **small)
            monkeypatch.setenv("BENCHSMITH_CONFIG", cfg.source)
            monkeypatch.setenv("DAGSTER_HOME", str(home))
            dbs[how] = cfg.warehouse_path()
            if how == "live":
                assert materialize_all(["--select", "muso", "--select", "ib"]) == 0
                continue
            rounds = 0
            while True:
                status = materialize_all(["--select", "muso", "--select", "ib", "--export-batch", str(home / "out")])
                printed = capsys.readouterr().out
                waiting = sorted((home / "out").glob("*.jsonl"))
                fresh = [p for p in waiting if not p.name.endswith(".out.jsonl") and not p.with_suffix(".out.jsonl").exists()]
                if not fresh:
                    break
                assert status == 1 and "waiting on batch files" in printed
                rounds += 1
                assert rounds < 12, "the batch rounds never ended"
                for p in fresh:
                    run_batch(str(p), str(p.with_suffix(".out.jsonl")), StubServer(responder=_answer))
                    assert materialize_all(["--import-batch", str(p.with_suffix(".out.jsonl"))]) == 0
            assert status == 0 and "waiting on batch files" not in printed
            # one turn per round, every setting's and run's at once: MuSoBench's solve, confidence and
            # recheck; IB's first asks, then the second turn and the polished ask (nine rounds one setting
            # after another)
            assert rounds == 3
    live, files = ([x for x in digests(dbs[k]) if not x.startswith("llm.")] for k in ("live", "files"))
    assert files == live
    wh = Warehouse(dbs["files"])
    assert wh.scalar("SELECT count(*) FROM muso.responses") > 0 and wh.scalar("SELECT count(*) FROM ib.responses") > 0
    assert wh.scalar("SELECT count(*) FROM ib.responses WHERE setting = 'multi_turn'") > 0
    assert wh.scalar("SELECT count(*) FROM llm.batches WHERE status <> 'imported'") == 0


@pytest.mark.slow
def test_a_round_of_batch_files_is_one_file_per_model_and_one_import_of_a_folder(tmp_path, monkeypatch, capsys):
    """Issue 50: files mode wrote one file per partition per turn (54 files, 54 imports for 54 calls).
    A round is one file per model holding every step's pending requests; its outputs, in one folder,
    are one import, which totals what they cost; an input file given as an output is refused."""
    from assets.materialize_all import main as materialize_all
    from tests.test_plan import SMALL

    small = {**SMALL, "muso": {**SMALL["muso"], "timetabling": {"bins": [[1, 50]]}, "temperature": [0.0]},
             "ib": {**SMALL["ib"], "settings": ["vanilla", "multi_turn"]}}
    with StubServer(responder=_answer) as stub:
        live_home, home = tmp_path / "live", tmp_path / "files"
        live_home.mkdir()
        home.mkdir()
        live = stub_config(stub, live_home, **small)
        monkeypatch.setenv("BENCHSMITH_CONFIG", live.source)
        monkeypatch.setenv("DAGSTER_HOME", str(live_home))
        assert materialize_all(["--select", "muso", "--select", "ib"]) == 0
        cfg = stub_config(stub, home, **small)
        monkeypatch.setenv("BENCHSMITH_CONFIG", cfg.source)
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        capsys.readouterr()
        rounds = 0
        while True:
            status = materialize_all(["--select", "muso", "--select", "ib", "--export-batch", str(home / "out")])
            printed = capsys.readouterr().out
            if "waiting on batch files" not in printed:
                break
            rounds += 1
            assert rounds < 8, "the batch rounds never ended"
            listed = re.findall(r"^  (\S+round-\S+\.jsonl)  \((\w+), (\d+) requests\)$", printed, re.M)
            assert [m for _, m, _ in listed] == ["stub"], printed  # one file for the one model
            step_files = int(re.search(r"requests of (\d+) step\(s\)", printed).group(1))
            outs = home / f"outs{rounds}"
            outs.mkdir()
            for path, _, n in listed:
                assert sum(1 for _ in open(path)) == int(n)
                run_batch(path, str(outs / Path(path).name), StubServer(responder=_answer))
            if rounds == 1:
                assert step_files > 1  # several steps' requests in one file
                with pytest.raises(BatchImportError, match="batch input file"):
                    import_file(Warehouse(cfg.warehouse_path()), ModelRegistry(cfg), Path(listed[0][0]))
            assert materialize_all(["--import-batch", str(outs)]) == 0
        assert status == 0 and rounds == 3
    live_rows, files_rows = ([x for x in digests(p) if not x.startswith("llm.")]
                             for p in (live.warehouse_path(), cfg.warehouse_path()))
    assert files_rows == live_rows


def test_the_configuration_refuses_batch_mode_for_the_embedded_model(tmp_path):
    from configuration import ConfigError, load_config
    from tests.conftest import write_config

    path = write_config(tmp_path, {"models": {"smollm2": {"embedded": "smollm2-135m-instruct",
                                                          "batch": {"mode": "api"}}}})
    with pytest.raises(ConfigError, match="models.smollm2.*live only"):
        load_config(path)
    path = write_config(tmp_path, {"models": {"m": {"base_url": "http://h/v1", "model": "x", "batch": {"mode": "mail"}}},
                                   "evaluate": ["m"], "judge": "m"})
    with pytest.raises(ConfigError, match="models.m.batch.mode"):
        load_config(path)


@pytest.mark.slow
def test_a_run_killed_between_creating_its_batch_and_recording_it_finds_the_batch_by_its_metadata(tmp_path):
    """The batch is recorded as `creating` before it is created; a run that died before it stored
    the provider's id finds the batch by the id in its metadata, and creates none."""
    import openai

    from llm_calls.batch import _record, batch_id, file_text, offline_endpoint, prepare

    with StubServer(batch_polls=0) as stub:
        ledger, _ = _ledger(stub, tmp_path, batch={"mode": "api", "poll_s": 0.01})
        asked = [CallRequest(user(f"Question {i}")) for i in range(2)]
        # what the killed run did: the `creating` row, then the batch at the provider, then nothing
        identity, keyed, _ = ledger.keys("stub", asked)
        ep = offline_endpoint(ledger.registry, "stub")
        lines = prepare(ep, keyed)
        bid = batch_id("stub", "t.ask", keyed)
        writer = ledger.warehouse.writer()
        _record(writer, bid, ep, identity, "t.ask", "api", lines, status="creating")
        writer.close()
        client = openai.OpenAI(base_url=stub.base_url, api_key="x")
        upload = client.files.create(file=("x.jsonl", file_text(ep, lines).encode()), purpose="batch")
        client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h",
                              metadata={"benchsmith_batch": bid})
        assert len(stub.batches) == 1
        results = ledger.complete("stub", asked, purpose="t.ask")
        assert all(r.ok for r in results) and len(stub.batches) == 1
        assert ledger.warehouse.scalar("SELECT status FROM llm.batches") == "read"


def test_each_shape_of_output_line_is_an_answer_or_a_failure_that_says_why():
    from llm_calls.batch import answer_of_line

    body = {"id": "x", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "finish_reason": "length",
                         "message": {"role": "assistant", "content": "", "reasoning_content": "thinking"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12,
                      "completion_tokens_details": {"reasoning_tokens": 7}, "prompt_tokens_details": {"cached_tokens": 2}}}
    ok = answer_of_line({"custom_id": "k", "response": {"status_code": 200, "body": body}, "error": None})
    assert (ok.ok, ok.text, ok.reasoning, ok.finish_reason, ok.completion_tokens, ok.reasoning_tokens,
            ok.cached_prompt_tokens) == (True, "", "thinking", "length", 7, 7, 2)
    empty = answer_of_line({"custom_id": "k", "response": {"status_code": 200, "body": {**body, "choices": []}}})
    assert not empty.ok and "empty 'choices'" in empty.error
    openai_error = answer_of_line({"custom_id": "k", "response": None,
                                   "error": {"code": "batch_expired", "message": "not run in time"}})
    assert not openai_error.ok and openai_error.error == "batch line: batch_expired: not run in time"
    vllm_error = answer_of_line({"custom_id": "k", "response": {"status_code": 400, "request_id": "r", "body": None},
                                 "error": "prompt too long"})
    assert not vllm_error.ok and vllm_error.error == "batch line: HTTP 400 prompt too long"
    server_error = answer_of_line({"custom_id": "k", "response": {"status_code": 500, "body": {
        "error": {"message": "overloaded"}}}, "error": None})
    assert not server_error.ok and server_error.error == "batch line: HTTP 500 overloaded"
    echoed = answer_of_line({"custom_id": "k", "response": {"status_code": 401, "body": {"error": {
        "message": "Incorrect API key provided: sk-live-secret-123456"}}}}, secrets=["sk-live-secret-123456"])
    assert "sk-live-secret-123456" not in echoed.error and "***" in echoed.error
    not_a_completion = answer_of_line({"custom_id": "k", "response": {"status_code": 200, "body": {"hello": 1}}})
    assert not not_a_completion.ok and not_a_completion.error.startswith("malformed response")


# -- D10: output files holding Unicode line breaks, and lines that are no result ------------------------

def _raw_breaks(data: bytes) -> bytes:
    """A provider's file as pydantic writes it: U+2028 and U+0085 raw inside JSON strings."""
    return data.replace(b"\\u2028", "\u2028".encode()).replace(b"\\u0085", "\u0085".encode())


def _breaking(body):
    return "First line\u2028second line\u0085third, all one paragraph."


def test_files_mode_keeps_an_answer_holding_unicode_line_breaks_and_skips_only_a_broken_line(stub, tmp_path):
    """JSON allows U+2028 and U+0085 raw inside a string; `splitlines` cut such a line in two and the
    whole file was refused ("line 2: not JSON"). Lines end at a newline only; a line that is truly
    broken is named and skipped, every readable answer is stored, its request stays pending."""
    ledger, _ = _ledger(stub, tmp_path, batch=_files(tmp_path))
    asked = [CallRequest(user(f"Question {i}")) for i in range(3)]
    with pytest.raises(BatchPending) as caught:
        ledger.complete("stub", asked, purpose="t.ask")
    out = tmp_path / "results.jsonl"
    run_batch(str(caught.value.path), str(out), StubServer(responder=_breaking))
    lines = _raw_breaks(out.read_bytes()).split(b"\n")
    assert "\u2028".encode() in lines[0]  # raw, as the provider wrote it
    out.write_bytes(b"\n".join([lines[0], lines[1], b'{"custom_id": "cut', b"\xff\xfe not utf-8", b""]))
    report = import_file(ledger.warehouse, ledger.registry, out)
    assert (report.answered, report.failed, report.still_pending) == (2, 0, 1)
    assert [u.split(": ", 1)[1] for u in report.unreadable] == [
        "line 3: not JSON: Unterminated string starting at (column 15)",
        "line 4: not UTF-8 text (byte 0 of the line)"]
    stored = ledger.warehouse.rows("SELECT response_text FROM llm.calls WHERE status = 'ok'")
    assert [r["response_text"] for r in stored] == [_breaking(None)] * 2
    with pytest.raises(BatchPending) as again:  # only the request of the broken line goes out again
        ledger.complete("stub", asked, purpose="t.ask")
    assert again.value.n == 1


@pytest.mark.slow
def test_api_mode_stores_every_readable_answer_of_an_output_with_unicode_breaks_and_a_broken_line(tmp_path):
    """D10 in API mode: a provider output with U+2028 / U+0085 inside replies and one broken line. Every
    readable answer is stored, the broken line's request is a failure that says why, and the next run
    batches only that one."""
    state = {"broken": True}

    def filtered(data: bytes) -> bytes:
        data = _raw_breaks(data)
        if state["broken"]:
            lines = data.split(b"\n")
            lines[1] = lines[1][:40]  # the second result cut short
            data = b"\n".join(lines)
        return data

    with StubServer(responder=_breaking, output_filter=filtered) as stub:
        ledger, _ = _ledger(stub, tmp_path, batch={"mode": "api", "poll_s": 0.01, "poll_max_s": 0.05})
        asked = [CallRequest(user(f"Question {i}")) for i in range(4)]
        first = ledger.complete("stub", asked, purpose="t.ask")
        assert sum(r.ok for r in first) == 3
        assert all(r.reply == _breaking(None) for r in first if r.ok)
        [lost] = [r for r in first if not r.ok]
        assert "line 2: not JSON:" in lost.error and "asked again next run" in lost.error
        assert ledger.warehouse.scalar("SELECT count(*) FROM llm.calls") == 4
        state["broken"] = False
        second = ledger.complete("stub", asked, purpose="t.ask")
        assert all(r.ok for r in second) and sum(not r.cached for r in second) == 1
        inputs = [b["input_file_id"] for b in stub.batches.values()]
        assert [len(stub.files[f].splitlines()) for f in inputs] == [4, 1]  # only the lost one went again


@pytest.mark.slow
def test_a_batch_the_provider_no_longer_knows_fails_its_calls_and_the_next_run_batches_them_anew(tmp_path):
    """A submitted batch that the provider answers 404 for (deleted, or another account's) ended every
    rerun in a raw NotFoundError. Its requests are failures that say so, and the next run creates a new
    batch for them."""
    from llm_calls.batch import _record, batch_id, offline_endpoint, prepare

    with StubServer(batch_polls=0) as stub:
        ledger, _ = _ledger(stub, tmp_path, batch={"mode": "api", "poll_s": 0.01})
        asked = [CallRequest(user(f"Question {i}")) for i in range(2)]
        identity, keyed, _ = ledger.keys("stub", asked)
        ep = offline_endpoint(ledger.registry, "stub")
        writer = ledger.warehouse.writer()
        _record(writer, batch_id("stub", "t.ask", keyed), ep, identity, "t.ask", "api", prepare(ep, keyed),
                status="submitted", provider_batch_id="batch_gone")
        writer.close()
        first = ledger.complete("stub", asked, purpose="t.ask")
        assert not any(r.ok for r in first) and all("no longer knows batch batch_gone (HTTP 404)" in r.error
                                                    for r in first)
        second = ledger.complete("stub", asked, purpose="t.ask")
        assert all(r.ok for r in second) and len(stub.batches) == 1  # one new batch, created by the rerun


@pytest.mark.slow
def test_an_import_streams_the_file_in_chunks_and_names_an_answer_from_another_model(stub, tmp_path):
    """The output file is read a line at a time and written `chunk` rows a commit; a result whose body
    names another model than the one asked is stored and said (a dated snapshot of the same model is
    not another model)."""
    from llm_calls.batch import _same_model

    ledger, _ = _ledger(stub, tmp_path, batch=_files(tmp_path))
    asked = [CallRequest(user(f"Question {i}")) for i in range(5)]
    with pytest.raises(BatchPending) as caught:
        ledger.complete("stub", asked, purpose="t.ask")
    out = tmp_path / "results.jsonl"
    run_batch(str(caught.value.path), str(out), StubServer())
    out.write_text(out.read_text().replace('"model": "stub-model"', '"model": "other-model"'))
    report = import_file(ledger.warehouse, ledger.registry, out, chunk=2)
    assert report.answered == 5 and report.other_model == {"stub-model": "other-model"}
    assert "answered by another model than the one asked: 'other-model' for 'stub-model'" in report.line()
    assert _same_model("gpt-4o-mini-2024-07-18", "gpt-4o-mini") and _same_model("org/stub-model", "stub-model")
    assert not _same_model("llama-3-8b", "qwen-7b")


def test_runs_writing_one_batch_file_at_once_all_succeed_and_leave_it_whole(tmp_path):
    """Runs that export into one file at once (one judge's batch, several machines) all succeed,
    each read finds one writer's whole text, and no temporary is left. With one temporary name for
    all writers, a rename found its file gone (FileNotFoundError), or moved another's half-written
    one into place. The writers alternate two texts, so that every write goes through the rename."""
    import threading

    from llm_calls.batch import write_if_changed

    path = tmp_path / "b-0123.jsonl"
    texts = ["".join(json.dumps({"custom_id": f"k{n}", "body": {"x": c * 500}}) + "\n" for n in range(400))
             for c in "yz"]
    errors: list[BaseException] = []
    seen: list[str] = []
    start = threading.Barrier(6)

    def writer(w: int) -> None:
        start.wait()
        for i in range(20):
            try:
                write_if_changed(path, texts[(w + i) % 2])
                seen.append(path.read_text(encoding="utf-8"))
            except BaseException as exc:  # noqa: BLE001 - collected and failed on below
                errors.append(exc)
                return

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(seen) == 120 and all(s in texts for s in seen)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
