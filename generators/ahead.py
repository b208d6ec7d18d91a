"""Work built ahead of the step that takes it, in one worker process.

A run that builds several item sets one after another (MuSoBench's levels: `materialize_all`
builds items one step at a time) spends each step on two kinds of work: the generation, pure
Python that holds the interpreter lock, and the step around it (the Dagster run, the write, the
quality checks). In one process they add up. Here the generation of the planned steps runs in a
worker process, in the order the steps will ask for it, while this process runs the steps: a step
takes its result (waiting only if the worker has not finished it) and writes it, and the worker is
already building the next. With two cores the step's own work hides behind the generation.

What a step takes is exactly what it would have built itself: `take` hands a result over only for a
job equal to one planned (every input compared), and returns None otherwise, so the step builds
inline (the Dagster UI's single-partition runs always do). A build that fails in the worker fails
the step that takes it, with the worker's exception (its traceback as the cause); a worker that
died (killed, out of memory) makes `take` return None and the steps build inline.

The worker is `python -m generators.ahead`, a fresh interpreter that imports only what the jobs'
`build` needs (not the command's main module, as `multiprocessing`'s spawn would). Jobs and results
travel pickled over its stdin and stdout; a result waits to be taken still pickled (a paper-scale
MuSoBench level: 1-10 MB, against 3-5 times that as Python objects). The worker builds at most
`depth` jobs past the last one taken, so what waits stays bounded, and runs ahead through stretches
where the steps are slower than it (MuSoBench's small levels, 0.1 s to generate, a Dagster run 0.5
s). It exits when its stdin closes: when this process closes it or dies.

    with building_ahead(build, jobs):   # `build` a module-level function, `jobs` picklable
        ...                             # each step: take(build, job) or build(job)
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ItemsAhead:
    """A family whose item partitions the run command builds ahead (its registry entry's optional
    `Parts.ahead`, e.g. `generators/muso.py: AHEAD`): the order the run builds its partitions in, the
    job of one partition as the configuration sets it, and the build (a module-level function: the
    worker imports it by name)."""

    order: Callable[[list[str]], list[str]]  # partition keys -> the order they are built in
    job: Callable[[Any, str], Any]  # (configuration, partition key) -> a picklable job
    build: Callable[[Any], Any]  # job -> its result, what the partition's step stores


def ahead_of(family: Any) -> ItemsAhead:
    """A family's `ItemsAhead` part, checked to be one."""
    from configuration.families import load  # here: the worker process never needs the registry

    part = load(family.parts.ahead)
    if not isinstance(part, ItemsAhead):
        raise TypeError(f"{family.key}: {family.parts.ahead} is a {type(part).__name__}, not an ItemsAhead")
    return part


class WorkerDied(RuntimeError):
    """The worker process ended before it sent a job's result."""


class WorkerTraceback(Exception):
    """Where a build failed in the worker (the cause of the exception `take` raises)."""


