"""Configured models resolved to live OpenAI-compatible endpoints.

`ModelRegistry` turns the `models` section of the configuration into
`Endpoint`s: a remote model is its `base_url` plus the key read from the
environment at this moment; the embedded model is started on first use and
stopped by `close()`. A model's *identity* (what the ledger's cache key hashes)
never includes a secret or the embedded server's port, so cached calls survive
restarts.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from configuration import Config, ModelConfig
from llm_calls.embedded import EmbeddedServer, embedded_model_path


@dataclass(frozen=True)
class Endpoint:
    name: str
    base_url: str
    served_model: str
    identity: str
    host: str
    concurrency: int
    sampling: dict[str, Any]
    send_seed: bool
    token_param: str = "max_tokens"  # the name the token budget is sent under
    refused: frozenset[str] = frozenset()  # sampling parameters never sent (the endpoint refuses them)
    api_key: str | None = field(default=None, repr=False)  # never logged or stored
    # the embedded server's `death()`: None while it lives, else why it died (None for a remote model)
    server_death: Callable[[], str | None] | None = field(default=None, repr=False, compare=False)

    def redact(self, text: str | None) -> str | None:
        """`text` with this endpoint's key masked (see `redact`)."""
        return redact(text, [self.api_key])


# Tokens that look like API keys, masked even when the secret itself is not known here.
_KEY_LIKE = re.compile(r"\b(sk|pk|rk|key|hf|gsk|xai)[-_][A-Za-z0-9_\-]{8,}|\b(Bearer)\s+[A-Za-z0-9._\-]{8,}")


def redact(text: str | None, secrets: Iterable[str | None] = (), key_like: bool = True) -> str | None:
    """The one redaction helper for everything that leaves a model call (ledger rows, the models
    table, logs, check metadata): each known secret becomes `***`, and, with `key_like` (error
    texts), so does anything shaped like an API key or a bearer token. A server's 401 reply that
    echoes the key stays readable. Replies are masked with `key_like=False`: a model's own answer
    may rightly contain "sk-..."-shaped text, never a configured key."""
    if not text:
        return text
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    if not key_like:
        return text
    return _KEY_LIKE.sub(lambda m: f"{m.group(1) or m.group(2)}-***" if m.group(1) else "Bearer ***", text)


def endpoint_host(base_url: str) -> str:
    """`host:port` of a URL, dropping any user-info (credentials) and path."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    return f"{host}:{parts.port}" if parts.port else host


def model_identity(name: str, m: ModelConfig) -> str:
    if m.embedded is not None:
        return f"embedded:{embedded_model_path(m.embedded).name}"
    return f"{m.model}@{endpoint_host(m.base_url or '')}"


def default_sampling(m: ModelConfig) -> dict[str, Any]:
    """What every request of model `m` carries unless the call says otherwise: its sampling defaults,
    its `extra_body` fields and, with a prefill, the fields that make the endpoint continue it (all
    part of the cache key)."""
    return {**{k: v for k, v in m.sampling.model_dump().items() if v is not None},
            **(m.prefill_params if m.prefill else {}), **m.extra_body}


def model_messages(m: ModelConfig, messages: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """A conversation as model `m` is asked it: its `system_prompt` first (unless the conversation
    has a system message), its `prefill` as a final assistant message to continue."""
    out = [{"role": x["role"], "content": x["content"]} for x in messages]
    if m.system_prompt and not (out and out[0]["role"] == "system"):
        out.insert(0, {"role": "system", "content": m.system_prompt})
    if m.prefill and not (out and out[-1]["role"] == "assistant"):
        out.append({"role": "assistant", "content": m.prefill})
    return out


def chat_body(served_model: str, messages: Sequence[Mapping[str, str]], sent: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body of one chat completion request, `sent` being its parameters as sent
    (`records.sent_params`), every one at the top level: a live call posts it, a batch line carries it."""
    return {"model": served_model, "messages": [dict(m) for m in messages], **sent}


def wire_params(params: dict[str, Any], token_param: str, refused: frozenset[str]) -> dict[str, Any]:
    """A request's parameters as the endpoint takes them: the refused ones left out, the token
    budget under the endpoint's name for it. The cache key is made from `params` before this."""
    out = {k: v for k, v in params.items() if k not in refused}
    if token_param != "max_tokens" and "max_tokens" in out:
        out[token_param] = out.pop("max_tokens")
    return out


class ModelRegistry:
    """Resolves model names to endpoints; owns the embedded servers it starts."""

    def __init__(self, config: Config):
        self.config = config
        self._servers: dict[str, EmbeddedServer] = {}
        self._lock = threading.Lock()

    def identity(self, name: str) -> str:
        return model_identity(name, self.config.model(name))

    def endpoint(self, name: str) -> Endpoint:
        """The live endpoint for `name`; starts the embedded server on first use.

        Raises ConfigError when the model's API-key variable is unset.
        """
        m = self.config.model(name)
        death = None
        if m.embedded is not None:
            with self._lock:
                server = self._servers.get(m.embedded)
                if server is None or not server.running():
                    if server is not None:
                        server.death(wait_s=0)  # records a crash, so that start() refuses to repeat it
                        server.stop()
                        self._servers.pop(m.embedded, None)
                    server = EmbeddedServer(m.embedded, n_ctx=m.n_ctx).start()
                    self._servers[m.embedded] = server
            base_url, api_key, death = server.base_url, None, server.death
        else:
            base_url, api_key = m.base_url or "", self.config.api_key(name)
        return Endpoint(
            name=name,
            base_url=base_url,
            served_model=m.served_model,
            identity=self.identity(name),
            host=endpoint_host(base_url),
            concurrency=m.concurrency,
            sampling=default_sampling(m),
            send_seed=m.send_seed,
            token_param=m.sent_token_param,
            refused=m.refused_params,
            api_key=api_key,
            server_death=death,
        )

    def secrets(self) -> list[str]:
        """Every configured model's API key that the environment holds now: masked in all that is
        stored, replies included (a server may echo a key inside an answer)."""
        names = {m.api_key_env for m in self.config.models.values() if m.api_key_env}
        return sorted({v for v in (os.environ.get(n) for n in names) if v}, key=len, reverse=True)

    def close(self) -> None:
        with self._lock:
            for server in self._servers.values():
                server.stop()
            self._servers.clear()

    def __enter__(self) -> ModelRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
