"""The collector's pace while calls are in flight (llm_calls/collector.py): raised for as long as a
session runs, the process's own thresholds back after the last, never lowered, never turned on."""

from __future__ import annotations

import gc
import os

import pytest

from llm_calls import CallRequest
from llm_calls.collector import CALLS_THRESHOLD, CollectorPace
from tests.conftest import user


@pytest.fixture
def thresholds():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_a_session_runs_at_the_calls_pace_and_gives_the_process_its_thresholds_back(stub, stub_ledger, thresholds):
    seen = []

    async def flow(s):
        seen.append(gc.get_threshold())
        return await s.ask("stub", CallRequest(user("q")), "t")

    stub_ledger.run_flows(lambda s: [flow(s)])
    assert seen == [(CALLS_THRESHOLD, 10, 10)]  # the older generations keep theirs
    assert gc.get_threshold() == (700, 10, 10)


def test_the_pace_is_given_back_when_the_last_of_several_sessions_ends(thresholds):
    pace = CollectorPace(5_000)
    with pace:
        with pace:
            assert gc.get_threshold() == (5_000, 10, 10)
        assert gc.get_threshold() == (5_000, 10, 10)  # one still open
    assert gc.get_threshold() == (700, 10, 10)


def test_the_pace_never_lowers_a_threshold_nor_turns_a_disabled_collector_on(thresholds):
    pace = CollectorPace(5_000)
    gc.set_threshold(50_000, 10, 10)
    with pace:
        assert gc.get_threshold() == (50_000, 10, 10)
    gc.set_threshold(0, 10, 10)  # threshold 0: automatic collection is off
    with pace:
        assert gc.get_threshold() == (0, 10, 10)
    assert gc.get_threshold() == (0, 10, 10)


def test_thresholds_the_process_sets_while_a_session_runs_are_kept(thresholds):
    pace = CollectorPace(5_000)
    with pace:
        gc.set_threshold(1_000, 5, 5)  # the process's own choice, made meanwhile
    assert gc.get_threshold() == (1_000, 5, 5)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX's")
def test_a_forked_child_counts_its_own_sessions_not_its_parents(thresholds):
    pace = CollectorPace(5_000)
    with pace:  # the parent's session, open across the fork
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its sessions set the pace and give back what they found
            try:
                with pace:
                    pass
                gc.set_threshold(700, 10, 10)
                with pace:
                    inside = gc.get_threshold()[0]
                os.write(write, f"{inside} {gc.get_threshold()[0]}".encode())
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        os.close(write)
        assert os.read(read, 100).decode() == "5000 700"
        assert gc.get_threshold() == (5_000, 10, 10)  # the parent's session still open
    assert gc.get_threshold() == (700, 10, 10)
