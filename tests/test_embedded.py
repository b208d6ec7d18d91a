"""The embedded SmolLM2-135M server: a real model answering through the same ledger path."""

import os
import socket
import subprocess
import sys
import textwrap
import time

import dagster as dg
import pytest

from assets.resources import LLMResource
from configuration import parse_config
from llm_calls import CallRequest, Ledger, ModelRegistry, embedded_model_path
from llm_calls.embedded import EmbeddedModelError, EmbeddedServer
from tests.conftest import user, write_config
from warehouse import Warehouse

pytestmark = pytest.mark.embedded


@pytest.fixture(autouse=True)
def private_server_registry(tmp_path, monkeypatch):
    """These tests watch a server's whole life: each gets its own state directory, so a server
    another process shares (a demo running beside the suite) cannot keep theirs alive."""
    monkeypatch.setenv("BENCHSMITH_RUN_DIR", str(tmp_path / "run"))


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_gguf_file_ships_inside_the_installed_wheel():
    path = embedded_model_path("smollm2-135m-instruct")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.read_bytes()[:4] == b"GGUF"


@pytest.mark.slow
def test_embedded_model_answers_a_real_prompt_through_the_ledger(tmp_path):
    cfg = parse_config({"warehouse": {"path": str(tmp_path / "wh.duckdb")}}, str(tmp_path / "cfg.yaml"))
    wh = Warehouse(cfg.warehouse_path())
    with ModelRegistry(cfg) as reg:
        ledger = Ledger(wh, reg)
        [result] = ledger.complete("smollm2", [CallRequest(user("What is the capital of France? Answer in one word."),
                                                           {"max_tokens": 16})])
        port = reg.endpoint("smollm2").host.split(":")[1]
        assert port_open(int(port))
    assert port_open(int(port)) is False  # stopped on close
    assert result.ok and not result.cached
    assert "paris" in result.text.lower()
    assert result.completion_tokens and result.prompt_tokens
    row = wh.rows("SELECT model_identity, endpoint_host, status FROM llm.calls")[0]
    assert row["model_identity"] == "embedded:SmolLM2-135M-Instruct.Q4_1.gguf"  # no port: cache survives restarts
    assert row["status"] == "ok" and row["endpoint_host"].startswith("127.0.0.1:")


@pytest.mark.slow
def test_embedded_server_is_stopped_when_a_step_fails(tmp_path):
    path = write_config(tmp_path, {"warehouse": {"path": str(tmp_path / "wh.duckdb")}})
    ports: list[int] = []

    @dg.asset
    def failing_after_model_start(llm: LLMResource) -> None:
        ports.append(int(llm.registry.endpoint("smollm2").host.split(":")[1]))
        raise RuntimeError("boom")

    result = dg.materialize([failing_after_model_start], resources={"llm": LLMResource(config_path=str(path))},
                            raise_on_error=False)
    assert not result.success
    assert ports and not port_open(ports[0])


@pytest.mark.slow
def test_server_that_cannot_start_fails_with_its_log(tmp_path):
    server = EmbeddedServer("smollm2-135m-instruct", startup_timeout_s=60)
    server.model_path = tmp_path / "corrupt.gguf"
    server.model_path.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(EmbeddedModelError, match=r"embedded server for smollm2-135m-instruct \(pid \d+\) exited with "
                                                 r"code 1 while loading the model[\s\S]*Failed to load model"):
        server.start()
    assert server.port is not None and not port_open(server.port)


@pytest.mark.slow
def test_server_survives_across_ledger_batches(tmp_path):
    # Regression: the server was tied to the worker thread that started it and died between batches.
    cfg = parse_config({"warehouse": {"path": str(tmp_path / "wh.duckdb")}}, str(tmp_path / "cfg.yaml"))
    with ModelRegistry(cfg) as reg:
        ledger = Ledger(Warehouse(cfg.warehouse_path()), reg)
        results, hosts = [], set()
        for word in ("one", "two", "three"):
            results += ledger.complete("smollm2", [CallRequest(user(f"Repeat the word {word}."), {"max_tokens": 8})])
            hosts.add(reg.endpoint("smollm2").host)
            time.sleep(0.6)  # give a wrongly-tied server time to die
    assert all(r.ok for r in results), [r.error for r in results]
    assert len(hosts) == 1


