"""What the engine knows about an endpoint's transport in this process: the TLS context, whether an
endpoint is down or refuses a parameter (`HEALTH`), and the progress of a model's calls.

The HTTP client (`httpx2`, the `openai` client's) is imported where it is used: batch mode's file
export and import, which the run command reaches without making a call, never loads it."""

from __future__ import annotations

import functools
import logging
import ssl
import time

from llm_calls.totals import TOTALS

_REACH_TIMEOUT_S = 3.0  # the check that a down endpoint is back


class EndpointHealth:
    """Endpoints found down, and parameters models refused, in this process (one object, `HEALTH`)."""

    def __init__(self) -> None:
        # endpoints that refused connections until a call's retries were spent (base_url -> why)
        self.down: dict[str, str] = {}
        # (base_url, served model) -> {parameter: error with its fix}: parameters a model answered HTTP
        # 400 to (OpenAI's reasoning models refuse max_tokens and any temperature but 1)
        self.refused: dict[tuple[str, str], dict[str, str]] = {}

    def clear(self) -> None:
        self.down.clear()
        self.refused.clear()


HEALTH = EndpointHealth()


@functools.lru_cache(maxsize=1)
def tls_context() -> ssl.SSLContext:
    """The HTTP client's default TLS context, built once per process: building it (reading the CA
    bundle) costs ~35 ms, which a new client per batch would otherwise pay every time."""
    import httpx2

    return httpx2.create_ssl_context()


def endpoint_unreachable(base_url: str) -> str | None:
    """None when a server answers HTTP at `base_url` at all (any status, even 401 or 404);
    otherwise why not. One short GET of `<base_url>/models`, no key sent."""
    import httpx2

    try:
        with httpx2.Client(timeout=_REACH_TIMEOUT_S, verify=tls_context()) as client:
            client.get(base_url.rstrip("/") + "/models")
        return None
    except httpx2.HTTPError as exc:
        return f"{type(exc).__name__}: {brief(exc, 200)}"

# The openai client's transport logs every request at INFO; our progress lines say enough.
logging.getLogger("httpx2").setLevel(logging.WARNING)
logging.getLogger("httpx").setLevel(logging.WARNING)


def brief(exc: BaseException, limit: int = 500) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "..."


class Progress:
    def __init__(self, model: str, total: int, cached: int, run_id: str | None = None):
        self.model, self.total, self.cached, self.run_id = model, total, cached, run_id
        self.ok = self.failed = 0
        self.t0 = time.monotonic()

    def record(self, ok: bool) -> None:
        if ok:
            self.ok += 1
        else:
            self.failed += 1
        TOTALS.add(self.run_id, answered=int(ok), failed=int(not ok))

    def line(self, final: bool = False) -> str:
        elapsed = time.monotonic() - self.t0
        made = self.ok + self.failed
        rate = made / elapsed if elapsed > 0 else 0.0
        head = "finished" if final else "progress"
        return (
            f"llm {head} [{self.model}]: {self.cached + made}/{self.total} done "
            f"({self.cached} cached, {self.ok} answered, {self.failed} failed), "
            f"{rate:.2f} calls/s over {elapsed:.1f} s"
        )
