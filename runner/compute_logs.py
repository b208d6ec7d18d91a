"""Dagster's compute logs, captured so that several runs can execute at once in one process.

Dagster's `LocalComputeLogManager` captures a run's stdout and stderr by pointing the process's
file descriptors 1 and 2 at the run's log files (`os.dup2`) and starting, per stream, a `tail -F`
that echoes the file back and a Python watcher process: four processes per run. Two runs at once
in one process (`python -m assets.materialize_all` runs independent steps at once, each in a thread
of its own) would swap each other's descriptors, and the second to finish would point the
process's stdout at a file whose `tail` is gone.

`ThreadComputeLogManager` writes the same files in the same places (the UI reads them as before,
and its `base_dir` is the same setting), but captures at Python's level: while any run captures,
`sys.stdout` and `sys.stderr` are a `_Tee` that writes everything to the stream it replaced and,
when the writing code runs inside a run (a context variable, so threads and asyncio tasks started
inside the step count as the run's), to that run's file. No helper process is started. What it
does not see: output that C code writes to the descriptors directly (DuckDB, llama.cpp); that
still reaches the terminal, but not the run's log file.
"""

from __future__ import annotations

import contextvars
import io
import os
import sys
import threading
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

from dagster._core.storage.compute_log_manager import CapturedLogContext, ComputeIOType
from dagster._core.storage.local_compute_log_manager import IO_TYPE_EXTENSION, LocalComputeLogManager
from dagster._utils import ensure_file, touch_file

# (stdout file, stderr file) of the run whose code is running, in this context
_FILES: contextvars.ContextVar[tuple[IO[str], IO[str]] | None] = contextvars.ContextVar("run_logs", default=None)


class _Tee(io.TextIOBase):
    """A text stream that writes to `stream` and to the current run's file (`which`: 0 stdout,
    1 stderr), if any."""

    def __init__(self, stream: Any, which: int):
        self.stream, self.which = stream, which
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        n = self.stream.write(text)
        files = _FILES.get()
        if files is not None:
            with self._lock:
                files[self.which].write(text)
        return n if isinstance(n, int) else len(text)

    def flush(self) -> None:
        self.stream.flush()
        files = _FILES.get()
        if files is not None:
            files[self.which].flush()

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")


class ThreadComputeLogManager(LocalComputeLogManager):
    """`LocalComputeLogManager`'s files and settings, captured per run in Python (module docstring)."""

    concurrent_runs_safe = True  # assets.materialize_all runs steps at once only under a manager that says so

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> ThreadComputeLogManager:
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Generator[CapturedLogContext, None, None]:
        paths = [self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[t])
                 for t in (ComputeIOType.STDOUT, ComputeIOType.STDERR)]
        for path in paths:
            ensure_file(path)
        with open(paths[0], "a", encoding="utf-8") as out, open(paths[1], "a", encoding="utf-8") as err:
            _TEES.on()
            token = _FILES.set((out, err))
            try:
                yield CapturedLogContext(log_key)
            finally:
                for stream in (sys.stdout, sys.stderr):
                    try:
                        stream.flush()
                    except (OSError, ValueError):
                        pass  # a closed stream (a test's capture) must not fail the run
                _FILES.reset(token)
                _TEES.off()
        touch_file(self.complete_artifact_path(log_key))  # as Dagster's: the capture is complete


class _Tees:
    """The process's stdout and stderr tees: on while any capture is open, off when the last ends."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active = 0  # captures open in this process

    def on(self) -> None:
        with self.lock:
            if self.active == 0:
                if not isinstance(sys.stdout, _Tee):
                    sys.stdout = _Tee(sys.stdout, 0)
                if not isinstance(sys.stderr, _Tee):
                    sys.stderr = _Tee(sys.stderr, 1)
            self.active += 1

    def off(self) -> None:
        with self.lock:
            self.active -= 1
            if self.active == 0:
                if isinstance(sys.stdout, _Tee):
                    sys.stdout = sys.stdout.stream
                if isinstance(sys.stderr, _Tee):
                    sys.stderr = sys.stderr.stream


_TEES = _Tees()


_DAGSTERS_LOCAL = ("dagster._core.storage.local_compute_log_manager", "LocalComputeLogManager")
_DAGSTERS_SQLITE = ("dagster._core.storage.sqlite_storage", "DagsterSqliteStorage")


INSTANCE_LOCK = ".benchsmith-instance.lock"


@contextmanager
def instance_lock(home: str) -> Iterator[None]:
    """An exclusive lock on `<home>/.benchsmith-instance.lock` while the instance's storage is set up:
    Dagster creates and migrates the SQLite files when it opens them, and two processes doing so at
    once on a fresh `DAGSTER_HOME` left runs.db with two alembic heads, after which every run crashed.
    Opened one process at a time, the second finds the files made."""
    import fcntl

    os.makedirs(home, exist_ok=True)
    fd = os.open(os.path.join(home, INSTANCE_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def open_instance(home: str) -> tuple[Any, bool]:
    """The Dagster instance that `home`'s dagster.yaml configures, and whether its runs may execute
    at once in this process. Dagster's own local compute-log manager (also its default when the
    file names none) is replaced by `ThreadComputeLogManager` with the same settings: the same files
    in the same folder, captured per run. Another manager that does not declare
    `concurrent_runs_safe` (one that redirects the process's descriptors) keeps the runs one at a
    time; Dagster's no-op manager captures nothing and is safe."""
    from dagster import DagsterInstance
    from dagster._core.instance.ref import InstanceRef
    from dagster._core.storage.noop_compute_log_manager import NoOpComputeLogManager

    from runner.instance_storage import LocalSqliteStorage

    ref = InstanceRef.from_dir(home)
    overrides = {}
    logs = ref.compute_logs_data
    if (logs.module_name, logs.class_name) == _DAGSTERS_LOCAL:
        overrides["compute_logs"] = {
            "module": __name__, "class": ThreadComputeLogManager.__name__, "config": dict(logs.config_dict)}
    storage = ref.storage_data
    if (storage.module_name, storage.class_name) == _DAGSTERS_SQLITE:
        overrides["storage"] = {"custom": {
            "module": LocalSqliteStorage.__module__, "class": LocalSqliteStorage.__name__,
            "config": dict(storage.config_dict)}}
    if overrides:
        ref = InstanceRef.from_dir(home, overrides=overrides)
    with instance_lock(home):  # two runs starting at once on a fresh home stamped two alembic heads
        instance = DagsterInstance.from_ref(ref)
    # Dagster builds the instance's yaml-defined log handlers for every run it starts, with
    # `logging.config.dictConfig`, which holds the logging module's lock while it closes every
    # handler of the process, taking each one's lock: a run starting while another run's handler
    # is writing an event (and waiting for the module lock itself) deadlocks the two (seen here
    # with two runs in two threads). The configuration cannot change within the process, so the
    # handlers are built once, here, before any run.
    handlers = list(instance.get_yaml_python_handlers())
    instance.get_yaml_python_handlers = lambda: handlers
    manager = instance.compute_log_manager
    return instance, bool(getattr(manager, "concurrent_runs_safe", False) or isinstance(manager, NoOpComputeLogManager))
