"""A dying embedded server is named as such: the signal or exit code, its log, what to do; the
calls in flight fail with that error, the rest are not sent, answered calls are kept, and a server
that crashes is not started again (one killed from outside may be)."""

import os
import signal
import threading
import time

import pytest

from configuration import parse_config
from llm_calls import CallRequest, Ledger, ModelRegistry, embedded
from llm_calls.embedded import EmbeddedModelError, EmbeddedServer, describe_exit
from llm_calls.totals import TOTALS
from llm_calls.transport import HEALTH
from tests.conftest import user, write_config
from warehouse import Warehouse

MODEL = "smollm2-135m-instruct"


@pytest.fixture(autouse=True)
def fresh_process_state(tmp_path, monkeypatch):
    """Each test is a run of its own: no server, crash or down endpoint remembered from another."""
    monkeypatch.setenv("BENCHSMITH_RUN_DIR", str(tmp_path / "run"))
    for state in (embedded._BROKEN, embedded._DEATHS, HEALTH.down):
        state.clear()
    yield
    for state in (embedded._BROKEN, embedded._DEATHS, HEALTH.down):
        state.clear()


@pytest.fixture
def crashing_build(tmp_path, monkeypatch):
    """The embedded server is a process that dies with SIGILL on its first completion."""
    starts = tmp_path / "starts"
    monkeypatch.setattr(EmbeddedServer, "server_module", "tests.fake_llama_server")
    monkeypatch.setenv("FAKE_LLAMA_STARTS", str(starts))
    return starts


def test_exit_statuses_in_words():
    assert describe_exit(-4) == "killed by SIGILL (illegal instruction)"
    assert describe_exit(-9) == "killed by SIGKILL (killed)"
    assert describe_exit(3) == "exited with code 3"


@pytest.mark.slow
def test_a_server_that_dies_on_its_first_completion_is_named_and_not_started_again(tmp_path, crashing_build):
    cfg = parse_config({"warehouse": {"path": str(tmp_path / "wh.duckdb")}}, str(tmp_path / "cfg.yaml"))
    with ModelRegistry(cfg) as reg:
        ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)
        with pytest.raises(EmbeddedModelError) as first:
            ledger.complete("smollm2", [CallRequest(user("Say hi."))])
        t0 = time.monotonic()
        with pytest.raises(EmbeddedModelError) as again:
            ledger.complete("smollm2", [CallRequest(user("Say hi again."))])
        refused_in = time.monotonic() - t0
    message = str(first.value)
    head = message.splitlines()[0]
    assert "killed by SIGILL (illegal instruction) during its start-up check" in head
    assert "make install" in head  # what to do
    assert "Fatal Python error: Illegal instruction" in message  # the last lines of its log
    assert "loaded meta data" in message
    named = message.split("last lines of its log (", 1)[1].split(")", 1)[0]
    assert os.path.exists(named) and os.path.dirname(named) == str(tmp_path / "run")  # kept, where it says
    # the next batch starts no server that would die the same way, and says why at once
    assert head in str(again.value) and "Not started again in this process" in str(again.value)
    assert refused_in < 1.0
    assert len(crashing_build.read_text().split()) == 1


