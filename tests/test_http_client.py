"""The live calls' HTTP path (llm_calls/http_client.py): errors mean what the `openai` client made them mean."""

import asyncio
import json
import ssl

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


def _reply(body: bytes, status: str = "200 OK", extra: bytes = b"") -> bytes:
    return (b"HTTP/1.1 " + status.encode() + b"\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n" + extra + b"\r\n" + body)


async def _read_request(reader) -> tuple[bytes, bytes]:
    """(head, body) of one request, read by its Content-Length."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")))
    return head, await reader.readexactly(length)


def _in_turn(replies: list[bytes]):
    """A handler that answers each request with the next of `replies`, on any connection; a reply
    that says `connection: close` closes its connection."""
    async def handler(reader, writer):
        while replies:
            try:
                await _read_request(reader)
            except asyncio.IncompleteReadError:
                return
            reply = replies.pop(0)
            writer.write(reply)
            await writer.drain()
            if b"connection: close" in reply:
                writer.close()
                return
    return handler


def _post_all(handler, bodies, timeout_s=2.0, after=None):
    """POST each body in turn through one `Client` to a loopback server answering with `handler`;
    the replies (or the exceptions), in order. `after(k)` is awaited after the k-th request."""
    async def main():
        server, port = await _serve(handler)
        client = Client(f"http://127.0.0.1:{port}/v1", "sk-test", timeout_s, None)
        out = []
        try:
            for k, body in enumerate(bodies):
                try:
                    out.append(await client.post(body))
                except Exception as exc:  # noqa: BLE001 (the test reads which)
                    out.append(exc)
                if after:
                    await after(k)
        finally:
            await client.close()
            server.close()
        return out
    return asyncio.run(main())


def _echoing(seen: dict):
    """A handler that answers each request with `{"echo": <its body>}`, counting connections in
    `seen["connections"]` and keeping each request's head and body in `seen["heads"]`, `seen["bodies"]`."""
    async def handler(reader, writer):
        seen["connections"] = seen.get("connections", 0) + 1
        while not reader.at_eof():
            try:
                head, body = await _read_request(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            seen.setdefault("heads", []).append(head)
            seen.setdefault("bodies", []).append(body)
            writer.write(_reply(b'{"echo": ' + body + b"}"))
            await writer.drain()
    return handler


def test_requests_share_one_keep_alive_connection_and_carry_their_headers_and_body():
    seen: dict = {}
    handler = _echoing(seen)
    bodies = [json.dumps({"n": k}).encode() for k in range(5)]
    assert _post_all(handler, bodies) == [b'{"echo": ' + b + b"}" for b in bodies]
    assert seen["connections"] == 1
    head = seen["heads"][0].decode()
    assert head.startswith("POST /v1/chat/completions HTTP/1.1\r\n")
    assert "Authorization: Bearer sk-test\r\n" in head and "Host: 127.0.0.1:" in head
    assert "Content-Type: application/json\r\n" in head


def test_a_connection_the_server_closed_while_idle_is_not_reused():
    seen = {"connections": 0}

    async def handler(reader, writer):  # one request per connection, then the server closes it
        seen["connections"] += 1
        await _read_request(reader)
        writer.write(_reply(b'{"ok": 1}'))
        await writer.drain()
        writer.close()

    async def pause(k):
        await asyncio.sleep(0.05)  # the close reaches the client while its connection is idle

    assert _post_all(handler, [b"{}"] * 3, after=pause) == [b'{"ok": 1}'] * 3
    assert seen["connections"] == 3


def test_chunked_gzip_and_unlengthed_replies_are_read_whole():
    import gzip

    body = b'{"choices": [{"message": {"content": "B"}}]}'
    replies = [
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\n" + body[:5] + b"\r\n"
        + f"{len(body) - 5:x}".encode() + b"\r\n" + body[5:] + b"\r\n0\r\n\r\n",
        _reply(gzip.compress(body), extra=b"content-encoding: gzip\r\n"),
        b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n" + body,  # ends with its connection (RFC 9112 6.3)
    ]

    assert _post_all(_in_turn(replies), [b"{}"] * 3) == [body] * 3


def test_a_status_error_keeps_the_retry_after_header_and_a_bad_reply_is_a_connection_error():
    replies = [_reply(b'{"error": {"message": "slow down", "code": "rate_limit"}}', "429 Too Many Requests",
                      b"Retry-After: 2\r\n"),
               b"SPDY/9 nonsense\r\n\r\n"]

    limited, garbled = _post_all(_in_turn(replies), [b"{}"] * 2)
    assert isinstance(limited, HttpStatusError) and limited.status == 429 and limited.code == "rate_limit"
    assert limited.headers["retry-after"] == "2"
    assert isinstance(garbled, HttpConnectionError) and "not HTTP" in str(garbled)


def test_a_redirect_is_a_status_error_that_names_where_it_points_not_a_reply():
    """An `http` base URL that a server sends on to `https` (a 301 with an empty body): not read as
    the reply (whose JSON is missing), not followed, but an error saying where to point the model."""
    replies = [_reply(b"", "301 Moved Permanently", b"Location: https://gpu-box/v1/chat/completions\r\n"),
               _reply(b"", "204 No Content")]
    moved, empty = _post_all(_in_turn(replies), [b"{}"] * 2)
    assert isinstance(moved, HttpStatusError) and moved.status == 301
    assert "redirected to https://gpu-box/v1/chat/completions" in str(moved) and "base_url" in str(moved)
    assert empty == b""  # any 2xx is the reply's body (the ledger then says it is not JSON)


def test_interim_replies_are_skipped_for_the_final_one_in_one_packet_or_apart():
    """RFC 9110 section 15.2: a client reads any 1xx replies (100 Continue, 103 Early Hints from a
    CDN in front of an API) before the final one; each was the call's reply and failed it."""
    async def apart(reader, writer):
        for k in range(2):
            await _read_request(reader)
            writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" + _reply(b'{"n": %d}' % k))
            await writer.drain()

    together = [b"HTTP/1.1 100 Continue\r\n\r\n" + _reply(b'{"n": 0}'), _reply(b'{"n": 1}')]
    assert _post_all(_in_turn(together), [b"{}"] * 2) == [b'{"n": 0}', b'{"n": 1}']
    assert _post_all(apart, [b"{}"] * 2) == [b'{"n": 0}', b'{"n": 1}']


def test_a_redirected_call_is_recorded_as_failed_once_not_retried(tmp_path):
    from llm_calls import CallRequest, Ledger, ModelRegistry
    from llm_calls.stub_server import StubServer
    from tests.conftest import stub_config, user
    from warehouse import Warehouse

    with StubServer() as stub:
        cfg = stub_config(stub, tmp_path)
        wh = Warehouse(cfg.warehouse_path(), lock_timeout_s=30)
        with ModelRegistry(cfg) as registry:
            result = Ledger(wh, registry).complete(
                "stub", [CallRequest(user("[[stub: status=308 location=https://elsewhere/v1]] Say hi."))])[0]
        sent = len(stub.requests)
    assert not result.ok and result.attempts == 1 and "HTTP 308" in result.error and "https://elsewhere/v1" in result.error
    assert sent == 1 and wh.rows("SELECT status, attempts FROM llm.calls") == [{"status": "failed", "attempts": 1}]


def test_the_timeout_is_between_two_reads_not_for_the_whole_reply():
    body = b'{"slow": true}'
    reply = _reply(body)

    async def trickle(reader, writer):  # the reply a few bytes at a time, 0.15 s apart: 1.5 s in all
        await _read_request(reader)
        step = len(reply) // 10 + 1
        for at in range(0, len(reply), step):
            writer.write(reply[at:at + step])
            await writer.drain()
            await asyncio.sleep(0.15)

    assert _post_all(trickle, [b"{}"], timeout_s=0.5) == [body]


def test_a_cancelled_request_closes_its_connection_and_the_next_gets_its_own_reply():
    seen = {"connections": 0}

    async def handler(reader, writer):
        seen["connections"] += 1
        n = 0
        while True:
            try:
                _, body = await _read_request(reader)
            except asyncio.IncompleteReadError:
                return
            n += 1
            await asyncio.sleep(0.3 if n == 1 and seen["connections"] == 1 else 0)
            writer.write(_reply(b'{"to": ' + body + b"}"))
            await writer.drain()

    async def main():
        server, port = await _serve(handler)
        client = Client(f"http://127.0.0.1:{port}/v1", None, 2.0, None)
        try:
            first = asyncio.ensure_future(client.post(b'"first"'))
            await asyncio.sleep(0.1)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            return await client.post(b'"second"')
        finally:
            await client.close()
            server.close()

    assert asyncio.run(main()) == b'{"to": "second"}'  # never the first request's late reply
    assert seen["connections"] == 2


def test_with_a_proxy_in_the_environment_the_calls_go_through_it(monkeypatch):
    seen = []

    async def proxy(reader, writer):  # a forward proxy that answers for the origin itself
        head, _ = await _read_request(reader)
        seen.append(head.split(b"\r\n")[0])
        writer.write(_reply(b'{"via": "proxy"}'))
        await writer.drain()

    async def main():
        server, port = await _serve(proxy)
        for name in ("no_proxy", "NO_PROXY", "http_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")
        client = Client("http://gpu-box.invalid:8000/v1", None, 2.0, None)
        try:
            return await client.post(b"{}")
        finally:
            await client.close()
            server.close()

    assert asyncio.run(main()) == b'{"via": "proxy"}'
    assert seen == [b"POST http://gpu-box.invalid:8000/v1/chat/completions HTTP/1.1"]


@pytest.fixture(scope="module")
def certificate(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 (made by the `openssl` command line): (its file, a
    server's TLS context that presents it)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.fail("the TLS tests make their certificate with the openssl command, which is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)
    return cert, server_tls


def test_an_https_endpoint_is_called_over_tls_and_an_untrusted_certificate_is_a_connection_error(certificate):
    """Hosted APIs are HTTPS: the request goes through the TLS handshake to the host the URL names,
    on one kept-alive connection; a certificate the client does not trust fails the call as a
    connection error (`certificate verify failed`), never an answer, and nothing is sent on it."""
    cert, server_tls = certificate
    seen: dict = {}

    async def main(trusted):
        server = await asyncio.start_server(_echoing(seen), "127.0.0.1", 0, ssl=server_tls)
        port = server.sockets[0].getsockname()[1]
        tls = ssl.create_default_context(cafile=str(cert)) if trusted else ssl.create_default_context()
        client = Client(f"https://127.0.0.1:{port}/v1", "sk-test", 5.0, tls)
        try:
            return [await client.post(json.dumps({"n": k}).encode()) for k in range(3)]
        except Exception as exc:  # noqa: BLE001 (the test reads which)
            return exc
        finally:
            await client.close()
            server.close()

    assert asyncio.run(main(trusted=True)) == [b'{"echo": {"n": %d}}' % k for k in range(3)]
    assert seen["connections"] == 1 and len(seen["bodies"]) == 3
    seen.clear()
    failed = asyncio.run(main(trusted=False))
    assert isinstance(failed, HttpConnectionError) and "certificate verify failed" in str(failed)
    assert "bodies" not in seen


def test_a_ledger_call_to_an_https_endpoint_trusts_the_ca_that_ssl_cert_file_names(certificate, tmp_path, monkeypatch):
    """A self-hosted server behind TLS with its own CA (a vLLM node, a gateway): `SSL_CERT_FILE`
    names the CA, as for `httpx` and the `openai` client; the models list and the call go over TLS
    and the answer is stored. Without it the call fails as a connection error, recorded as a failure."""
    from llm_calls import CallRequest, Ledger, ModelRegistry, transport
    from llm_calls.stub_server import StubServer
    from tests.conftest import stub_config, user
    from warehouse import Warehouse

    cert, server_tls = certificate

    def ask(folder, trust: bool):
        transport.tls_context.cache_clear()  # built once per process: here once per setting
        if trust:
            monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        else:
            monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        with StubServer(tls=server_tls) as stub:
            assert stub.base_url.startswith("https://")
            folder.mkdir()
            cfg = stub_config(stub, folder)
            wh = Warehouse(cfg.warehouse_path(), lock_timeout_s=30)
            with ModelRegistry(cfg) as registry:
                result = Ledger(wh, registry).complete("stub", [CallRequest(user("Say hi."))])[0]
            return result, wh.rows("SELECT status, error FROM llm.calls"), len(stub.requests)

    try:
        result, rows, sent = ask(tmp_path / "trusted", trust=True)
        assert result.ok and result.text and rows == [{"status": "ok", "error": None}] and sent == 1
        result, rows, sent = ask(tmp_path / "untrusted", trust=False)
        assert not result.ok and "certificate verify failed" in (result.error or "")
        assert rows and all(r["status"] == "failed" for r in rows) and sent == 0
    finally:
        transport.tls_context.cache_clear()
