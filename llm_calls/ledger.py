"""The model-call ledger: the one way any code in Benchsmith calls a model.

Every call is keyed by a hash of (model identity, messages, sampling parameters,
sample index) and stored in `llm.calls` with its response, token counts,
latency, finish reason, attempts and error. The ledger is also the cache:

- a key that already has a successful response is answered from the table and
  makes no request; asking for k samples uses sample indexes 0..k-1, so raising
  k from 5 to 10 requests only indexes 5..9;
- answer parsing is not part of the key: a fixed parser re-scores stored text;
- results are committed as they arrive (whatever finished while the last write
  ran goes in the next one), so a killed run loses only the calls in flight;
- a failed call (retries spent, a non-retryable status, a malformed response,
  no choices) is stored with `status = 'failed'` and its error, returned with
  `ok = False`, never as an answer, and requested again on the next run;
- a reply cut at the token limit is stored with `finish_reason = 'length'`
  (`CallResult.truncated`), so callers can tell;
- reasoning that a server returns in a separate field (`reasoning_content`,
  `reasoning`) is stored beside the content with its token count; readers see
  the reply as the model produced it (`CallResult.reply`), and a reply cut
  inside its reasoning is an answered, truncated call, not a failure.

Calls are made in sessions (`llm_calls/flows.py`): `complete` is one batch, `run_flows` runs a
protocol's per-item flows, each asking its next call as soon as the reply it depends on is read.

An endpoint that refuses connections is not asked again and again: once a call has spent its
retries on connection errors, the endpoint is marked down in this process, the session's remaining
calls are recorded as failed without a request ("endpoint down (host:port) ... no request
sent"), and the next session first checks with one short request that it is back.

A model with `batch:` in the configuration (or every model, under `materialize_all --export-batch`)
makes each batch's pending requests one OpenAI batch file instead (`llm_calls/batch.py`): sent through
the provider's Batch API, or written for a cluster and imported back; the answers are stored as
these are (`Answer.stored`, the one definition of a call's row).

Retries follow inspect_ai's and curator's model layers: 429, 5xx, timeouts and
connection errors are retried with exponential backoff and jitter up to
`max_attempts`, and a server's `Retry-After` (or `retry-after-ms`) wins over
the computed delay. API keys live only in the `Endpoint`; they are never part
of a key, a stored request, an error text or a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from configuration import LedgerConfig
from llm_calls import batch, flows
from llm_calls.endpoints import Endpoint, ModelRegistry, chat_body, default_sampling
from llm_calls.http_client import Client, HttpConnectionError, HttpStatusError, HttpTimeout
from llm_calls.records import (
    Answer,
    CallRequest,
    CallResult,
    CallStore,
    Malformed,
    keyed_request,
    sent_params,
)
from llm_calls.slots import Slots, for_endpoint
from llm_calls.totals import TOTALS  # the calls counted here, read by the run command
from llm_calls.transport import HEALTH, Progress, brief
from warehouse import Warehouse

T = TypeVar("T")
_RETRY_AFTER_CAP_S = 600.0
_JSON = json.JSONEncoder(ensure_ascii=False)  # a request body, built once
_UNSUPPORTED = re.compile(r"unsupported (?:parameter|value):\s*'([\w.]+)'|'([\w.]+)' is not supported with this model"
                          r"|'([\w.]+)' does not support", re.I)


def _unsendable(ep: Endpoint, sent: Mapping[str, Any]) -> str | None:
    """Why a request must not be sent, or None: its endpoint is down (another call of this batch, or
    an earlier one, found it so), or its model refused one of its parameters already."""
    if ep.base_url in HEALTH.down:
        return f"endpoint down ({ep.host}): {HEALTH.down[ep.base_url]}; no request sent"
    refused = HEALTH.refused.get((ep.base_url, ep.served_model), {})
    both = refused.keys() & sent.keys()
    return f"{refused[min(both)]}; no request sent" if both else None


def refused_parameter(exc: HttpStatusError) -> str | None:
    """The parameter an HTTP 400 says the model does not take (OpenAI's `code` unsupported_parameter
    or unsupported_value with its `param`, or the same words in the message), else None."""
    code, param = getattr(exc, "code", None), getattr(exc, "param", None)
    if code in ("unsupported_parameter", "unsupported_value") and isinstance(param, str) and param:
        return param
    m = _UNSUPPORTED.search(str(getattr(exc, "message", "") or exc))
    return next((g for g in m.groups() if g), None) if m else None


class Logger(Protocol):
    def info(self, msg: str, *args: Any) -> None: ...


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a server asked us to wait (`retry-after-ms`, `retry-after` seconds or HTTP date)."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def backoff_delay(attempt: int, base_s: float, max_s: float, retry_after: float | None, rng: random.Random) -> float:
    """Delay before attempt `attempt + 1`: the server's Retry-After if given, else
    exponential backoff with equal jitter (half fixed, half random)."""
    if retry_after is not None:
        return min(retry_after, _RETRY_AFTER_CAP_S)
    ceiling = min(max_s, base_s * 2 ** (attempt - 1))
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class _ServerDied(Exception):
    """The embedded server behind the endpoint died (its message says how): no retry can reach it."""


class Ledger:
    """Makes, caches and records model calls. See the module docstring for the contract."""

    def __init__(
        self,
        warehouse: Warehouse,
        registry: ModelRegistry,
        config: LedgerConfig | None = None,
        log: Logger | None = None,
        run_id: str | None = None,
    ):
        self.warehouse = warehouse
        self.registry = registry
        self.config = config or registry.config.ledger
        self.log = log or logging.getLogger("benchsmith.llm")
        self.run_id = run_id
        self._rng = random.Random()

    # -- public API ------------------------------------------------------------

    def complete(self, model: str, requests: Sequence[CallRequest], purpose: str = "") -> list[CallResult]:
        """Results for `requests` on `model`, in order; cached ones make no request. One batch of
        calls: a protocol whose calls depend on earlier replies runs them as flows (`run_flows`). A
        batch the warehouse answers whole is read in one query, with no session and no event loop."""
        identity, keyed, order = self.keys(model, requests)
        writer = self.warehouse.writer()
        try:
            found, _ = CallStore(writer).lookup(list(keyed))
        finally:
            writer.close()
        TOTALS.add(self.run_id, cached=len(found))
        if len(found) < len(keyed):  # the misses in a session that knows the answers found

            asked = [(*keyed[k], k) for k in order]  # keyed once: the session takes them as they are

            def flow(s: flows.Session) -> list[Awaitable[list[CallResult]]]:
                s.answered(model, found)
                return [s.ask_keyed(model, asked, purpose)]

            return self.run_flows(flow)[0]
        config = self.registry.config.model(model)
        return [flows.with_prefill(config, found[k]) for k in order]

    def samples(
        self, model: str, messages: Sequence[Mapping[str, str]], k: int,
        params: Mapping[str, Any] | None = None, purpose: str = "",
    ) -> list[CallResult]:
        """k samples of one prompt: sample indexes 0..k-1."""
        return self.complete(model, [CallRequest(messages, params or {}, i) for i in range(k)], purpose)

    def run_flows(self, build: Callable[[flows.Session], Iterable[Awaitable[T]]]) -> list[T]:
        """Run the flows `build(session)` makes all at once, each awaiting `session.ask(...)` for its
        calls (`llm_calls/flows.py`), in the process's call loop (`flows.run_in_call_loop`);
        their results in order."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return flows.run_in_call_loop(flows.run_flows(self, build))
        raise RuntimeError("Ledger.run_flows() called inside an event loop; use `async with flows.Session(ledger)`")

    def keys(self, model: str, requests: Sequence[CallRequest]
              ) -> tuple[str, dict[str, tuple[CallRequest, dict[str, Any]]], list[str]]:
        """The model's identity, the distinct requests by key (defaults merged in), and the keys in order."""
        m = self.registry.config.model(model)
        identity, defaults = self.registry.identity(model), default_sampling(m)
        keyed: dict[str, tuple[CallRequest, dict[str, Any]]] = {}
        order: list[str] = []
        for req in requests:
            req, params, key = keyed_request(m, identity, defaults, req)
            order.append(key)
            keyed.setdefault(key, (req, params))
        return identity, keyed, order

    async def batch_turn(self, model: str, identity: str, purpose: str, misses: dict[str, tuple[CallRequest, dict[str, Any]]],
                     known: set[str], writer: Any) -> dict[str, CallResult]:
        """A batch-mode model's misses of one purpose as one batch (`llm_calls/batch.py`): written
        to files (raising `BatchPending`), or sent through the provider's Batch API and waited for."""
        how = batch.mode(self.registry.config, model, purpose)
        if how.mode == "files":  # written for a cluster; the step waits for the import
            ep = batch.offline_endpoint(self.registry, model)
            raise await asyncio.to_thread(batch.export, ep, identity, purpose, misses, writer,
                                          self.registry.config.beside(how.dir))
        endpoint = await asyncio.to_thread(self.registry.endpoint, model)
        out = await batch.run_api(self, endpoint, identity, purpose, misses, writer, how)
        progress = Progress(endpoint.name, total=len(misses), cached=0, run_id=self.run_id)
        for r in out.values():
            progress.record(r.ok)
        self.log.info(progress.line(final=True))
        return out

    # -- requests ----------------------------------------------------------------

    async def send(
        self, client: Client, ep: Endpoint, identity: str,
        purpose: str, key: str, req: CallRequest, params: dict[str, Any], secrets: Sequence[str] = (),
        shared: Slots | None = None, pause: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> tuple[CallResult, dict[str, Any]]:
        """One request with its retries; `pause(seconds)` waits out a backoff (the flows' lane lets
        another worker use the slot meanwhile)."""
        sent = sent_params(ep, key, params)
        messages = [{"role": m["role"], "content": m["content"]} for m in req.messages]
        body = _JSON.encode(chat_body(ep.served_model, messages, sent)).encode()
        created = datetime.now(UTC).replace(tzinfo=None)

        attempts, latency = 0, None
        error = None
        ok = False
        while True:
            error = _unsendable(ep, sent)
            if error:
                break
            attempts += 1
            try:
                async with shared.hold(ep.concurrency) if shared else contextlib.nullcontext():
                    error = _unsendable(ep, sent)  # found while this call waited for its turn
                    if error:
                        attempts -= 1
                        break
                    t0 = time.monotonic()
                    try:
                        # the JSON as bytes through `llm_calls/http_client.py`: `Answer.of` reads it
                        content = await client.post(body)
                    except HttpConnectionError as exc:
                        # an embedded server that died: said while this call still holds its turn, so no
                        # call waiting for one is sent to the dead port
                        if ep.server_death is None:
                            raise
                        died = await asyncio.to_thread(ep.server_death)
                        if died is None:
                            raise
                        HEALTH.down[ep.base_url] = died
                        raise _ServerDied(died) from exc
                    finally:
                        latency = time.monotonic() - t0
                got = Answer.of(_json_body(content), secrets)
                ok, error = got.ok, got.error
                break
            except Exception as exc:  # noqa: BLE001 (each kind is told apart in `_failed_attempt`)
                error, wait = self._failed_attempt(exc, attempts, ep, sent)
                if wait is None:
                    break
                await pause(wait)

        answer = got if ok else Answer(False, error=ep.redact(error))
        return answer.stored(key=key, ep=ep, identity=identity, purpose=purpose, messages=messages, sent=sent,
                             sample_index=req.sample_index, latency=latency, attempts=attempts,
                             run_id=self.run_id, created=created)

    def _failed_attempt(self, exc: Exception, attempts: int, ep: Endpoint, sent: Mapping[str, Any]
                        ) -> tuple[str, float | None]:
        """What the `attempts`-th attempt's failure `exc` means: the error to record and how long to
        wait before the next attempt, or None where there is none (the error is final: a reply that
        holds no answer, a dead embedded server, a 4xx other than 408, 409 and 429, a refused
        parameter, or the attempts spent)."""
        cfg = self.config
        spent = attempts >= cfg.max_attempts

        def backoff(retry_after: float | None) -> float:
            return backoff_delay(attempts, cfg.backoff_base_s, cfg.backoff_max_s, retry_after, self._rng)

        if isinstance(exc, (Malformed, _ServerDied)):
            return str(exc), None
        if isinstance(exc, _Retryable):
            return (f"retries spent after {attempts} attempts; last: {exc}", None) if spent \
                else (str(exc), backoff(exc.retry_after))
        if isinstance(exc, HttpStatusError) and exc.status != 429:
            error = f"HTTP {exc.status} {brief(exc)}"
            param = refused_parameter(exc) if exc.status == 400 else None
            if param is not None and param in sent:
                return self._refused(ep, param, error), None
            if exc.status < 500 and exc.status not in (408, 409):
                return error, None  # 4xx other than 408/409/429: asking again will not help
            return (f"retries spent after {attempts} attempts; last: {error}", None) if spent \
                else (error, backoff(retry_after_seconds(exc.headers)))
        if isinstance(exc, HttpStatusError):  # 429
            if spent:
                return f"retries spent after {attempts} attempts; last: HTTP 429 {brief(exc)}", None
            wait = backoff(retry_after_seconds(exc.headers))
            TOTALS.rate_limited(ep.name, wait)  # the progress line says who waits, and how long
            if wait >= 5:
                self.log.info(f"llm [{ep.name}]: rate limited (HTTP 429), waiting {wait:.0f} s before "
                              f"attempt {attempts + 1}")
            return f"HTTP 429 {brief(exc)}", wait
        if isinstance(exc, (HttpTimeout, HttpConnectionError)):
            kind = "timeout" if isinstance(exc, HttpTimeout) else "connection error"
            error = f"{kind} ({ep.host}): {brief(exc)}"
            if not spent:
                return error, backoff(None)
            if kind == "connection error":  # refused, not slow: spare the other calls the retries
                HEALTH.down[ep.base_url] = f"a call spent its {attempts} attempts on connection errors"
            return f"retries spent after {attempts} attempts; last: {error}", None
        return f"malformed response: {type(exc).__name__}: {brief(exc)}", None  # undecodable body, schema mismatch

    def slots_for(self, ep: Endpoint) -> Slots | None:
        """The endpoint's slots shared with every other run (`ledger.endpoint_slots`)."""
        how = self.config.endpoint_slots
        directory = self.registry.config.beside(self.config.slots_dir) if self.config.slots_dir else None
        return for_endpoint(ep.base_url, how, directory, self.config.slots_env)

    def _refused(self, ep: Endpoint, param: str, error: str) -> str:
        """Record that `ep`'s model refuses `param`: the error every call that sends it gets, with
        the fix, said once per model in the log (later calls fail unsent)."""
        if param in ("max_tokens", "max_completion_tokens"):
            other = "max_completion_tokens" if param == "max_tokens" else "max_tokens"
            fix = f"set `token_param: {other}` under models.{ep.name} in the configuration"
        else:
            fix = (f"add {param} to models.{ep.name}.unsupported_params in the configuration "
                   "(the server's default is then used)")
        message = f"{ep.name} refuses the parameter {param!r} ({error}); fix: {fix}"
        refused = HEALTH.refused.setdefault((ep.base_url, ep.served_model), {})
        if param not in refused:
            refused[param] = message
            self.log.info(f"llm [{ep.name}]: {message}")
        return refused[param]

    # -- persistence and progress --------------------------------------------------

def _json_body(content: bytes) -> Any:
    """The reply's JSON; a body that is not JSON is a failed call that says what came instead."""
    try:
        return json.loads(content)
    except ValueError:
        raise Malformed(f"malformed response: the body is not JSON: {content[:200].decode('utf-8', 'replace')!r}") from None