def test_two_threads_starting_a_server_that_crashes_at_once_start_it_once(tmp_path, crashing_build):
    """Two steps of one run (each its own registry) start the embedded server at the same moment:
    one starts it and it crashes; the other, which waited for that start, refuses to start another."""
    cfg = parse_config({"warehouse": {"path": str(tmp_path / "wh.duckdb")}}, str(tmp_path / "cfg.yaml"))
    together = threading.Barrier(2)
    errors: list[str] = []

    def start():
        with ModelRegistry(cfg) as reg:
            together.wait()
            try:
                reg.endpoint("smollm2")
            except EmbeddedModelError as exc:
                errors.append(str(exc))

    threads = [threading.Thread(target=start) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(errors) == 2 and all("killed by SIGILL" in e for e in errors), errors
    assert sum("Not started again in this process" in e for e in errors) == 1
    assert len(crashing_build.read_text().split()) == 1


@pytest.mark.slow
def test_the_run_command_names_the_signal_per_step_and_starts_one_server(tmp_path, crashing_build, capsys,
                                                                       monkeypatch):
    from runner import command as materialize_all

    path = write_config(tmp_path, {
        "warehouse": {"path": str(tmp_path / "wh.duckdb")},
        "ib": {"datasets": {"arithmetic": {"form": "single", "generator": "arithmetic",
                                           "count": {"demo": 2, "paper": 2}},
                            "even_numbers": {"form": "multiple", "generator": "even_numbers",
                                             "count": {"demo": 2, "paper": 2}}},
               "settings": ["vanilla"]}})
    monkeypatch.setenv("BENCHSMITH_CONFIG", str(path))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()
    code = materialize_all.main(["--select", "ib"])
    err = capsys.readouterr().err
    failed = [line for line in err.splitlines() if line.startswith("FAILED: ")]
    assert code == 1
    evaluate = [line for line in failed if "ib_responses" in line]
    assert len(evaluate) >= 2  # one per (dataset, model) slice
    assert all("killed by SIGILL (illegal instruction)" in line for line in evaluate), evaluate
    assert len(crashing_build.read_text().split()) == 1  # the first start crashed; no other was tried


def run_batch_and_kill(ledger: Ledger, registry: ModelRegistry, sig: signal.Signals, n: int = 10):
    """Ask `n` calls in a thread and kill the server with `sig` once two have been answered."""
    TOTALS.reset()
    requests = [CallRequest(user(f"Count from 1 to 20, call {i}."), {"max_tokens": 24}) for i in range(n)]
    out: dict[str, object] = {}
    worker = threading.Thread(target=lambda: out.update(results=ledger.complete("smollm2", requests)))
    worker.start()
    deadline = time.monotonic() + 180
    while TOTALS.answered < 2 and time.monotonic() < deadline and worker.is_alive():
        time.sleep(0.05)
    server = registry._servers[MODEL]
    pid = server.pid
    os.kill(pid, sig)
    worker.join(120)
    assert not worker.is_alive()
    return out["results"], pid


def calls(ledger: Ledger) -> list[dict]:
    return ledger.warehouse.rows("SELECT status, error, attempts FROM llm.calls ORDER BY finished_at")


@pytest.mark.slow
@pytest.mark.embedded
@pytest.mark.parametrize("sig, name, restarts", [(signal.SIGKILL, "SIGKILL", True), (signal.SIGILL, "SIGILL", False)])
def test_a_server_killed_mid_run_fails_the_calls_in_flight_with_one_named_error(tmp_path, sig, name, restarts):
    cfg = parse_config({"warehouse": {"path": str(tmp_path / "wh.duckdb")}}, str(tmp_path / "cfg.yaml"))
    with ModelRegistry(cfg) as reg:
        ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)
        results, pid = run_batch_and_kill(ledger, reg, sig)
        answered = [r for r in results if r.ok]
        failed = [r for r in results if not r.ok]
        assert len(answered) >= 2 and failed  # answered calls kept
        assert all(f"(pid {pid}) killed by {name}" in r.error for r in failed), [r.error for r in failed]
        # no retry storm: the call in flight was tried once, the others were never sent
        assert sum(r.attempts for r in failed) <= 1
        assert all("no request sent" in r.error for r in failed if r.attempts == 0)
        rows = calls(ledger)
        assert sum(r["status"] == "ok" for r in rows) == len(answered)
        assert sum(r["status"] == "failed" for r in rows) == len(failed)
        # the next batch: a killed server is started again; a crashed one is not
        if restarts:
            [again] = ledger.complete("smollm2", [CallRequest(user("Say yes."), {"max_tokens": 4})])
            assert again.ok and reg._servers[MODEL].pid != pid
        else:
            with pytest.raises(EmbeddedModelError, match=r"killed by SIGILL .*\n?[\s\S]*Not started again"):
                ledger.complete("smollm2", [CallRequest(user("Say yes."), {"max_tokens": 4})])


def test_a_process_that_joined_the_server_reads_the_crash_from_its_log(tmp_path):
    """A user that did not start the server has no exit status to read: the wrapper's faulthandler line
    in the log names the crash, so it too refuses to start one that would die the same way."""
    server = EmbeddedServer(MODEL)
    log = tmp_path / "server.log"
    log.write_text("llama_context: graph_compute\nFatal Python error: Illegal instruction\n\nCurrent thread:\n")
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    server.pid, server._log_path = dead, log  # joined: no Popen of its own
    why = server.death(wait_s=0)
    assert why and "killed by SIGILL (illegal instruction) while answering" in why
    assert embedded.broken_reason(server.model_path) == why


