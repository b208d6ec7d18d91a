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
import functools
import hashlib
import json
import logging
import random
import re
import ssl
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import httpx2
import openai

from configuration import LedgerConfig
from llm_calls import batch, flows
from llm_calls.endpoints import Endpoint, ModelRegistry, chat_body, default_sampling, model_messages, redact, wire_params
from llm_calls.slots import Slots, for_endpoint
from llm_calls.totals import TOTALS  # the calls counted here, read by the run command
from warehouse import OnConflict, Warehouse

T = TypeVar("T")
_RETRY_AFTER_CAP_S = 600.0
_REACH_TIMEOUT_S = 3.0  # the check that a down endpoint is back
# Endpoints that refused connections until a call's retries were spent (base_url -> why), in this process.
_DOWN: dict[str, str] = {}
# (base_url, served model) -> {parameter: error with its fix}: parameters a model answered HTTP 400 to
# (OpenAI's reasoning models refuse max_tokens and any temperature but 1), in this process.
_REFUSED: dict[tuple[str, str], dict[str, str]] = {}
_UNSUPPORTED = re.compile(r"unsupported (?:parameter|value):\s*'([\w.]+)'|'([\w.]+)' is not supported with this model"
                          r"|'([\w.]+)' does not support", re.I)


def _unsendable(ep: Endpoint, sent: Mapping[str, Any]) -> str | None:
    """Why a request must not be sent, or None: its endpoint is down (another call of this batch, or
    an earlier one, found it so), or its model refused one of its parameters already."""
    if ep.base_url in _DOWN:
        return f"endpoint down ({ep.host}): {_DOWN[ep.base_url]}; no request sent"
    refused = _REFUSED.get((ep.base_url, ep.served_model), {})
    both = refused.keys() & sent.keys()
    return f"{refused[min(both)]}; no request sent" if both else None


def refused_parameter(exc: openai.APIStatusError) -> str | None:
    """The parameter an HTTP 400 says the model does not take (OpenAI's `code` unsupported_parameter
    or unsupported_value with its `param`, or the same words in the message), else None."""
    code, param = getattr(exc, "code", None), getattr(exc, "param", None)
    if code in ("unsupported_parameter", "unsupported_value") and isinstance(param, str) and param:
        return param
    m = _UNSUPPORTED.search(str(getattr(exc, "message", "") or exc))
    return next((g for g in m.groups() if g), None) if m else None


def endpoint_unreachable(base_url: str) -> str | None:
    """None when a server answers HTTP at `base_url` at all (any status, even 401 or 404);
    otherwise why not. One short GET of `<base_url>/models`, no key sent."""
    try:
        with httpx2.Client(timeout=_REACH_TIMEOUT_S, verify=_tls_context()) as client:
            client.get(base_url.rstrip("/") + "/models")
        return None
    except httpx2.HTTPError as exc:
        return f"{type(exc).__name__}: {_brief(exc, 200)}"

# The openai client's transport logs every request at INFO; our progress lines say enough.
logging.getLogger("httpx2").setLevel(logging.WARNING)
logging.getLogger("httpx").setLevel(logging.WARNING)


class Logger(Protocol):
    def info(self, msg: str, *args: Any) -> None: ...


@dataclass(frozen=True)
class CallRequest:
    """One chat completion to make: messages, sampling overrides and the sample index."""

    messages: Sequence[Mapping[str, str]]
    params: Mapping[str, Any] = field(default_factory=dict)
    sample_index: int = 0


@dataclass(frozen=True)
class CallResult:
    key: str
    ok: bool
    text: str | None
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float | None
    attempts: int
    error: str | None
    cached: bool
    reasoning: str | None = None  # a separate reasoning field, when the server returns one
    reasoning_tokens: int | None = None
    prefill: str | None = None  # the start of the reply the model was given to continue (not in `text`)

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"

    @property
    def reasoning_hidden(self) -> bool:
        """The provider counted reasoning tokens but returned no reasoning text (OpenAI's o-series and
        gpt-5, and others that hide the thinking): the reply is the answer alone."""
        return self.ok and self.reasoning is None and (self.reasoning_tokens or 0) > 0

    @property
    def reply(self) -> str | None:
        """The reply as the model produced it: separate reasoning put back in a `<think>` block, left
        open when the reply was cut inside its reasoning (no content, finish_reason 'length'); a model's
        prefill first, as the model continued it."""
        if not self.ok:
            return None
        reply = reply_with_reasoning(self.text, self.reasoning, self.finish_reason)
        if self.prefill and self.reasoning is None:  # a server that split the thinking off put it back above
            return self.prefill + (reply or "")
        return reply


