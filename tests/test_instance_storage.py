"""runner/instance_storage.py: the command's Dagster runs write the files Dagster writes (each run's
events, the runs' records), with engines and connections kept instead of one per statement."""

import sqlite3
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.runs.sqlite import sqlite_run_storage
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage

from runner import instance_storage
from runner.compute_logs import open_instance
from runner.instance_storage import RunEventLogStorage, RunStorage

ROOT = Path(__file__).resolve().parent.parent
# no compute logs, and no telemetry (Dagster would write it under $DAGSTER_HOME, the repository under `make test`)
NOOP_LOGS = ("compute_logs:\n  module: dagster._core.storage.noop_compute_log_manager\n  class: NoOpComputeLogManager\n"
             "telemetry:\n  enabled: false\n")


def _job(keys):
    @dg.asset(partitions_def=dg.StaticPartitionsDefinition(keys), check_specs=[dg.AssetCheckSpec("ok", asset="step")])
    def step(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={"partition": context.partition_key},
                                    check_results=[dg.AssetCheckResult(passed=context.partition_key != "b")])

    return dg.Definitions(assets=[step], jobs=[dg.define_asset_job("one", selection=[step])]).resolve_job_def("one")


def _file(path):
    """What makes a run file what it is: its schema, its alembic revision, its journal mode."""
    conn = sqlite3.connect(path)
    try:
        return (sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()),
                conn.execute("SELECT version_num FROM alembic_version").fetchall(),
                conn.execute("PRAGMA journal_mode").fetchone())
    finally:
        conn.close()


def test_the_files_the_command_writes_are_the_files_dagster_writes_and_each_storage_reads_the_others(tmp_path):
    (tmp_path / "dagster.yaml").write_text(f"storage:\n  sqlite:\n    base_dir: {tmp_path / 'store'}\n{NOOP_LOGS}")
    ours, _ = open_instance(str(tmp_path))
    theirs = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path)))
    assert isinstance(ours.event_log_storage, RunEventLogStorage)
    assert type(theirs.event_log_storage) is SqliteEventLogStorage
    job = _job(["a", "b"])
    mine = job.execute_in_process(instance=ours, partition_key="a").run_id
    dagsters = job.execute_in_process(instance=theirs, partition_key="b").run_id
    runs = tmp_path / "store" / "history" / "runs"
    made = _file(runs / f"{mine}.db")
    assert made == _file(runs / f"{dagsters}.db")
    assert made[1] and made[2] == ("wal",)

    def kinds(instance, run_id):
        return [e.dagster_event_type for e in instance.all_logs(run_id) if e.is_dagster_event]

    assert kinds(theirs, mine) == kinds(ours, mine) == kinds(theirs, dagsters)
    # the runs' records: each storage reads the other's, status and tags included
    for run_id in (mine, dagsters):
        a, b = ours.get_run_by_id(run_id), theirs.get_run_by_id(run_id)
        assert (a.status, a.tags, a.job_name) == (b.status, b.tags, b.job_name)
        assert a.status == dg.DagsterRunStatus.SUCCESS and a.job_name == "one"
    assert isinstance(ours.run_storage, RunStorage) and type(theirs.run_storage) is SqliteRunStorage
    # the asset index (the UI's partitions and check verdicts) holds both runs, whichever wrote them
    assert theirs.get_materialized_partitions(dg.AssetKey("step")) == {"a", "b"}
    history = theirs.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("step"), "ok"), limit=5)
    assert sorted(r.run_id for r in history) == sorted([mine, dagsters])


