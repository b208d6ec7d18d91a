"""The live calls' HTTP path: one `aiohttp` session per endpoint, a chat completion's JSON posted as
bytes and its reply read back as bytes (`Ledger.send` reads the JSON itself, `records.Answer.of`).

Why not the `openai` client here: on a server that answers in milliseconds (vLLM on a GPU node) the
client is the bottleneck. Its plain POST walks httpx's and httpcore's layers (auth, redirects, a
connection pool that scans every connection per request): a py-spy profile of 4,000 calls at
concurrency 256 put 84 % of the call loop's CPU in them, about 2 ms a call. `aiohttp`'s C-accelerated
parser and pool took 0.25 ms a call on the same server (`benchmarks/peer_calls.py` measures the whole
run against a raw asyncio client and Inspect AI). The `openai` client stays where its features
matter: the Batch and Files APIs (`batch.py`).

Errors keep the client's meaning: a status of 400 or more is an `HttpStatusError` with the status,
the headers (`Retry-After`) and OpenAI's error fields (`message`, `code`, `param`); a request that
timed out is an `HttpTimeout`; one that could not connect or lost its connection an
`HttpConnectionError`. The API key travels only in the `Authorization` header.

`served_ids` lists an endpoint's models (`GET /models`, the models probe's first request) with the
standard library's client and the same proxy and errors, so a run that makes no batch loads no
`openai` client (0.5-0.65 s of every command's start, and about 60 MiB).
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp

from llm_calls.transport import tls_context

USER_AGENT = "benchsmith"


class HttpError(Exception):
    """Any of the three below: the request got no usable reply."""


class HttpTimeout(HttpError):
    """No reply within the configured timeout (connecting, or between two reads of the reply)."""


class HttpConnectionError(HttpError):
    """The request could not be sent or its reply was cut (refused, reset, closed by the server)."""


class HttpStatusError(HttpError):
    """A reply with a status of 400 or more; `message`, `code` and `param` from OpenAI's error body."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes):
        self.status, self.headers, self.body = status, headers, body
        self.message, self.code, self.param = _error_fields(body)
        super().__init__(f"Error code: {status} - {self.message}")


def _error_fields(body: bytes) -> tuple[str, Any, Any]:
    """(message, code, param) of an error body: OpenAI's `{"error": {...}}`, else the body as text."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text[:500], None, None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or text[:500]), error.get("code"), error.get("param")
    if isinstance(error, str):
        return error, None, None
    return text[:500], None, None


def _headers(api_key: str | None) -> dict[str, str]:
    return {"Accept": "application/json", "User-Agent": USER_AGENT, "Authorization": f"Bearer {api_key or 'not-needed'}"}


def served_ids(base_url: str, api_key: str | None, timeout_s: float) -> list[str]:
    """The model ids an endpoint serves (`GET <base_url>/models`, OpenAI's `{"data": [{"id": ...}]}`),
    through the environment's proxy as the calls go; errors as `Client.post` raises them, and a reply
    that lists no models is an `HttpError` that quotes it."""
    url = base_url.rstrip("/") + "/models"
    proxy = proxy_for(url)
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({urlsplit(url).scheme: proxy} if proxy else {})]
    if url.startswith("https"):
        handlers.append(urllib.request.HTTPSHandler(context=tls_context()))
    request = urllib.request.Request(url, headers=_headers(api_key))
    try:
        with urllib.request.build_opener(*handlers).open(request, timeout=timeout_s) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        raise HttpStatusError(exc.code, exc.headers, exc.read()) from None
    except TimeoutError as exc:
        raise HttpTimeout(f"Request timed out ({type(exc).__name__})") from exc
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise HttpTimeout(f"Request timed out ({type(exc.reason).__name__})") from exc
        raise HttpConnectionError(f"{type(exc.reason).__name__}: {exc.reason}") from exc
    except (OSError, ValueError) as exc:  # the connection cut mid-reply, a bad status line
        raise HttpConnectionError(f"{type(exc).__name__}: {exc}") from exc
    try:
        return [m["id"] for m in json.loads(body)["data"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise HttpError(f"the models list is not OpenAI's layout: {body[:200].decode('utf-8', 'replace')!r}") from exc


def proxy_for(url: str) -> str | None:
    """The proxy the environment names for `url` (`HTTPS_PROXY`, `HTTP_PROXY`), unless `NO_PROXY` covers
    its host; None for none."""
    parts = urlsplit(url)
    proxy = getproxies().get(parts.scheme)
    return proxy if proxy and not proxy_bypass(parts.hostname or "") else None


class Client:
    """One endpoint's HTTP session (its own connection pool, keep-alive), in the event loop that made it."""

    def __init__(self, base_url: str, api_key: str | None, timeout_s: float, tls: ssl.SSLContext | None):
        self.url = base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json", **_headers(api_key)}
        connector = aiohttp.TCPConnector(limit=0, ssl=tls if self.url.startswith("https") else False,
                                         enable_cleanup_closed=True)
        # the proxy from HTTP(S)_PROXY and NO_PROXY, as httpx reads them, looked up once: aiohttp's
        # `trust_env` looks it up (and reads ~/.netrc) for every request, which tripled its CPU per call
        self._session = aiohttp.ClientSession(
            connector=connector, headers=headers, skip_auto_headers=("Accept-Encoding",), proxy=proxy_for(self.url),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s))

    async def post(self, body: bytes) -> bytes:
        """POST a chat completion's JSON; the reply's body (status 2xx), else `HttpStatusError`."""
        try:
            async with self._session.post(self.url, data=body) as resp:
                content = await resp.read()
                if resp.status >= 400:
                    raise HttpStatusError(resp.status, resp.headers, content)
                return content
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise HttpTimeout(f"Request timed out ({type(exc).__name__})") from exc
        except aiohttp.ClientError as exc:
            raise HttpConnectionError(f"{type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        await self._session.close()

    def is_closed(self) -> bool:
        return self._session.closed
