"""A batch killed with SIGKILL half way: the rerun repeats no finished call and writes no duplicate."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from llm_calls import CallRequest, Ledger, ModelRegistry
from llm_calls.stub_server import StubServer
from tests.conftest import stub_config, user
from warehouse import Warehouse

N_CALLS = 300
CONCURRENCY = 4

CHILD = textwrap.dedent("""
    import sys
    from configuration import load_config
    from llm_calls import CallRequest, Ledger, ModelRegistry
    from warehouse import Warehouse
    cfg = load_config(sys.argv[1])
    with ModelRegistry(cfg) as reg:
        Ledger(Warehouse(cfg.warehouse_path()), reg).complete(
            "stub", [CallRequest([{"role": "user", "content": f"item {i}"}]) for i in range(int(sys.argv[2]))])
""")


@pytest.mark.slow
def test_rerun_after_sigkill_repeats_no_finished_call(tmp_path):
    with StubServer(delay_s=0.03) as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "m",
                                                           "concurrency": CONCURRENCY}})
        child = subprocess.Popen([sys.executable, "-c", CHILD, cfg.source, str(N_CALLS)])
        deadline = time.monotonic() + 60
        while len(stub.requests) < N_CALLS // 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        assert child.returncode == -signal.SIGKILL
        first_run = set(stub.contents())
        assert N_CALLS // 2 <= len(first_run) < N_CALLS  # really killed mid-batch

        wh = Warehouse(cfg.warehouse_path())
        committed = {json.loads(r["request"])["messages"][0]["content"]
                     for r in wh.rows("SELECT request FROM llm.calls WHERE status = 'ok'")}
        # lost: only the calls in flight (requested but not yet committed) at the kill: at most
        # concurrency + ledger.max_unsaved, which is twice the concurrency by default
        assert len(first_run - committed) <= CONCURRENCY + 2 * CONCURRENCY
        stub.requests.clear()

        with ModelRegistry(cfg) as reg:
            results = Ledger(wh, reg).complete("stub", [CallRequest(user(f"item {i}")) for i in range(N_CALLS)])
        rerun = stub.contents()

    assert all(r.ok for r in results)
    assert not committed & set(rerun), "a call finished before the kill was requested again"
    assert len(rerun) == len(set(rerun)) == N_CALLS - len(committed)
    counts = wh.rows("SELECT count(*) AS n, count(DISTINCT key) AS keys FROM llm.calls")[0]
    assert counts == {"n": N_CALLS, "keys": N_CALLS}
