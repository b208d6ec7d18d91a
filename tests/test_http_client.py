"""The live calls' HTTP path (llm_calls/http_client.py): errors mean what the `openai` client made them mean."""

import asyncio
import json

import pytest

from llm_calls.http_client import Client, HttpConnectionError, HttpStatusError, HttpTimeout, _error_fields, proxy_for


def test_openai_error_bodies_give_their_message_code_and_param():
    body = json.dumps({"error": {"message": "Unsupported parameter: 'max_tokens'", "type": "invalid_request_error",
                                 "param": "max_tokens", "code": "unsupported_parameter"}}).encode()
    assert _error_fields(body) == ("Unsupported parameter: 'max_tokens'", "unsupported_parameter", "max_tokens")
    assert _error_fields(b'{"error": "model not loaded"}') == ("model not loaded", None, None)  # vLLM's and others'
    assert _error_fields(b"<html>502 Bad Gateway</html>") == ("<html>502 Bad Gateway</html>", None, None)
    error = HttpStatusError(429, {"retry-after": "2"}, b'{"error": {"message": "slow down"}}')
    assert error.status == 429 and error.headers["retry-after"] == "2" and str(error) == "Error code: 429 - slow down"


def _serve(handler):
    """A loopback server whose connections `handler(reader, writer)` answers; (server, port)."""
    async def start():
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        return server, server.sockets[0].getsockname()[1]
    return start()


@pytest.mark.parametrize("how", ["cut", "silent", "refused"])
def test_a_cut_reply_is_a_connection_error_and_a_silent_one_a_timeout(how):
    async def handler(reader, writer):
        await reader.readuntil(b"\r\n\r\n")
        if how == "cut":
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"choices\"")
            await writer.drain()
            writer.close()
        else:
            await asyncio.sleep(5)

    async def main():
        server, port = await _serve(handler)
        if how == "refused":
            server.close()
            await server.wait_closed()
        client = Client(f"http://127.0.0.1:{port}/v1", "key", 0.3, None)
        try:
            await client.post(b"{}")
        finally:
            await client.close()
            server.close()

    expected = HttpTimeout if how == "silent" else HttpConnectionError
    with pytest.raises(expected):
        asyncio.run(main())


def test_the_proxy_comes_from_the_environment_unless_no_proxy_covers_the_host(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert proxy_for("https://api.openai.com/v1/chat/completions") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "gpu-box,127.0.0.1")
    assert proxy_for("https://api.openai.com/v1/chat/completions") == "http://proxy.internal:3128"
    assert proxy_for("https://gpu-box:8000/v1/chat/completions") is None
    assert proxy_for("http://127.0.0.1:8000/v1/chat/completions") is None  # no HTTP_PROXY either


def _listing(handler):
    """`served_ids` against a loopback server answering with `handler` (in a thread of its own)."""
    import threading

    from llm_calls.http_client import served_ids

    loop = asyncio.new_event_loop()
    server, port = loop.run_until_complete(_serve(handler))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        return served_ids(f"http://127.0.0.1:{port}/v1", "sk-listing", 0.5)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        server.close()


def _answer(status: str, body: bytes):
    async def handler(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"GET /v1/models ") and b"Bearer sk-listing" in head
        writer.write(b"HTTP/1.1 " + status.encode() + b"\r\ncontent-length: " + str(len(body)).encode()
                     + b"\r\nconnection: close\r\n\r\n" + body)
        await writer.drain()
        writer.close()
    return handler


def test_the_models_list_gives_the_served_ids_and_its_failures_the_post_errors():
    from llm_calls.http_client import HttpError

    listed = json.dumps({"object": "list", "data": [{"id": "m-1", "object": "model"}, {"id": "m-2"}]}).encode()
    assert _listing(_answer("200 OK", listed)) == ["m-1", "m-2"]
    with pytest.raises(HttpStatusError) as denied:
        _listing(_answer("401 Unauthorized", b'{"error": {"message": "bad key", "code": "invalid_api_key"}}'))
    assert denied.value.status == 401 and denied.value.code == "invalid_api_key"
    with pytest.raises(HttpError, match="not OpenAI's layout"):  # an answer that lists nothing is no list
        _listing(_answer("200 OK", b'{"models": ["m-1"]}'))

    async def silent(reader, writer):
        await asyncio.sleep(3)

    with pytest.raises(HttpTimeout):
        _listing(silent)


def test_a_refused_models_list_is_a_connection_error():
    import socket

    from llm_calls.http_client import served_ids

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(HttpConnectionError):
        served_ids(f"http://127.0.0.1:{port}/v1", None, 0.5)
