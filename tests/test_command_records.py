"""`runs.commands`: the command's own record of its time, CPU and calls (runner/command_records.py),
and the span of the calls this process counted (`TOTALS.calls_span`) it is measured over."""

from __future__ import annotations

import time

from llm_calls import TOTALS
from reporting.summary import Done
from runner import command_records
from warehouse import Warehouse


def test_the_calls_span_runs_from_the_first_count_to_the_last_with_the_cpu_spent_between():
    TOTALS.reset()
    assert TOTALS.calls_span() is None
    TOTALS.add("r1", cached=3)
    # this thread's own CPU: the process's clock also counts other threads' (a pool left by an earlier
    # test), which would end the loop before 0.05 s of wall had passed
    deadline = time.thread_time() + 0.05
    while time.thread_time() < deadline:  # CPU spent between two counts
        pass
    time.sleep(0.05)  # and time without CPU
    TOTALS.add("r2", answered=1, failed=1)
    seconds, cpu = TOTALS.calls_span()
    assert seconds >= 0.1 - 1e-3 and 0.05 - 1e-3 <= cpu < seconds
    TOTALS.reset()
    assert TOTALS.calls_span() is None


def test_a_command_that_ran_steps_stores_one_row_of_its_calls_and_cpu_and_one_that_ran_none_stores_nothing(tmp_path):
    TOTALS.reset()
    TOTALS.add("r1", cached=5)
    TOTALS.add("r1", answered=7, failed=2)
    ran = [Done("items", True, 1.0, (0, 0, 0)), Done("slice", True, 2.0, (5, 7, 2)),
           Done("metrics", True, 0.5, (0, 0, 0), skipped=True)]
    wh = Warehouse(tmp_path / "wh.duckdb")
    command_records.record(wh, ran, 0.25)
    row, = wh.rows("SELECT * FROM runs.commands")
    assert (row["steps"], row["calls"], row["new_calls"], row["cores"], row["load_avg"]) == (2, 14, 9, row["cores"], 0.25)
    assert row["cores"] >= 1 and row["cpu_s"] >= row["calls_cpu_s"] >= 0 and row["wall_s"] > 0
    assert row["started_at"] < row["finished_at"] and row["calls_s"] >= 0
    command_records.record(wh, [Done("metrics", True, 0.0, (0, 0, 0), skipped=True)], None)  # all up to date
    command_records.record(Warehouse(tmp_path / "other.duckdb"), [], None)
    assert wh.scalar("SELECT count(*) FROM runs.commands") == 1
    TOTALS.reset()


def test_a_warehouse_that_cannot_take_the_record_costs_a_line_on_stderr_not_the_run(tmp_path, capsys):
    class Refusing:
        def upsert(self, table, rows):
            raise OSError("disk full")

    command_records.record(Refusing(), [Done("slice", True, 1.0, (1, 0, 0))], None)
    assert "the command's record was not written to runs.commands (OSError: disk full)" in capsys.readouterr().err


def test_the_row_names_no_calls_span_before_any_call():
    TOTALS.reset()
    row = command_records.row([Done("items", True, 1.0, (0, 0, 0))], 1.5)
    assert row["calls"] == 0 and row["calls_s"] is None and row["calls_cpu_s"] is None and row["load_avg"] == 1.5


def test_the_calls_cpu_counts_the_call_loops_thread_and_no_other_thread():
    import threading

    from llm_calls import calls_cpu
    from llm_calls.totals import CALL_THREADS

    def burn(seconds: float) -> None:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    before = calls_cpu()
    for name in ("a-step", f"{CALL_THREADS}-io_0"):  # a step's own work, the loop's DuckDB thread
        others = threading.Thread(target=burn, args=(0.2,), name=name)
        others.start()
        others.join()
    assert calls_cpu() - before < 0.05
    release = threading.Event()

    def call_thread() -> None:
        burn(0.1)
        release.wait()

    calling = threading.Thread(target=call_thread, name=CALL_THREADS)
    calling.start()
    try:
        deadline = time.monotonic() + 10
        while calls_cpu() - before < 0.1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert 0.1 - 1e-3 <= calls_cpu() - before < 0.15
    finally:
        release.set()
        calling.join()


def test_the_counts_read_the_process_cpu_clock_at_most_every_ten_milliseconds(monkeypatch):
    """Each call counts itself from the call loop; reading the process's CPU clock there cost ~60 us
    a read (`llm_calls/totals.py`), so a burst of counts reads it once, and the span still ends on
    the last count's time."""
    from llm_calls import totals

    reads = []
    real = time.process_time
    monkeypatch.setattr(totals.time, "process_time", lambda: reads.append(1) or real())
    TOTALS.reset()
    t0 = time.monotonic()
    for _ in range(1000):
        TOTALS.add("r", answered=1)
    elapsed = time.monotonic() - t0
    assert 1 <= len(reads) <= 1 + elapsed / totals.CPU_READ_EVERY_S + 1
    assert TOTALS.answered == 1000 and TOTALS.calls_span()[0] >= 0
    TOTALS.reset()
