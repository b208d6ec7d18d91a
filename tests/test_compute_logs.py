"""Compute logs captured per run (runner/compute_logs.py), so that the command's steps can execute at
once in one process: each run's files hold its own output, and no helper process is started."""

import subprocess
import sys
import threading
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager

from runner.compute_logs import ThreadComputeLogManager, open_instance


def _job(barrier: threading.Barrier) -> dg.JobDefinition:
    @dg.op
    def talk(context: dg.OpExecutionContext) -> None:
        who = context.run.tags["who"]
        barrier.wait(timeout=20)  # both runs are inside their capture now
        for k in range(40):
            print(f"{who} says {k}")
            sys.stderr.write(f"{who} warns {k}\n")
        barrier.wait(timeout=20)  # neither ends its capture before the other has written

    @dg.job
    def chatty() -> None:
        talk()

    return chatty


def _captured(base: Path, run_id: str, ext: str) -> str:
    [path] = [p for p in base.rglob(f"*.{ext}") if run_id in str(p)]
    return path.read_text()


def test_two_runs_at_once_each_keep_their_own_output_and_no_helper_process_starts(tmp_path, monkeypatch):
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")  # Dagster's default manager
    instance, concurrent = open_instance(str(tmp_path))
    assert concurrent and isinstance(instance.compute_log_manager, ThreadComputeLogManager)
    helpers: list = []  # Dagster's own manager starts `tail -F` and a watcher per stream and run
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: helpers.append(a) or pytest.fail("a helper process"))
    job = _job(threading.Barrier(2))
    stdout, stderr = sys.stdout, sys.stderr
    results: dict[str, dg.ExecuteInProcessResult] = {}
    threads = [threading.Thread(target=lambda w=who: results.__setitem__(
        w, job.execute_in_process(instance=instance, tags={"who": w}))) for who in ("left", "right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert all(r.success for r in results.values()) and len(results) == 2 and not helpers
    base = tmp_path / "storage"
    for who, other in (("left", "right"), ("right", "left")):
        out = _captured(base, results[who].run_id, "out")
        err = _captured(base, results[who].run_id, "err")
        assert [line for line in out.splitlines() if " says " in line] == [f"{who} says {k}" for k in range(40)]
        assert [line for line in err.splitlines() if " warns " in line] == [f"{who} warns {k}" for k in range(40)]
        assert other not in out and other not in err
    assert sys.stdout is stdout and sys.stderr is stderr  # the tees come off with the last capture
    instance.dispose()


def test_a_manager_that_redirects_the_processs_descriptors_keeps_the_runs_one_at_a_time(tmp_path):
    (tmp_path / "dagster.yaml").write_text(
        "compute_logs:\n  module: tests.test_compute_logs\n  class: DescriptorManager\n"
        f"  config:\n    base_dir: {tmp_path / 'logs'}\n")
    instance, concurrent = open_instance(str(tmp_path))
    assert isinstance(instance.compute_log_manager, DescriptorManager) and not concurrent
    instance.dispose()
    (tmp_path / "dagster.yaml").write_text(
        "compute_logs:\n  module: dagster._core.storage.noop_compute_log_manager\n  class: NoOpComputeLogManager\n")
    instance, concurrent = open_instance(str(tmp_path))
    assert concurrent  # captures nothing: nothing to swap
    instance.dispose()


class DescriptorManager(LocalComputeLogManager):
    """A manager of someone else's that captures as Dagster's does (descriptors, helper processes)."""

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        return cls(inst_data=inst_data, **config_value)


@pytest.mark.slow
def test_the_instance_is_opened_one_process_at_a_time_under_its_lock(tmp_path):
    """Two runs starting at once on a fresh DAGSTER_HOME each set up Dagster's SQLite files and left
    runs.db with two alembic heads (every later run crashed). The instance is opened under an exclusive
    lock on the home: while another process holds it, opening waits."""
    import fcntl
    import os
    import threading

    from runner.compute_logs import INSTANCE_LOCK

    fd = os.open(tmp_path / INSTANCE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process setting the instance up
    opened = threading.Event()
    thread = threading.Thread(target=lambda: (open_instance(str(tmp_path)), opened.set()), daemon=True)
    thread.start()
    assert not opened.wait(1.5)  # it waits for the lock
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    assert opened.wait(60)
    import sqlite3

    heads = sqlite3.connect(tmp_path / "history" / "runs.db").execute("SELECT count(*) FROM alembic_version").fetchone()
    assert heads == (1,)


def test_a_run_whose_warehouse_is_gone_at_the_end_exits_1(tmp_path, capsys):
    """A warehouse removed while the run went on: the summary said so, the exit code said 0."""
    from configuration import parse_config
    from reporting.summary import Done
    from runner.command import _finish
    from warehouse import Warehouse

    cfg = parse_config({"warehouse": {"path": str(tmp_path / "wh.duckdb")}}, str(tmp_path / "cfg.yaml"))
    step = type("Step", (), {"family": "ib", "label": "ib items", "key": "ib_items"})()
    status = _finish([Done(step, True, 1.0, (0, 0, 0))], [], Warehouse(tmp_path / "wh.duckdb"), cfg)
    assert status == 1 and "does not exist at the end of the run" in capsys.readouterr().err