@pytest.mark.slow
def test_server_exits_when_its_only_user_is_killed():
    child = subprocess.Popen(
        [sys.executable, "-c", "from llm_calls.embedded import EmbeddedServer; import time; "
                               "s = EmbeddedServer('smollm2-135m-instruct').start(); print(s.port, flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )
    port = int(child.stdout.readline())
    assert port_open(port)
    child.kill()
    child.wait()
    deadline = time.monotonic() + 15
    while port_open(port) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not port_open(port)


def _servers_for(lock_dir) -> list[str]:
    """Command lines of the embedded servers whose users file lies in `lock_dir`."""
    out = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "llm_calls.serve_embedded" in line and str(lock_dir) in line]


@pytest.mark.slow
def test_concurrent_users_share_one_server_and_the_last_one_out_stops_it(tmp_path):
    env = {**os.environ, "BENCHSMITH_RUN_DIR": str(tmp_path / "run")}
    code = textwrap.dedent("""
        import sys, time
        from configuration import parse_config
        from llm_calls import CallRequest, Ledger, ModelRegistry
        from warehouse import Warehouse
        cfg = parse_config({"warehouse": {"path": sys.argv[1]}}, sys.argv[1] + ".yaml")
        with ModelRegistry(cfg) as reg:
            r = Ledger(Warehouse(cfg.warehouse_path()), reg).complete(
                "smollm2", [CallRequest([{"role": "user", "content": sys.argv[2]}], {"max_tokens": 4})])[0]
            print(reg.endpoint("smollm2").host, r.ok, flush=True)
            time.sleep(float(sys.argv[3]))
    """)
    first = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "a.duckdb"), "Say one.", "6"], env=env,
                             stdout=subprocess.PIPE, text=True)
    second = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "b.duckdb"), "Say two.", "1"], env=env,
                              stdout=subprocess.PIPE, text=True)
    host_a, host_b = first.stdout.readline().split(), second.stdout.readline().split()
    assert host_a == host_b and host_a[1] == "True"  # the same server answered both processes
    assert len(_servers_for(tmp_path / "run")) == 1  # never two at once on the same model file
    second.wait(timeout=60)
    port = int(host_a[0].split(":")[1])
    assert port_open(port)  # the first process still uses it
    first.wait(timeout=60)
    deadline = time.monotonic() + 15
    while (port_open(port) or _servers_for(tmp_path / "run")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not port_open(port) and not _servers_for(tmp_path / "run")  # the last user out stopped it


def test_threads_leave_one_usable_core_to_the_pipeline():
    from llm_calls.embedded import usable_cores

    cores = len(os.sched_getaffinity(0))
    assert usable_cores() == cores
    assert EmbeddedServer("smollm2-135m-instruct").n_threads == max(1, cores - 1)


@pytest.mark.slow
def test_two_concurrent_materialisations_never_run_two_servers(tmp_path):
    """Two `materialize_all` runs at once, each with its own warehouse and Dagster instance, both
    on the embedded model: the server processes are counted every 0.2 s while they run."""
    import threading

    run_dir = tmp_path / "run"
    procs, counts = [], []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        cfg = {"warehouse": {"path": str(tmp_path / name / "wh.duckdb")},
               "reply_checks": {"failed_calls": 0.0, "undecided_replies": 1.0, "truncated_replies": 1.0},
               "ib": {"datasets": {"fld": {"form": "judging", "generator": "fld", "count": {"demo": 2, "paper": 2}}},
                      "settings": ["vanilla", "few_shot"], "max_tokens": {"demo": 16, "paper": 16}}}
        path = write_config(tmp_path / name, cfg)
        env = {**os.environ, "BENCHSMITH_RUN_DIR": str(run_dir), "BENCHSMITH_CONFIG": str(path),
               "DAGSTER_HOME": str(tmp_path / name)}
        procs.append(subprocess.Popen([sys.executable, "-m", "assets.materialize_all", "--select", "ib",
                                       "--partition", "fld"], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            counts.append(len(_servers_for(run_dir)))
            time.sleep(0.2)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        outputs = [p.communicate(timeout=600) for p in procs]
    finally:
        done.set()
        sampler.join()
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-2000:]
        assert "ib_responses [fld|smollm2]" in out
    assert max(counts) == 1 and counts.count(1) >= 5  # it served, and never beside a second one
    for name in ("a", "b"):  # both runs got answers from the model
        calls = Warehouse(tmp_path / name / "wh.duckdb").rows("SELECT status, count(*) AS n FROM llm.calls GROUP BY 1")
        assert {r["status"]: r["n"] for r in calls}.get("ok", 0) >= 4, calls