def test_each_file_gets_one_engine_and_only_the_last_few_are_kept(tmp_path, monkeypatch):
    (tmp_path / "dagster.yaml").write_text(NOOP_LOGS)
    instance, _ = open_instance(str(tmp_path))  # no storage named: Dagster's default, in tmp_path
    storage = instance.event_log_storage
    assert isinstance(storage, RunEventLogStorage)
    made, made_by_dagster = [], []
    real = instance_storage.create_engine
    monkeypatch.setattr(instance_storage, "create_engine", lambda *a, **k: made.append(a[0]) or real(*a, **k))
    monkeypatch.setattr(sqlite_run_storage, "create_engine", lambda *a, **k: made_by_dagster.append(a[0]) or real(*a, **k))
    monkeypatch.setattr(instance_storage, "ENGINES", 3)
    job = _job([str(i) for i in range(5)])
    run_ids = [job.execute_in_process(instance=instance, partition_key=str(i)).run_id for i in range(5)]
    # a run stores about 15 events, in its own file and the index: one engine each, not one per event
    assert len(made) == len(set(made)) == 5 + 1
    assert made_by_dagster == []  # the runs' records: the engine made with the instance, for every read and write
    assert len(storage._engines) == 3 and run_ids[4] in storage._engines and run_ids[0] not in storage._engines
    assert len(instance.all_logs(run_ids[0])) > 10  # an evicted file is opened again when read
    runs = tmp_path / "history" / "runs"
    assert {p.name for p in runs.glob("*.db-wal")} == {f"{k}.db-wal" for k in storage._engines}  # the open ones
    instance.dispose()
    assert list(runs.glob("*.db-wal")) == [] and len(list(runs.glob("*.db"))) == 5 + 1
    assert not (tmp_path / "history" / "runs.db-wal").exists()


@pytest.mark.slow
def test_the_files_kept_open_are_closed_when_the_process_exits_leaving_no_write_ahead_log(tmp_path):
    (tmp_path / "dagster.yaml").write_text(NOOP_LOGS)
    code = ("import sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
            "from test_instance_storage import _job\n"
            "from runner.compute_logs import open_instance\n"
            "from runner.command import exit_fast\n"
            "instance, _ = open_instance(sys.argv[3])\n"
            "assert _job(['a']).execute_in_process(instance=instance, partition_key='a').success\n"
            "exit_fast(0)\n")
    done = subprocess.run([sys.executable, "-c", code, str(ROOT), str(ROOT / "tests"), str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    runs = tmp_path / "history" / "runs"
    assert len(list(runs.glob("*.db"))) == 2 and list(runs.glob("*.db-wal")) == []
    assert (tmp_path / "history" / "runs.db").exists() and not (tmp_path / "history" / "runs.db-wal").exists()


def test_a_storage_other_than_dagsters_sqlite_is_left_as_configured(tmp_path):
    base = tmp_path / "store"
    (tmp_path / "dagster.yaml").write_text(
        f"run_storage:\n  module: dagster._core.storage.runs\n  class: SqliteRunStorage\n"
        f"  config:\n    base_dir: {base / 'runs'}\n"
        f"event_log_storage:\n  module: dagster._core.storage.event_log\n  class: ConsolidatedSqliteEventLogStorage\n"
        f"  config:\n    base_dir: {base / 'events'}\n"
        f"schedule_storage:\n  module: dagster._core.storage.schedules\n  class: SqliteScheduleStorage\n"
        f"  config:\n    base_dir: {base / 'schedules'}\n{NOOP_LOGS}")
    instance, _ = open_instance(str(tmp_path))
    assert type(instance.event_log_storage).__name__ == "ConsolidatedSqliteEventLogStorage"
    assert _job(["a"]).execute_in_process(instance=instance, partition_key="a").success


def test_the_ui_watching_a_run_of_the_command_sees_each_event_as_it_is_stored(tmp_path):
    """The UI streams a running run's events by watching its file (Dagster's watchdog reacts when
    `<run id>.db` itself is modified), so an event must reach the file, not only its write-ahead log."""
    import logging
    import threading
    import time

    from dagster._core.events.log import EventLogEntry

    (tmp_path / "dagster.yaml").write_text(NOOP_LOGS)
    ours, _ = open_instance(str(tmp_path))
    theirs = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path)))  # as the UI opens it

    def entry(text):
        return EventLogEntry(error_info=None, level=logging.INFO, user_message=text, run_id="r1",
                             timestamp=time.time())

    ours.event_log_storage.store_event(entry("first"))
    seen, arrived = [], threading.Event()

    def callback(event, cursor):
        seen.append(event.user_message)
        if event.user_message == "second":
            arrived.set()

    theirs.event_log_storage.watch("r1", None, callback)
    try:
        time.sleep(0.5)  # the observer thread running
        ours.event_log_storage.store_event(entry("second"))
        assert arrived.wait(10), f"the watcher saw {seen}"
    finally:
        theirs.event_log_storage.end_watch("r1", callback)
        theirs.dispose()
        ours.dispose()