@pytest.fixture
def working_build(tmp_path, monkeypatch):
    """The embedded server is a stand-in that works, one request at a time, and can be kept busy."""
    starts = tmp_path / "starts"
    monkeypatch.setattr(EmbeddedServer, "server_module", "tests.fake_llama_server")
    monkeypatch.setenv("FAKE_LLAMA_STARTS", str(starts))
    monkeypatch.setenv("FAKE_LLAMA_ANSWERS", "1")
    monkeypatch.setenv("FAKE_LLAMA_BUSY_S", "15")
    return starts


def _keep_busy(server):
    """A long generation on the single-worker server, sent from a thread."""
    import json
    import urllib.request

    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "[[busy]]"}]}).encode()
    request = urllib.request.Request(f"{server.base_url}/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    thread = threading.Thread(target=lambda: urllib.request.urlopen(request, timeout=60).read(), daemon=True)
    thread.start()
    time.sleep(0.5)
    return thread


@pytest.mark.slow
def test_a_busy_server_is_joined_never_started_again_beside_it(tmp_path, working_build):
    """D12: a server busy with a long generation (or starved on a loaded machine) does not answer a
    health probe within 5 s; a new user took it for dead and started a second, then a third, beside
    it. A live server of this model whose port takes connections is joined, however busy."""
    first = EmbeddedServer(MODEL).start()
    try:
        busy = _keep_busy(first)
        t0 = time.monotonic()
        second = EmbeddedServer(MODEL).start()
        try:
            assert second.pid == first.pid and not second.started_here
            assert time.monotonic() - t0 < 5  # joined at once, not after a probe's timeout
            assert len(working_build.read_text().split()) == 1  # one server was ever started
        finally:
            second.stop()
        busy.join(timeout=30)
    finally:
        first.stop()


@pytest.mark.slow
def test_a_server_that_stopped_listening_is_stopped_before_another_is_started(tmp_path, working_build, monkeypatch):
    """A live server of this model that takes no connection any more is stopped first: never two."""
    first = EmbeddedServer(MODEL).start()
    old = first.pid
    try:
        os.kill(old, signal.SIGSTOP)  # alive, and its listening socket takes connections into the backlog...
        monkeypatch.setattr(EmbeddedServer, "_serving", lambda self, known, timeout=30.0: False)  # ...so say it is wedged
        second = EmbeddedServer(MODEL).start()
        try:
            assert second.pid != old and second.started_here
            assert not embedded._pid_alive(old)  # the wedged one is gone
        finally:
            second.stop()
    finally:
        if embedded._pid_alive(old):
            os.kill(old, signal.SIGKILL)
        first.stop()


def test_a_user_that_joined_a_server_this_process_started_names_how_it_died(tmp_path, working_build):
    """D12: a step that joined the server another step of the same run started read no exit status
    ("status unknown: another process started it"). This process started it: the signal is named."""
    first = EmbeddedServer(MODEL).start()
    joined = EmbeddedServer(MODEL).start()
    try:
        assert joined.pid == first.pid and not joined.started_here
        os.kill(first.pid, signal.SIGKILL)
        why = joined.death(wait_s=5)
        assert why and f"(pid {first.pid}) killed by SIGKILL" in why and "another process" not in why
    finally:
        joined.stop()
        first.stop()


@pytest.mark.slow
def test_a_server_whose_users_all_left_removes_its_log(tmp_path, working_build):
    """The run command ends through `os._exit` (no `stop()`): the server then exits for want of users,
    and its log, one per start, went with it instead of piling up in the temporary folder (151 of them,
    12 MB, after a day of test runs). The log lies beside the server's state files, not loose in /tmp; a
    crashed server's stays (the test above)."""
    import subprocess
    import sys

    code = ("import os, sys; from llm_calls.embedded import EmbeddedServer; "
            f"s = EmbeddedServer({MODEL!r}).start(); print(s.pid, s._log_path, flush=True); os._exit(0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                          env={**os.environ, "BENCHSMITH_RUN_DIR": str(tmp_path / "run")})
    pid, log = done.stdout.split()
    assert os.path.dirname(log) == str(tmp_path / "run") and os.path.basename(log).startswith(f"embedded-{MODEL}-")
    deadline = time.monotonic() + 15
    while embedded._pid_alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not embedded._pid_alive(int(pid))
    assert not os.path.exists(log)
