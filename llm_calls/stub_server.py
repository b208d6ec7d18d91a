"""A scriptable OpenAI-compatible server on loopback, for tests, benchmarks and dry runs.

It answers `POST /v1/chat/completions` after a fixed delay with a deterministic
reply, and `GET /v1/models`. Faults are scripted by a directive inside the last
message's content, so one batch can mix healthy and faulty calls:

    [[stub: status=429 times=2 retry_after=1]]  first 2 requests: HTTP 429 + Retry-After
    [[stub: status=500 times=1]]                first request: HTTP 500
    [[stub: hang times=1]]                      first request: sleep `hang_s`, then answer
    [[stub: malformed]]                         200 with a body that is not JSON
    [[stub: empty_choices]]                     200 with "choices": []
    [[stub: length]]                            reply cut: finish_reason "length"
    [[stub: delay=0.3]]                         this request's delay
    [[stub: reasoning]]                         the reply's reasoning in a separate `reasoning_content`
                                                field (with `length`: cut inside it, content null)
    [[stub: empty_reasoning]]                   `reasoning_content: ""` (a reasoning parser found nothing)

`fail_share` (0-1) makes a fixed share of distinct prompts fail with HTTP 400 on every
request (chosen by a hash of the messages, so a rerun fails the same ones): a model
endpoint that fails part of its calls, for fault runs.

`hosted_reasoning=True` makes it answer as OpenAI's reasoning models (o-series, gpt-5) do:
`max_tokens` is refused (HTTP 400, `unsupported_parameter`: use `max_completion_tokens`), so is
any `temperature` or `top_p` but 1 (`unsupported_value`), with the API's own error bodies; a reply
carries no reasoning text but counts `hidden_reasoning_tokens` in
`usage.completion_tokens_details.reasoning_tokens` (and in `completion_tokens`).

`times` counts requests with identical messages and seed. A test that needs
controlled replies passes `responder(body) -> str | None`; None falls back to
the default reply. Every request is
logged (`requests`) with its body and whether an Authorization header came, so
tests can assert what reached the server. Run standalone for a benchmark:

    python -m llm_calls.stub_server --delay 0.5      # prints its base URL
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_DIRECTIVE = re.compile(r"\[\[stub:([^\]]*)\]\]")


def parse_directive(content: str) -> dict[str, str]:
    """`[[stub: status=500 times=2 hang]]` -> {'status': '500', 'times': '2', 'hang': ''}."""
    m = _DIRECTIVE.search(content)
    if not m:
        return {}
    out: dict[str, str] = {}
    for token in m.group(1).split():
        name, _, value = token.partition("=")
        out[name] = value
    return out


def _reasoning_model_refusal(body: dict[str, Any]) -> dict[str, Any] | None:
    """The error body OpenAI's API returns to a reasoning model's request that it refuses, or None."""
    if "max_tokens" in body:
        return {"error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                       "Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error", "param": "max_tokens", "code": "unsupported_parameter"}}
    for name in ("temperature", "top_p"):
        if name in body and body[name] != 1:
            return {"error": {
                "message": f"Unsupported value: '{name}' does not support {body[name]} with this model. "
                           "Only the default (1) value is supported.",
                "type": "invalid_request_error", "param": name, "code": "unsupported_value"}}
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the default backlog of 5 resets connections at high concurrency


class StubServer:
    """Threaded stub server. `start()` in a background thread; `stop()` to shut down."""

    def __init__(self, delay_s: float = 0.0, hang_s: float = 5.0, model: str = "stub-model", port: int = 0,
                 responder: Callable[[dict[str, Any]], str | None] | None = None, fail_share: float = 0.0,
                 echo_key_401: bool = False, cut_every_reply: bool = False, hosted_reasoning: bool = False,
                 hidden_reasoning_tokens: int = 96):
        self.responder = responder
        self.hosted_reasoning = hosted_reasoning
        self.hidden_reasoning_tokens = hidden_reasoning_tokens
        self.echo_key_401 = echo_key_401  # reject every request with 401, quoting the key it was sent
        self.cut_every_reply = cut_every_reply  # every reply ends with finish_reason "length"
        self.fail_share = fail_share
        self.delay_s = delay_s
        self.hang_s = hang_s
        self.model = model
        self.requests: list[dict[str, Any]] = []  # chat completions
        self.get_requests: list[dict[str, Any]] = []  # GET /models and others
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", port), self._handler_class())
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> StubServer:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def contents(self) -> list[str]:
        """Last-message content of every chat request received, in arrival order."""
        with self._lock:
            return [r["body"]["messages"][-1]["content"] for r in self.requests if r["path"].endswith("/chat/completions")]

    # -- request handling ----------------------------------------------------------

    def _respond(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes, float]:
        messages = body.get("messages") or [{"content": ""}]
        content = str(messages[-1].get("content", ""))
        directive = parse_directive(content)
        ident = json.dumps([messages, body.get("seed")], sort_keys=True)
        with self._lock:
            self._seen[ident] += 1
            nth = self._seen[ident]
        delay = float(directive["delay"]) if directive.get("delay") else self.delay_s
        if self.fail_share and int(hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:8], 16) \
                < self.fail_share * 0xFFFFFFFF:
            err = {"error": {"message": "stub fault: this prompt always fails", "type": "stub"}}
            return 400, {"Content-Type": "application/json"}, json.dumps(err).encode(), delay
        if self.hosted_reasoning:
            refusal = _reasoning_model_refusal(body)
            if refusal is not None:
                return 400, {"Content-Type": "application/json"}, json.dumps(refusal).encode(), delay
        times = int(directive.get("times") or 10**9)
        active = nth <= times
        if "status" in directive and active:
            headers = {"Content-Type": "application/json"}
            if "retry_after" in directive:
                headers["Retry-After"] = directive["retry_after"]
            err = {"error": {"message": f"stub fault {directive['status']}", "type": "stub"}}
            return int(directive["status"]), headers, json.dumps(err).encode(), delay
        if "hang" in directive and active:
            delay = self.hang_s
        if "malformed" in directive:
            return 200, {"Content-Type": "application/json"}, b'{"id": "x", "choices": [', delay
        words = content.split()
        scripted = self.responder(body) if self.responder else None
        reply = scripted if scripted is not None else (
            f"reply to: {content} (seed {body.get('seed')}, temperature {body.get('temperature')})")
        finish = "stop"
        message: dict[str, Any] = {"role": "assistant", "content": reply}
        if "length" in directive or self.cut_every_reply:
            message["content"], finish = reply[:20], "length"
        if "reasoning" in directive:
            message["reasoning_content"] = "Let me think step by step about this."
            if finish == "length":
                message["content"] = None
        if "empty_reasoning" in directive:
            message["reasoning_content"] = ""
        payload = {
            "id": f"stub-{nth}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.model),
            "choices": [] if "empty_choices" in directive else [
                {"index": 0, "message": message, "finish_reason": finish}
            ],
            "usage": {"prompt_tokens": len(words), "completion_tokens": len(reply.split()),
                      "total_tokens": len(words) + len(reply.split())},
        }
        if "reasoning" in directive:
            payload["usage"]["completion_tokens_details"] = {"reasoning_tokens": 8}
        if self.hosted_reasoning:  # thought, counted, not shown
            hidden = self.hidden_reasoning_tokens
            payload["usage"]["completion_tokens"] += hidden
            payload["usage"]["total_tokens"] += hidden
            payload["usage"]["completion_tokens_details"] = {"reasoning_tokens": hidden}
        return 200, {"Content-Type": "application/json"}, json.dumps(payload).encode(), delay

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out in two writes; with Nagle's algorithm the body then waits for
            # the client's delayed ACK (40 ms on Linux), which no real model server adds
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _reject_echoing_key(self) -> bool:
                if not stub.echo_key_401:
                    return False
                key = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
                body = {"error": {"message": f"Incorrect API key provided: {key}. You can find your API key at "
                                             "your provider's dashboard.", "type": "invalid_request_error"}}
                self._send(401, {"Content-Type": "application/json"}, json.dumps(body).encode())
                return True

            def do_GET(self) -> None:
                with stub._lock:
                    stub.get_requests.append({"path": self.path, "authorization": self.headers.get("Authorization")})
                if self._reject_echoing_key():
                    return
                if self.path.rstrip("/").endswith("/models"):
                    data = json.dumps({"object": "list", "data": [{"id": stub.model, "object": "model"}]}).encode()
                    self._send(200, {"Content-Type": "application/json"}, data)
                else:
                    self._send(404, {"Content-Type": "application/json"}, b'{"error": "not found"}')

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    self._send(400, {"Content-Type": "application/json"}, b'{"error": "bad json"}')
                    return
                with stub._lock:
                    stub.requests.append({
                        "path": self.path, "body": body, "time": time.time(),
                        "authorization": self.headers.get("Authorization"),
                    })
                if self._reject_echoing_key():
                    return
                status, headers, data, delay = stub._respond(body)
                if delay:
                    time.sleep(delay)
                try:
                    self._send(status, headers, data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

        return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = StubServer(delay_s=args.delay, port=args.port)
    print(server.base_url, flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
