"""The least a client can do, the benchmarks' reference for a client's CPU: HTTP/1.1 over asyncio
streams, one keep-alive connection per concurrent request, each request's bytes written as they are
and each reply read by its `Content-Length` and parsed with `json.loads`. No retries, no pool, no
proxy, no TLS: a reference to measure against, never a path for the project's calls (those go
through `llm_calls/http_client.py`)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from urllib.parse import urlsplit


async def replay(url: str, bodies: Sequence[bytes], concurrency: int) -> list[str]:
    """POST every JSON body to `url` (a chat completions URL on plain HTTP), `concurrency` at a
    time as one stream, and return each reply's message content, in the bodies' order. A reply
    that is not a 200 with a chat completion raises, naming the request."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    head = f"POST {parts.path} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n".encode()
    answers: list[str] = [""] * len(bodies)
    queue = iter(range(len(bodies)))

    async def worker() -> None:
        reader, writer = await asyncio.open_connection(host, port)
        try:
            for k in queue:  # one iterator shared by the workers: each index taken once
                body = bodies[k]
                writer.write(head + b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
                reply_head = (await reader.readuntil(b"\r\n\r\n")).lower()
                if not reply_head.startswith((b"http/1.1 200", b"http/1.0 200")):
                    raise RuntimeError(f"request {k}: {reply_head.splitlines()[0].decode()}")
                at = reply_head.find(b"content-length:")
                length = int(reply_head[at + 15:reply_head.find(b"\r\n", at)])
                answers[k] = json.loads(await reader.readexactly(length))["choices"][0]["message"]["content"]
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(bodies)))))
    return answers


def timed_replay(url: str, bodies: Sequence[bytes], concurrency: int) -> tuple[float, float]:
    """`replay` in an event loop of its own: (wall seconds, CPU seconds of this process meanwhile)."""
    cpu0, t0 = time.process_time(), time.monotonic()
    asyncio.run(replay(url, bodies, concurrency))
    return time.monotonic() - t0, time.process_time() - cpu0