def probe_request(prompt: str) -> CallRequest:
    """The models probe's one short call (its answer shows the endpoint answers)."""
    return CallRequest([{"role": "user", "content": prompt}], {"max_tokens": 32})


def reply_with_reasoning(content: str | None, reasoning: str | None, finish_reason: str | None) -> str | None:
    """A reply with its separate reasoning field put back inline, as the model produced it. An empty
    field ("") is an empty think block: the model thought nothing and answered (S1-Bench's format
    101), not a reply without any marker (207)."""
    if reasoning is None:
        return content
    if not content and finish_reason == "length":
        return f"<think>\n{reasoning}"
    return f"<think>\n{reasoning}\n</think>\n\n{content or ''}"


def keyed_request(m: Any, identity: str, defaults: Mapping[str, Any], req: CallRequest
                  ) -> tuple[CallRequest, dict[str, Any], str]:
    """A request as model `m` is asked it (its system prompt or prefill), its parameters with the
    model's defaults, and its key: the one definition the batch calls and the flows share."""
    params = {**defaults, **dict(req.params)}
    if m.system_prompt or m.prefill:
        req = CallRequest(model_messages(m, req.messages), req.params, req.sample_index)
    return req, params, call_key(identity, req.messages, params, req.sample_index)


CACHED_COLUMNS = ("key, status, response_text, finish_reason, prompt_tokens, completion_tokens, latency_s, "
                  "attempts, reasoning_text, reasoning_tokens")
LITERAL_KEYS = 64  # up to this many keys a lookup lists them as literals (see `lookup_sql`)


def lookup_sql(keys: Sequence[str], literals: bool | None = None) -> tuple[str, list[Any]]:
    """The cache lookup of `keys` in `llm.calls` (SQL and parameters). A flow's lookup carries a few
    keys (those asked while the last lookup ran): written as string literals (quotes doubled),
    DuckDB reads them from the table's primary-key index, where a list parameter (`key IN (SELECT
    unnest(?))`) is joined against every stored key, at a cost that grows with the warehouse. For
    long lists (a batch's whole turn) the join is the cheaper: `benchmarks/cache_lookup.py`
    measures both; literals were 1.7-2x faster for 1-4 keys, 1.5x (20,000 rows) to 7.5x (200,000
    rows) for 64 missing keys, and 3.3x slower for 1,000 at 20,000 rows. `literals` forces one form
    (the benchmark times both)."""
    if literals if literals is not None else len(keys) <= LITERAL_KEYS:
        listed = ", ".join("'" + key.replace("'", "''") + "'" for key in keys)
        return f"SELECT {CACHED_COLUMNS} FROM llm.calls WHERE key IN ({listed})", []
    return f"SELECT {CACHED_COLUMNS} FROM llm.calls WHERE key IN (SELECT unnest(?::VARCHAR[]))", [list(keys)]


def call_key(identity: str, messages: Sequence[Mapping[str, str]], params: Mapping[str, Any], sample_index: int) -> str:
    """The cache key: sha256 over canonical JSON of what determines a reply."""
    payload = {
        "model": identity,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "params": dict(params),  # the encoder sorts keys
        "sample_index": sample_index,
    }
    return hashlib.sha256(_KEY_JSON.encode(payload).encode()).hexdigest()


# what json.dumps(payload, sort_keys=True, ensure_ascii=False) builds on every call, built once
_KEY_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False)


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


