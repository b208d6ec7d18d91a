"""A model call's records: the request, its key, the answer, and its row in `llm.calls`.

The one definition every way of calling shares (the ledger's live calls, the flows, batch files and
the Batch API): how a request is keyed (`keyed_request`, `call_key`), what it is sent with
(`sent_params`), how a reply's JSON is read (`Answer.of`), and `CallStore`, the one interface to
`llm.calls` (a lookup of stored calls by key, and the upsert that stores new ones).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from llm_calls.endpoints import Endpoint, model_messages, redact, wire_params
from warehouse import OnConflict


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
    return hashlib.sha256(KEY_JSON.encode(payload).encode()).hexdigest()


# what json.dumps(payload, sort_keys=True, ensure_ascii=False) builds on every call, built once
KEY_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False)


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
            text, reasoning, finish, ptok, ctok, rtok, cached = read_response(body)
        except Malformed as exc:
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


class Malformed(Exception):
    """A reply whose body holds no answer (no choices, a field of the wrong type): a failed call."""


def read_response(body: Any) -> tuple[str, str | None, str | None, int | None, int | None, int | None, int | None]:
    """(content, reasoning, finish_reason, prompt tokens, completion tokens, reasoning tokens,
    prompt tokens served from the provider's prompt cache) of a chat completion's JSON body, a live
    reply's or a batch output line's. Reasoning comes from `reasoning_content` (vLLM, DeepSeek) or
    `reasoning` (Ollama, OpenRouter); content may be empty when the reply was cut inside its
    reasoning. A field of the wrong type is a malformed response, never read as an answer."""
    choices = body.get("choices") if isinstance(body, Mapping) else None
    if choices is None:
        raise Malformed(f"malformed response: no 'choices' field in {str(body)[:200]!r}")
    if not isinstance(choices, list):
        raise Malformed(f"malformed response: 'choices' is {type(choices).__name__}, not a list")
    if not choices:
        raise Malformed("malformed response: empty 'choices'")
    choice = choices[0]
    if not isinstance(choice, Mapping):
        raise Malformed(f"malformed response: choice is {type(choice).__name__}, not an object")
    finish = choice.get("finish_reason")
    message = choice.get("message")
    if message is not None and not isinstance(message, Mapping):
        raise Malformed(f"malformed response: message is {type(message).__name__}, not an object")
    message = message or {}
    content = message.get("content")
    if not isinstance(content, str | None) or not isinstance(finish, str | None):
        raise Malformed(f"malformed response: message content is {type(content).__name__} and finish_reason "
                      f"{type(finish).__name__} (each text or null)")
    # a field present but empty ("") is a think block with nothing in it, kept as such; absent is None
    fields = [f for f in (message.get("reasoning_content"), message.get("reasoning")) if isinstance(f, str)]
    reasoning = next((f for f in fields if f), fields[0] if fields else None)
    if content is None:
        if reasoning is None:
            raise Malformed(f"malformed response: choice has no message content (finish_reason={finish!r})")
        content = ""
    usage = body.get("usage")
    return (
        content,
        reasoning,
        finish,
        token_count(usage, "prompt_tokens"),
        token_count(usage, "completion_tokens"),
        token_count(usage, "completion_tokens_details", "reasoning_tokens"),
        token_count(usage, "prompt_tokens_details", "cached_tokens"),
    )


def token_count(usage: Any, *path: str) -> int | None:
    """A token count under `usage` (None where the server gives none); not a whole number: malformed."""
    value = usage
    for name in path:
        value = value.get(name) if isinstance(value, Mapping) else None
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise Malformed(f"malformed response: usage {'.'.join(path)} is {value!r}, not a count")


UPDATED = (
    "status", "response_text", "finish_reason", "prompt_tokens", "completion_tokens", "latency_s",
    "attempts", "error", "run_id", "finished_at", "request", "purpose", "endpoint_host",
    "reasoning_text", "reasoning_tokens", "cached_prompt_tokens",
)
# A key stored already takes the new attempt unless that would overwrite a success with a failure
# (two runs racing on one key); its attempts add up.
UPSERT = OnConflict(
    ("key",), {**{c: f"incoming.{c}" for c in UPDATED}, "total_attempts": "stored.total_attempts + incoming.attempts"},
    when="stored.status <> 'ok' OR incoming.status = 'ok'",
)


class CallStore:
    """`llm.calls` as the engine reads and writes it, over one warehouse writer: every way of calling
    looks its keys up and stores its rows here."""

    def __init__(self, writer: Any):
        self.writer = writer

    def lookup(self, keys: list[str]) -> tuple[dict[str, CallResult], set[str]]:
        """Finished calls among `keys`, and every key that has a row at all (a failed one too)."""
        if not keys:
            return {}, set()
        rows = self.writer.query(*lookup_sql(keys))
        out = {}
        for key, status, text, finish, ptok, ctok, latency, attempts, reasoning, rtok in rows:
            if status == "ok":
                out[key] = CallResult(key=key, ok=True, text=text, finish_reason=finish, prompt_tokens=ptok,
                                      completion_tokens=ctok, latency_s=latency, attempts=attempts, error=None,
                                      cached=True, reasoning=reasoning, reasoning_tokens=rtok)
        return out, {r[0] for r in rows}

    def save(self, rows: Sequence[Mapping[str, Any]], fresh: Any = None) -> None:
        """Store `rows` (one per key): a stored key takes the new attempt unless that would overwrite a
        success with a failure (`UPSERT`). `fresh`: the keys known to have no row yet."""
        if fresh is None:
            self.writer.upsert("llm.calls", list(rows), UPSERT)
        else:
            self.writer.upsert("llm.calls", list(rows), UPSERT, fresh)