class Ahead:
    """`build(job)` for each of `jobs`, in their order, in one worker process; `take` hands each over."""

    def __init__(self, build: Callable[[Any], Any], jobs: Sequence[Any], depth: int = 8):
        self.build = build
        self._jobs = list(jobs)
        self._depth = max(1, depth)
        self._futures: dict[int, Future] = {}
        self._submitted = 0  # jobs[:_submitted] were sent to the worker
        self._taken: set[int] = set()
        self._lock = threading.Lock()
        path = os.pathsep.join([str(PROJECT), *filter(None, [os.environ.get("PYTHONPATH")])])
        self._process = subprocess.Popen(  # noqa: S603 (our own interpreter and module)
            [sys.executable, "-m", "generators.ahead"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path})
        _widen(self._process.stdout)
        self._reader = threading.Thread(target=self._read, name="ahead-reader", daemon=True)
        self._reader.start()
        with self._lock:
            self._send_through(self._depth - 1)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def submitted(self) -> int:
        """How many jobs the worker has been given (at most `depth` past the last one taken)."""
        return self._submitted

    def _send_through(self, last: int) -> None:
        while self._submitted <= min(last, len(self._jobs) - 1):
            i = self._submitted
            self._futures[i] = Future()
            self._submitted += 1
            try:
                pickle.dump((i, self.build, self._jobs[i]), self._process.stdin)
                self._process.stdin.flush()
            except (BrokenPipeError, OSError) as exc:
                self._futures[i].set_exception(WorkerDied(f"the worker (pid {self.pid}) is gone: {exc}"))

    def _read(self) -> None:
        """The worker's results, as they come, into their futures; when it ends, the rest fail."""
        try:
            while True:
                i, ok, payload = pickle.load(self._process.stdout)
                with self._lock:
                    future = self._futures.get(i)
                if future is None:
                    continue
                future.set_result((ok, payload))  # still pickled: unpickled by the step that takes it
        except EOFError:  # the worker has ended
            why = ""
        except Exception as exc:  # not a result (something wrote to its stdout): stop it, or it waits for jobs
            why = f" after its result stream broke ({type(exc).__name__}: {exc})"
            self._process.kill()
        code = self._process.wait()
        with self._lock:
            for future in self._futures.values():
                if not future.done():
                    future.set_exception(WorkerDied(f"the worker (pid {self.pid}) ended with exit code {code}{why}"))

    def take(self, job: Any) -> Any | None:
        """The result of `job` built ahead, once the worker has it; None if `job` equals no planned job
        not yet taken, or the worker died (the caller builds it itself)."""
        with self._lock:
            i = next((k for k, planned in enumerate(self._jobs) if k not in self._taken and planned == job), None)
            if i is None:
                return None
            self._taken.add(i)
            self._send_through(i + self._depth)
            future = self._futures[i]
        try:
            ok, payload = future.result()
        except WorkerDied as exc:
            print(f"generators.ahead: {exc}; building inline", file=sys.stderr)
            return None
        finally:
            with self._lock:  # the result is the caller's now: not held here too
                del self._futures[i]
        if ok:
            return pickle.loads(payload)
        exc, where = pickle.loads(payload)
        raise exc from WorkerTraceback(where)

    def close(self) -> None:
        """Stop the worker: at once, without waiting for a job still being built and never taken."""
        try:
            self._process.stdin.close()
        except OSError:
            pass
        if any(not f.done() for f in self._futures.values()):
            self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join(timeout=10)


def _widen(pipe: Any) -> None:
    """A result pipe of 1 MiB instead of 64 KiB. The reader thread needs this process's interpreter
    lock to go on after each read, and waits up to a switch interval (5 ms) for it while the steps
    run Python; with 64 KiB at a time a 5 MB level kept the worker blocked on its write for up to
    0.4 s. Linux only; elsewhere the pipe stays as it is."""
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError):
        pass


_active: list[Ahead] = []


@contextmanager
def building_ahead(build: Callable[[Any], Any], jobs: Sequence[Any], depth: int = 8) -> Iterator[Ahead | None]:
    """`jobs` built ahead by `build` while the block runs (no worker started when there are none)."""
    if not jobs:
        yield None
        return
    ahead = Ahead(build, jobs, depth)
    _active.append(ahead)
    try:
        yield ahead
    finally:
        _active.remove(ahead)
        ahead.close()


def take(build: Callable[[Any], Any], job: Any) -> Any | None:
    """What an active `building_ahead(build, ...)` built for `job`, or None (build it yourself)."""
    for ahead in list(_active):
        if ahead.build is build:
            got = ahead.take(job)
            if got is not None:
                return got
    return None


def serve() -> None:
    """The worker: `(index, build, job)` from stdin, `(index, ok, result or (exception, traceback))`
    to stdout, until stdin closes. Anything the builds print goes to stderr."""
    source = os.fdopen(os.dup(0), "rb")
    sink = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stdout is the results' stream only
    while True:
        try:
            i, build, job = pickle.load(source)
        except EOFError:
            return
        where = ""
        try:
            ok, got = True, build(job)
        except Exception as exc:
            ok, got, where = False, exc, traceback.format_exc()
        try:
            payload = pickle.dumps(got if ok else (got, where), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # a result or exception that does not pickle: said in one that does
            ok, payload = False, pickle.dumps((RuntimeError(f"job {i}: what its build gave does not pickle: {exc}"),
                                               where))
        try:
            sink.write(pickle.dumps((i, ok, payload), protocol=pickle.HIGHEST_PROTOCOL))
            sink.flush()
        except BrokenPipeError:  # the parent is gone
            return


if __name__ == "__main__":
    serve()