def sent_params(ep: Endpoint, key: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters a request is sent with: a per-key seed where the endpoint takes one, then the
    endpoint's names for them (`wire_params`). Live calls and batch lines send the same."""
    sent = dict(params)
    if ep.send_seed and "seed" not in sent:
        sent["seed"] = int(key[:8], 16) & 0x7FFFFFFF
    return wire_params(sent, ep.token_param, ep.refused)


@dataclass(frozen=True)
class Answer:
    """What one request came to, however it was made (live, or a line of a batch output file)."""

    ok: bool
    text: str | None = None
    reasoning: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    error: str | None = None
    cached_prompt_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens (the provider's prompt cache)

    @classmethod
    def of(cls, body: Any, secrets: Sequence[str] = ()) -> Answer:
        """An answer from a chat completion's JSON body (a live reply's, a batch output line's); a
        body without an answer is a failure that says why."""
        try:
            text, reasoning, finish, ptok, ctok, rtok, cached = _read_response(body)
        except _Failed as exc:
            return cls(False, error=str(exc))
        return cls(True, redact(text, secrets, key_like=False), redact(reasoning, secrets, key_like=False),
                   finish, ptok, ctok, rtok, cached_prompt_tokens=cached)

    def stored(self, *, key: str, ep: Endpoint, identity: str, purpose: str, messages: Sequence[Mapping[str, str]],
               sent: Mapping[str, Any], sample_index: int, latency: float | None, attempts: int,
               run_id: str | None, created: datetime) -> tuple[CallResult, dict[str, Any]]:
        """The `CallResult` and the `llm.calls` row of this answer: one definition for every way of calling."""
        ok = self.ok
        row = {
            "key": key, "model": ep.name, "model_identity": identity, "served_model": ep.served_model,
            "endpoint_host": ep.host, "purpose": purpose,
            "request": json.dumps({"messages": list(messages), "params": dict(sent)}, ensure_ascii=False),
            "sample_index": sample_index, "status": "ok" if ok else "failed",
            "response_text": self.text if ok else None, "finish_reason": self.finish_reason if ok else None,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens, "latency_s": latency,
            "reasoning_text": self.reasoning if ok else None, "reasoning_tokens": self.reasoning_tokens if ok else None,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "attempts": attempts, "total_attempts": attempts, "error": None if ok else self.error,
            "run_id": run_id, "created_at": created, "finished_at": datetime.now(UTC).replace(tzinfo=None),
        }
        result = CallResult(
            key=key, ok=ok, text=self.text if ok else None, finish_reason=self.finish_reason if ok else None,
            prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens, latency_s=latency,
            attempts=attempts, error=None if ok else self.error, cached=False,
            reasoning=self.reasoning if ok else None, reasoning_tokens=self.reasoning_tokens if ok else None,
        )
        return result, row


class _Retryable(Exception):
    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class _Failed(Exception):
    pass


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
        identity, keyed, order = self._keys(model, requests)
        writer = self.warehouse.writer()
        try:
            found, _ = self._cached(list(keyed), writer)
        finally:
            writer.close()
        TOTALS.add(self.run_id, cached=len(found))
        if len(found) < len(keyed):  # the misses in a session that knows the answers found

            def flow(s: flows.Session) -> list[Awaitable[list[CallResult]]]:
                s.answered(model, found)
                return [s.ask_all(model, requests, purpose)]

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

    def _keys(self, model: str, requests: Sequence[CallRequest]
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

    async def _batch(self, model: str, identity: str, purpose: str, misses: dict[str, tuple[CallRequest, dict[str, Any]]],
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
        progress = _Progress(endpoint.name, total=len(misses), cached=0, run_id=self.run_id)
        for r in out.values():
            progress.record(r.ok)
        self.log.info(progress.line(final=True))
        return out

    # -- cache -----------------------------------------------------------------

    def _cached(self, keys: list[str], writer: Any) -> tuple[dict[str, CallResult], set[str]]:
        """Finished calls among `keys`, and every key that has a row at all (a failed one too)."""
        if not keys:
            return {}, set()
        rows = writer.query(*lookup_sql(keys))
        out = {}
        for key, status, text, finish, ptok, ctok, latency, attempts, reasoning, rtok in rows:
            if status == "ok":
                out[key] = CallResult(key=key, ok=True, text=text, finish_reason=finish, prompt_tokens=ptok,
                                      completion_tokens=ctok, latency_s=latency, attempts=attempts, error=None,
                                      cached=True, reasoning=reasoning, reasoning_tokens=rtok)
        return out, {r[0] for r in rows}

    # -- requests ----------------------------------------------------------------

    async def _call(
        self, client: openai.AsyncOpenAI, ep: Endpoint, identity: str,
        purpose: str, key: str, req: CallRequest, params: dict[str, Any], secrets: Sequence[str] = (),
        shared: Slots | None = None, pause: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> tuple[CallResult, dict[str, Any]]:
        """One request with its retries; `pause(seconds)` waits out a backoff (the flows' lane lets
        another worker use the slot meanwhile)."""
        sent = sent_params(ep, key, params)
        messages = [{"role": m["role"], "content": m["content"]} for m in req.messages]
        body = chat_body(ep.served_model, messages, sent)
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
                        # the client's plain POST (its README's "undocumented requests"): the same
                        # request, headers, timeout and typed errors as `chat.completions.create`,
                        # without its typed layer - walking the parameters against their TypedDicts
                        # and building the reply's pydantic objects - which cost ~0.5 ms of CPU a call
                        # (benchmarks/paper_calls.py replays both ways); `Answer.of` reads the JSON
                        resp = await client.post("/chat/completions", cast_to=httpx2.Response, body=body)
                    except openai.APIConnectionError as exc:
                        # an embedded server that died: said while this call still holds its turn, so no
                        # call waiting for one is sent to the dead port
                        if ep.server_death is None or isinstance(exc, openai.APITimeoutError):
                            raise
                        died = await asyncio.to_thread(ep.server_death)
                        if died is None:
                            raise
                        _DOWN[ep.base_url] = died
                        raise _ServerDied(died) from exc
                    finally:
                        latency = time.monotonic() - t0
                got = Answer.of(_json_body(resp), secrets)
                ok, error = got.ok, got.error
                break
            except (_Failed, _ServerDied) as exc:
                error = str(exc)
                break
            except _Retryable as exc:
                error = str(exc)
                if attempts >= self.config.max_attempts:
                    error = f"retries spent after {attempts} attempts; last: {error}"
                    break
                await pause(
                    backoff_delay(attempts, self.config.backoff_base_s, self.config.backoff_max_s, exc.retry_after, self._rng)
                )
            except openai.RateLimitError as exc:  # 429
                if attempts >= self.config.max_attempts:
                    error = f"retries spent after {attempts} attempts; last: HTTP 429 {_brief(exc)}"
                    break
                wait = backoff_delay(attempts, self.config.backoff_base_s, self.config.backoff_max_s,
                                     retry_after_seconds(exc.response.headers), self._rng)
                TOTALS.rate_limited(ep.name, wait)  # the progress line says who waits, and how long
                if wait >= 5:
                    self.log.info(f"llm [{ep.name}]: rate limited (HTTP 429), waiting {wait:.0f} s before "
                                  f"attempt {attempts + 1}")
                await pause(wait)
                error = f"HTTP 429 {_brief(exc)}"
            except openai.APIStatusError as exc:
                error = f"HTTP {exc.status_code} {_brief(exc)}"
                param = refused_parameter(exc) if exc.status_code == 400 else None
                if param is not None and param in sent:
                    error = self._refused(ep, param, error)
                    break
                if exc.status_code < 500 and exc.status_code not in (408, 409):
                    break  # 4xx other than 408/409/429: asking again will not help
                if attempts >= self.config.max_attempts:
                    error = f"retries spent after {attempts} attempts; last: {error}"
                    break
                await pause(backoff_delay(
                    attempts, self.config.backoff_base_s, self.config.backoff_max_s,
                    retry_after_seconds(exc.response.headers), self._rng,
                ))
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                kind = "timeout" if isinstance(exc, openai.APITimeoutError) else "connection error"
                error = f"{kind} ({ep.host}): {_brief(exc)}"
                if attempts >= self.config.max_attempts:
                    error = f"retries spent after {attempts} attempts; last: {error}"
                    if kind == "connection error":  # refused, not slow: spare the other calls the retries
                        _DOWN[ep.base_url] = f"a call spent its {attempts} attempts on connection errors"
                    break
                await pause(
                    backoff_delay(attempts, self.config.backoff_base_s, self.config.backoff_max_s, None, self._rng)
                )
            except Exception as exc:  # undecodable body, schema mismatch, ...
                error = f"malformed response: {type(exc).__name__}: {_brief(exc)}"
                break

        answer = got if ok else Answer(False, error=ep.redact(error))
        return answer.stored(key=key, ep=ep, identity=identity, purpose=purpose, messages=messages, sent=sent,
                             sample_index=req.sample_index, latency=latency, attempts=attempts,
                             run_id=self.run_id, created=created)

    def _slots(self, ep: Endpoint) -> Slots | None:
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
        refused = _REFUSED.setdefault((ep.base_url, ep.served_model), {})
        if param not in refused:
            refused[param] = message
            self.log.info(f"llm [{ep.name}]: {message}")
        return refused[param]

    # -- persistence and progress --------------------------------------------------

_UPDATED = (
    "status", "response_text", "finish_reason", "prompt_tokens", "completion_tokens", "latency_s",
    "attempts", "error", "run_id", "finished_at", "request", "purpose", "endpoint_host",
    "reasoning_text", "reasoning_tokens", "cached_prompt_tokens",
)
# A key stored already takes the new attempt unless that would overwrite a success with a failure
# (two runs racing on one key); its attempts add up.
_UPSERT = OnConflict(
    ("key",), {**{c: f"incoming.{c}" for c in _UPDATED}, "total_attempts": "stored.total_attempts + incoming.attempts"},
    when="stored.status <> 'ok' OR incoming.status = 'ok'",
)


@functools.lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    """The HTTP client's default TLS context, built once per process: building it (reading the CA
    bundle) costs ~35 ms, which a new client per batch would otherwise pay every time."""
    return httpx2.create_ssl_context()


def _json_body(resp: httpx2.Response) -> Any:
    """The reply's JSON; a body that is not JSON is a failed call that says what came instead."""
    try:
        return json.loads(resp.content)
    except ValueError:
        raise _Failed(f"malformed response: the body is not JSON: {resp.text[:200]!r}") from None


def _read_response(body: Any) -> tuple[str, str | None, str | None, int | None, int | None, int | None, int | None]:
    """(content, reasoning, finish_reason, prompt tokens, completion tokens, reasoning tokens,
    prompt tokens served from the provider's prompt cache) of a chat completion's JSON body, a live
    reply's or a batch output line's. Reasoning comes from `reasoning_content` (vLLM, DeepSeek) or
    `reasoning` (Ollama, OpenRouter); content may be empty when the reply was cut inside its
    reasoning. A field of the wrong type is a malformed response, never read as an answer."""
    choices = body.get("choices") if isinstance(body, Mapping) else None
    if choices is None:
        raise _Failed(f"malformed response: no 'choices' field in {str(body)[:200]!r}")
    if not isinstance(choices, list):
        raise _Failed(f"malformed response: 'choices' is {type(choices).__name__}, not a list")
    if not choices:
        raise _Failed("malformed response: empty 'choices'")
    choice = choices[0]
    if not isinstance(choice, Mapping):
        raise _Failed(f"malformed response: choice is {type(choice).__name__}, not an object")
    finish = choice.get("finish_reason")
    message = choice.get("message")
    if message is not None and not isinstance(message, Mapping):
        raise _Failed(f"malformed response: message is {type(message).__name__}, not an object")
    message = message or {}
    content = message.get("content")
    if not isinstance(content, str | None) or not isinstance(finish, str | None):
        raise _Failed(f"malformed response: message content is {type(content).__name__} and finish_reason "
                      f"{type(finish).__name__} (each text or null)")
    # a field present but empty ("") is a think block with nothing in it, kept as such; absent is None
    fields = [f for f in (message.get("reasoning_content"), message.get("reasoning")) if isinstance(f, str)]
    reasoning = next((f for f in fields if f), fields[0] if fields else None)
    if content is None:
        if reasoning is None:
            raise _Failed(f"malformed response: choice has no message content (finish_reason={finish!r})")
        content = ""
    usage = body.get("usage")
    return (
        content,
        reasoning,
        finish,
        _count(usage, "prompt_tokens"),
        _count(usage, "completion_tokens"),
        _count(usage, "completion_tokens_details", "reasoning_tokens"),
        _count(usage, "prompt_tokens_details", "cached_tokens"),
    )


def _count(usage: Any, *path: str) -> int | None:
    """A token count under `usage` (None where the server gives none); not a whole number: malformed."""
    value = usage
    for name in path:
        value = value.get(name) if isinstance(value, Mapping) else None
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _Failed(f"malformed response: usage {'.'.join(path)} is {value!r}, not a count")


def _brief(exc: BaseException, limit: int = 500) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "..."


class _Progress:
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
