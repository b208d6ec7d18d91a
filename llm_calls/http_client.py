"""The live calls' HTTP path: per endpoint, keep-alive HTTP/1.1 connections on the event loop's
own transports, a chat completion's JSON written as bytes and its reply parsed by `httptools`
(`Ledger.send` reads the JSON itself, `records.Answer.of`).

Why not the `openai` client here: on a server that answers in milliseconds (vLLM on a GPU node) the
client is the bottleneck. Its plain POST walks httpx's and httpcore's layers (auth, redirects, a
connection pool that scans every connection per request): a py-spy profile of 4,000 calls at
concurrency 256 put 84 % of the call loop's CPU in them, about 2 ms a call. `aiohttp` took 0.25 ms a
call on the same server, and in a profile of 20,000 calls (5 ms, concurrency 256) was still a quarter
of the process's CPU (8 % in `ClientSession._request` alone: cookies, tracing, redirects, headers). A
connection here does what a chat completion needs: write the request, feed the reply to llhttp
(Node's HTTP parser, uvicorn's through `httptools`), hand back the body. Through a proxy the calls
still go through `aiohttp` (`_Proxied`), which tunnels TLS through it. The `openai` client stays
where its features matter: the Batch and Files APIs (`batch.py`).

Errors keep the client's meaning: a status of 400 or more is an `HttpStatusError` with the status,
the headers (names lowercased: `retry-after`) and OpenAI's error fields (`message`, `code`,
`param`); a request that timed out (connecting, or between two reads of its reply) is an
`HttpTimeout`; one that could not connect, lost its connection or got no HTTP back an
`HttpConnectionError`. The API key travels only in the `Authorization` header.

`served_ids` lists an endpoint's models (`GET /models`, the models probe's first request) with the
standard library's client and the same proxy and errors, so a run that makes no batch loads no
`openai` client (0.5-0.65 s of every command's start, and about 60 MiB).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.error
import urllib.request
import zlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit
from urllib.request import getproxies, proxy_bypass

import httptools

from llm_calls.transport import tls_context

USER_AGENT = "benchsmith"


class HttpError(Exception):
    """Any of the three below: the request got no usable reply."""


class HttpTimeout(HttpError):
    """No reply within the configured timeout (connecting, or between two reads of the reply)."""


class HttpConnectionError(HttpError):
    """The request could not be sent or its reply was cut (refused, reset, closed by the server)."""


class HttpStatusError(HttpError):
    """A reply with a status other than 2xx; `message`, `code` and `param` from OpenAI's error body.
    A redirect (3xx) is not followed: a chat completion sent again elsewhere could be a GET or go
    to a host the configuration does not name. Its message says where it pointed."""

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes):
        self.status, self.headers, self.body = status, headers, body
        self.message, self.code, self.param = _error_fields(body)
        if 300 <= status < 400:
            self.message = (f"redirected to {headers.get('location') or '(no location)'}; calls are not redirected: "
                            "set the model's base_url to the address the server names")
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
    """One endpoint's keep-alive HTTP/1.1 connections, in the event loop that made it.

    A request takes an idle connection (the one used last) or opens one, writes its bytes, and
    gets back the reply that `httptools` (llhttp, Node's HTTP parser, in C) read off the socket:
    no layer between the socket and the bytes but that parser. Where the environment names a
    proxy for the endpoint, the calls go through `aiohttp` instead (`_Proxied`), which speaks to
    proxies (`CONNECT` for TLS, their credentials); nothing else does.

    A connection that closed while idle (a server's keep-alive timeout) leaves the pool; one whose
    request failed or was cancelled is closed, never reused. Replies without a length end with
    their connection, as RFC 9112 section 6.3 says; a gzip or deflate body is decompressed."""

    def __init__(self, base_url: str, api_key: str | None, timeout_s: float, tls: ssl.SSLContext | None):
        self.url = base_url.rstrip("/") + "/chat/completions"
        parts = urlsplit(self.url)
        https = parts.scheme == "https"
        self._host, self._port = parts.hostname or "localhost", parts.port or (443 if https else 80)
        self._tls, self._timeout = (tls or ssl.create_default_context()) if https else None, timeout_s
        headers = {"Host": parts.netloc.rpartition("@")[2], "Content-Type": "application/json", **_headers(api_key)}
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._head = (f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                      + "Content-Length: ").encode("latin-1")
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self._closed = False
        proxy = proxy_for(self.url)
        self._proxied = _Proxied(self.url, api_key, timeout_s, self._tls, proxy) if proxy else None

    async def post(self, body: bytes) -> bytes:
        """POST a chat completion's JSON; the reply's body (status 2xx), else `HttpStatusError`."""
        if self._proxied is not None:
            return await self._proxied.post(body)
        conn = self._idle.pop() if self._idle else None
        while conn is not None and conn.closing():  # closed by the server, its `connection_lost` not yet run
            conn = self._idle.pop() if self._idle else None
        conn = conn or await self._connect()
        try:
            status, headers, content = await conn.request(self._head + str(len(body)).encode() + b"\r\n\r\n" + body)
        except BaseException:  # a failed or cancelled request: its connection is in an unknown state
            conn.close()
            raise
        if conn.reusable and not self._closed:
            self._idle.append(conn)
        else:
            conn.close()
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("gzip", "deflate"):
            try:
                content = zlib.decompress(content, 16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
            except zlib.error as exc:
                raise HttpConnectionError(f"the reply's {encoding} body does not decompress: {exc}") from None
        if not 200 <= status < 300:
            raise HttpStatusError(status, headers, content)
        return content

    async def _connect(self) -> _Connection:
        if self._closed:
            raise HttpConnectionError("the client is closed")
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._timeout):
                _, conn = await loop.create_connection(lambda: _Connection(self, loop), self._host, self._port,
                                                       ssl=self._tls, server_hostname=self._host if self._tls else None)
        except TimeoutError as exc:
            raise HttpTimeout(f"Request timed out (connecting to {self._host}:{self._port})") from exc
        except OSError as exc:  # refused, unreachable, a TLS handshake that failed (ssl.SSLError)
            raise HttpConnectionError(f"{type(exc).__name__}: {exc}") from exc
        self._open.add(conn)
        return conn

    def _gone(self, conn: _Connection) -> None:
        self._open.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)

    async def close(self) -> None:
        self._closed = True
        for conn in list(self._open):
            conn.close()
        self._idle.clear()
        if self._proxied is not None:
            await self._proxied.close()

    def is_closed(self) -> bool:
        return self._closed


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection, one request at a time: its bytes written, its reply parsed as it
    comes (`httptools` calls the `on_*` methods from `feed_data`). The read timeout is the time
    between two reads of the reply, as `aiohttp`'s `sock_read`: one timer a request, moved on only
    when it fires before the last read's deadline."""

    def __init__(self, client: Client, loop: asyncio.AbstractEventLoop):
        self._client, self._loop = client, loop
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[tuple[int, dict[str, str], bytes]] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._last_read = 0.0
        self.reusable = False
        self._begin()

    def _begin(self) -> None:
        self._status, self._headers, self._body = 0, {}, bytearray()
        self._header_name = b""
        self._complete = self._headers_done = False

    async def request(self, data: bytes) -> tuple[int, dict[str, str], bytes]:
        """Write `data` (a whole request) and wait for its reply: (status, headers with lowercased
        names, body)."""
        if self.closing():
            raise HttpConnectionError("the connection closed before the request was sent")
        self.reusable = False
        self._begin()
        self._waiter = self._loop.create_future()
        self._last_read = self._loop.time()
        self._timer = self._loop.call_at(self._last_read + self._client._timeout, self._timed_out)
        self._transport.write(data)
        try:
            return await self._waiter
        finally:
            self._waiter = None
            self._timer.cancel()

    def _fail(self, exc: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        self.close()

    def _timed_out(self) -> None:
        deadline = self._last_read + self._client._timeout
        if deadline > self._loop.time() and self._waiter is not None and not self._waiter.done():
            self._timer = self._loop.call_at(deadline, self._timed_out)  # a read since: wait from it
        else:
            self._fail(HttpTimeout("Request timed out (no reply byte within the timeout)"))

    def closing(self) -> bool:
        return self._transport is None or self._transport.is_closing()

    def close(self) -> None:
        self.reusable = False
        if self._transport is not None:
            self._transport.close()

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # bytes nobody asked for (a server's farewell on an idle connection)
            self.close()
            return
        self._last_read = self._loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(HttpConnectionError(f"the reply is not HTTP: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self._client._gone(self)
        self.reusable = False
        if self._waiter is None or self._waiter.done():
            return
        if self._headers_done and "content-length" not in self._headers and "transfer-encoding" not in self._headers:
            self._waiter.set_result((self._status, self._headers, bytes(self._body)))  # a body that ends with its connection
            return
        why = f": {type(exc).__name__}: {exc}" if exc else ""
        self._waiter.set_exception(HttpConnectionError(f"the server closed the connection before the reply ended{why}"))

    # -- httptools' callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._status, self._headers_done = self._parser.get_status_code(), True

    def on_body(self, body: bytes) -> None:
        self._body += body

    def on_message_complete(self) -> None:
        if 100 <= self._status < 200:  # an interim reply (100 Continue, 103 Early Hints): the final one follows
            self._begin()
            return
        self.reusable = self._parser.should_keep_alive()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result((self._status, self._headers, bytes(self._body)))


class _Proxied:
    """The calls through a proxy the environment names (`proxy_for`): an `aiohttp` session, which
    tunnels TLS through the proxy (`CONNECT`) and sends its credentials; imported only here."""

    def __init__(self, url: str, api_key: str | None, timeout_s: float, tls: ssl.SSLContext | None, proxy: str):
        import aiohttp

        self._aiohttp, self.url = aiohttp, url
        connector = aiohttp.TCPConnector(limit=0, ssl=tls if tls is not None else False, enable_cleanup_closed=True)
        # the proxy looked up once: aiohttp's `trust_env` looks it up (and reads ~/.netrc) per request
        self._session = aiohttp.ClientSession(
            connector=connector, headers={"Content-Type": "application/json", **_headers(api_key)},
            skip_auto_headers=("Accept-Encoding",), proxy=proxy,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s))

    async def post(self, body: bytes) -> bytes:
        aiohttp = self._aiohttp
        try:
            async with self._session.post(self.url, data=body, allow_redirects=False) as resp:
                content = await resp.read()
                if not 200 <= resp.status < 300:
                    raise HttpStatusError(resp.status, {k.lower(): v for k, v in resp.headers.items()}, content)
                return content
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise HttpTimeout(f"Request timed out ({type(exc).__name__})") from exc
        except aiohttp.ClientError as exc:
            raise HttpConnectionError(f"{type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        await self._session.close()
