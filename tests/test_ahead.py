"""Work built ahead in a worker process (generators/ahead.py): what a step takes is what it would
have built, failures travel, a dead worker means building inline, and the worker never outlives
its parent."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from generators import ahead

ROOT = Path(__file__).resolve().parent.parent


def square(job):
    """A build for the tests: (the job, its square, the worker's pid)."""
    if job == "boom":
        raise ValueError("no square for boom")
    if isinstance(job, tuple) and job[0] == "sleep":
        time.sleep(job[1])
        return job
    return job, job * job, os.getpid()


def cube(job):
    return job ** 3


def test_each_job_comes_back_built_in_another_process_and_only_for_a_planned_job():
    with ahead.building_ahead(square, [3, 4, 5], depth=1) as worker:
        assert worker.submitted == 1  # one job past the last taken, none taken yet: the first
        assert ahead.take(square, 7) is None  # not planned: the caller builds it
        assert ahead.take(cube, 3) is None  # planned for another build
        got = ahead.take(square, 4)  # out of order: still its own result
        assert got[:2] == (4, 16) and got[2] == worker.pid != os.getpid()
        assert worker.submitted == 3  # taking the second sent the one after it
        assert ahead.take(square, 3)[:2] == (3, 9)
        assert ahead.take(square, 3) is None  # each planned job is handed over once
        assert ahead.take(square, 5)[:2] == (5, 25)
    assert ahead.take(square, 5) is None  # no worker outside the block


def test_a_failed_build_fails_the_step_that_takes_it_with_the_worker_s_traceback():
    with ahead.building_ahead(square, ["boom", 2]):
        with pytest.raises(ValueError, match="no square for boom") as raised:
            ahead.take(square, "boom")
        assert isinstance(raised.value.__cause__, ahead.WorkerTraceback)
        assert "in square" in str(raised.value.__cause__)
        assert ahead.take(square, 2)[:2] == (2, 4)  # the worker goes on after a failure


def test_when_the_worker_dies_the_steps_build_inline(capsys):
    with ahead.building_ahead(square, [("sleep", 30), 2]) as worker:
        os.kill(worker.pid, signal.SIGKILL)
        assert ahead.take(square, ("sleep", 30)) is None
        assert ahead.take(square, 2) is None
    assert "ended with exit code -9; building inline" in capsys.readouterr().err


def test_a_worker_whose_result_stream_breaks_is_stopped_and_the_steps_build_inline(tmp_path, monkeypatch, capsys):
    """Something that writes to the worker's stdout before it starts serving (here a
    `sitecustomize` that prints) breaks the stream of results: the worker is stopped rather than
    left waiting for jobs, and `take` returns None instead of waiting for ever."""
    import threading

    (tmp_path / "sitecustomize.py").write_text("print('hello from site')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    got: list = []
    with ahead.building_ahead(square, [2]):
        taker = threading.Thread(target=lambda: got.append(ahead.take(square, 2)), daemon=True)
        taker.start()
        taker.join(30)
        assert not taker.is_alive(), "take waited for a worker that can no longer answer"
    assert got == [None]
    assert "result stream broke" in capsys.readouterr().err


def test_closing_with_work_never_taken_stops_the_worker_at_once():
    t0 = time.monotonic()
    with ahead.building_ahead(square, [("sleep", 60)]) as worker:
        time.sleep(0.5)  # the worker is inside the build
    assert time.monotonic() - t0 < 20
    with pytest.raises(ProcessLookupError):
        os.kill(worker.pid, 0)


@pytest.mark.slow
def test_the_worker_exits_when_its_parent_is_killed(tmp_path):
    """A parent killed with SIGKILL cannot close anything: the worker sees its stdin end and exits
    after the build in hand."""
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from generators import ahead
        from tests.test_ahead import square
        with ahead.building_ahead(square, [("sleep", 1), 2]) as worker:
            print(worker.pid, flush=True)
            time.sleep(120)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not _running(pid):
                break
            time.sleep(0.2)
        else:
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"worker {pid} outlived its parent by 30 s")
    finally:
        if parent.poll() is None:
            parent.kill()


def _running(pid: int) -> bool:
    """Whether `pid` is a live process: one that ended but was not reaped yet (a zombie, which an
    init that does not reap leaves behind) has exited."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
