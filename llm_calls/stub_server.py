"""A scriptable OpenAI-compatible server on loopback, for tests, benchmarks and dry runs.

It answers `POST /v1/chat/completions` after a fixed delay with a deterministic
reply, and `GET /v1/models`. Faults are scripted by a directive inside the last
message's content, so one batch can mix healthy and faulty calls:

    [[stub: status=429 times=2 retry_after=1]]  first 2 requests: HTTP 429 + Retry-After
    [[stub: status=500 times=1]]                first request: HTTP 500
    [[stub: status=308 location=URL]]           a redirect to URL (any status; the header is `Location`)
    [[stub: hang times=1]]                      first request: sleep `hang_s`, then answer
    [[stub: malformed]]                         200 with a body that is not JSON
    [[stub: empty_choices]]                     200 with "choices": []
    [[stub: length]]                            reply cut: finish_reason "length"
    [[stub: delay=0.3]]                         this request's delay
    [[stub: reasoning]]                         the reply's reasoning in a separate `reasoning_content`
                                                field (with `length`: cut inside it, content null)
    [[stub: empty_reasoning]]                   `reasoning_content: ""` (a reasoning parser found nothing)
    [[stub: cached=N]]                          N prompt tokens served from a prompt cache
                                                (`usage.prompt_tokens_details.cached_tokens`)

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
tests can assert what reached the server.

It also serves OpenAI's Files and Batches endpoints (`POST /v1/files`, `GET /v1/files/{id}/content`,
`POST /v1/batches`, `GET /v1/batches/{id}`): a batch's lines are answered as live requests are
(directives included), non-200 answers go to the error file, and `batch_expire_after=N` makes every
batch expire with only its first N lines done (the rest as `batch_expired` error lines, as OpenAI
writes them); a batch reports `in_progress` for its first `batch_polls` status checks. `run_batch`
writes an output file from an input file in vLLM's `run_batch` layout, as a cluster would.
Run standalone for a benchmark, or as a cluster's run_batch for a dry run:

    python -m llm_calls.stub_server --delay 0.5      # prints its base URL
    python -m llm_calls.stub_server --run-batch -i requests.jsonl -o results.jsonl
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import itertools
import json
import os
import re
import ssl
import threading
import time
import uuid
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
                 hidden_reasoning_tokens: int = 96, batch_expire_after: int | None = None, batch_polls: int = 1,
                 output_filter: Callable[[bytes], bytes] | None = None, tls: ssl.SSLContext | None = None):
        self.responder = responder
        # applied to every batch output and error file as it is written: raw Unicode line breaks, a
        # broken line, as a provider's files may have them
        self.output_filter = output_filter
        self.batch_expire_after = batch_expire_after
        self.batch_polls = batch_polls
        self.files: dict[str, bytes] = {}  # uploaded and written files by id
        self.batches: dict[str, dict[str, Any]] = {}  # created batches by id
        self._ids = itertools.count(1)
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
        # chat requests received whose reply has not started to go out. That window lies inside the
        # client's own (request sent to reply read), so the peak counts only overlaps the client had:
        # counted until the reply was written, a client that sends its next request as soon as it
        # has read a reply could be seen one over while this thread waits for the CPU.
        self.in_flight = 0
        self.peak_in_flight = 0  # the most there were at once
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", port), self._handler_class())
        self.tls = tls  # a server context: HTTPS, as hosted endpoints are (each handshake in the accepting thread)
        if tls is not None:
            self._httpd.socket = tls.wrap_socket(self._httpd.socket, server_side=True)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/v1"

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
        """A chat completion's reply to `body`: (status, headers, body, seconds to wait first), with
        the faults its directive, `fail_share` or `hosted_reasoning` script."""
        messages = body.get("messages") or [{"content": ""}]
        content = str(messages[-1].get("content", ""))
        directive = parse_directive(content)
        ident = json.dumps([messages, body.get("seed")], sort_keys=True)
        with self._lock:
            self._seen[ident] += 1
            nth = self._seen[ident]
        delay = float(directive["delay"]) if directive.get("delay") else self.delay_s
        fault = self._fault(body, messages, directive, nth)
        if fault is not None:
            return (*fault, delay)
        if "hang" in directive and nth <= int(directive.get("times") or 10**9):
            delay = self.hang_s
        if "malformed" in directive:
            return 200, {"Content-Type": "application/json"}, b'{"id": "x", "choices": [', delay
        payload = self._completion(body, content, directive, nth)
        return 200, {"Content-Type": "application/json"}, json.dumps(payload).encode(), delay

    def _fault(self, body: dict[str, Any], messages: list[Any], directive: dict[str, str], nth: int
               ) -> tuple[int, dict[str, str], bytes] | None:
        """The error reply scripted for this request (`fail_share`, `hosted_reasoning`'s refusals, a
        `status=` directive for its first `times` requests), or None."""
        json_type = {"Content-Type": "application/json"}
        if self.fail_share and int(hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:8], 16) \
                < self.fail_share * 0xFFFFFFFF:
            err = {"error": {"message": "stub fault: this prompt always fails", "type": "stub"}}
            return 400, json_type, json.dumps(err).encode()
        if self.hosted_reasoning:
            refusal = _reasoning_model_refusal(body)
            if refusal is not None:
                return 400, json_type, json.dumps(refusal).encode()
        if "status" in directive and nth <= int(directive.get("times") or 10**9):
            headers = dict(json_type)
            if "retry_after" in directive:
                headers["Retry-After"] = directive["retry_after"]
            if "location" in directive:
                headers["Location"] = directive["location"]
            err = {"error": {"message": f"stub fault {directive['status']}", "type": "stub"}}
            return int(directive["status"]), headers, json.dumps(err).encode()
        return None

    def _completion(self, body: dict[str, Any], content: str, directive: dict[str, str], nth: int) -> dict[str, Any]:
        """The chat completion answering `content`: the responder's reply or the default one, cut,
        with reasoning or with no choices as the directive says, and its usage."""
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
        if directive.get("cached"):
            payload["usage"]["prompt_tokens_details"] = {"cached_tokens": int(directive["cached"])}
        if self.hosted_reasoning:  # thought, counted, not shown
            hidden = self.hidden_reasoning_tokens
            payload["usage"]["completion_tokens"] += hidden
            payload["usage"]["total_tokens"] += hidden
            payload["usage"]["completion_tokens_details"] = {"reasoning_tokens": hidden}
        return payload

    # -- Files and Batches ------------------------------------------------------------

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def _upload(self, content_type: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        """`POST /files`, multipart: the `file` part is stored under a new id."""
        message = email.parser.BytesParser().parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
        parts = {p.get_param("name", header="content-disposition"): p for p in message.walk() if not p.is_multipart()}
        if "file" not in parts:
            return 400, {"error": {"message": "no file part", "type": "invalid_request_error"}}
        data = parts["file"].get_payload(decode=True) or b""
        fid = self._new_id("file")
        with self._lock:
            self.files[fid] = data
        purpose = parts["purpose"].get_payload(decode=True).decode() if "purpose" in parts else None
        return 200, {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                     "filename": parts["file"].get_filename(), "purpose": purpose, "status": "processed"}

    def _create_batch(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        file_id = body.get("input_file_id")
        if file_id not in self.files:
            return 404, {"error": {"message": f"No such File object: {file_id}", "type": "invalid_request_error"}}
        batch = {"id": self._new_id("batch"), "object": "batch", "endpoint": body.get("endpoint"),
                 "input_file_id": file_id, "completion_window": body.get("completion_window"),
                 "status": "validating", "output_file_id": None, "error_file_id": None,
                 "created_at": int(time.time()), "metadata": body.get("metadata"), "errors": None,
                 "request_counts": {"total": 0, "completed": 0, "failed": 0}, "_polls": 0}
        with self._lock:
            self.batches[batch["id"]] = batch
        return 200, _public(batch)

    def _retrieve_batch(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        batch = self.batches.get(batch_id)
        if batch is None:
            return 404, {"error": {"message": f"No such batch: {batch_id}", "type": "invalid_request_error"}}
        with self._lock:
            batch["_polls"] += 1
            run = batch["status"] in ("validating", "in_progress") and batch["_polls"] > self.batch_polls
            if batch["status"] == "validating":
                batch["status"] = "in_progress"
        if run:
            self._finish_batch(batch)
        return 200, _public(batch)

    def _finish_batch(self, batch: dict[str, Any]) -> None:
        """Answer the batch's lines; write its output and error files."""
        lines = [json.loads(x) for x in self.files[batch["input_file_id"]].decode().splitlines() if x.strip()]
        out, errors = answer_lines(self, lines, self.batch_expire_after)
        with self._lock:
            for name, rows in (("output_file_id", out), ("error_file_id", errors)):
                if rows:
                    fid = self._new_id("file")
                    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
                    self.files[fid] = self.output_filter(data) if self.output_filter else data
                    batch[name] = fid
            expired = self.batch_expire_after is not None and self.batch_expire_after < len(lines)
            batch["status"] = "expired" if expired else "completed"
            batch["request_counts"] = {"total": len(lines), "completed": len(out), "failed": len(errors)}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class of this server (`_Handler`, its `stub` this object)."""
        return type("Handler", (_Handler,), {"stub": self})


class _Handler(BaseHTTPRequestHandler):
    """One request to a `StubServer` (`stub`, set by `StubServer._handler_class`)."""

    stub: StubServer
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
        if not self.stub.echo_key_401:
            return False
        key = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
        body = {"error": {"message": f"Incorrect API key provided: {key}. You can find your API key at "
                                     "your provider's dashboard.", "type": "invalid_request_error"}}
        self._send(401, {"Content-Type": "application/json"}, json.dumps(body).encode())
        return True

    def do_GET(self) -> None:
        with self.stub._lock:
            self.stub.get_requests.append({"path": self.path, "authorization": self.headers.get("Authorization")})
        if self._reject_echoing_key():
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        batch = re.search(r"/batches/([\w-]+)$", path)
        content = re.search(r"/files/([\w-]+)/content$", path)
        if path.endswith("/batches"):  # newest first, as OpenAI lists them
            listed = [_public(b) for b in reversed(list(self.stub.batches.values()))]
            data = json.dumps({"object": "list", "data": listed, "has_more": False}).encode()
            self._send(200, {"Content-Type": "application/json"}, data)
        elif path.endswith("/models"):
            data = json.dumps({"object": "list", "data": [{"id": self.stub.model, "object": "model"}]}).encode()
            self._send(200, {"Content-Type": "application/json"}, data)
        elif batch:
            status, body = self.stub._retrieve_batch(batch.group(1))
            self._send(status, {"Content-Type": "application/json"}, json.dumps(body).encode())
        elif content and content.group(1) in self.stub.files:
            self._send(200, {"Content-Type": "application/octet-stream"}, self.stub.files[content.group(1)])
        else:
            self._send(404, {"Content-Type": "application/json"}, b'{"error": "not found"}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/files"):
            status, reply = self.stub._upload(self.headers.get("Content-Type") or "", raw)
            self._send(status, {"Content-Type": "application/json"}, json.dumps(reply).encode())
            return
        if path.endswith("/batches"):
            status, reply = self.stub._create_batch(json.loads(raw or b"{}"))
            self._send(status, {"Content-Type": "application/json"}, json.dumps(reply).encode())
            return
        try:
            body = json.loads(raw)
        except json.JSONDecodeError:
            self._send(400, {"Content-Type": "application/json"}, b'{"error": "bad json"}')
            return
        record = {"path": self.path, "body": body, "time": time.time(), "answered": None,
                  "authorization": self.headers.get("Authorization")}
        with self.stub._lock:
            self.stub.requests.append(record)
            self.stub.in_flight += 1
            self.stub.peak_in_flight = max(self.stub.peak_in_flight, self.stub.in_flight)
        replying = False
        try:
            if self._reject_echoing_key():
                return
            status, headers, data, delay = self.stub._respond(body)
            if delay:
                time.sleep(delay)
            with self.stub._lock:  # before the reply goes: see `in_flight`
                self.stub.in_flight -= 1
                replying = True
            try:
                self._send(status, headers, data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout test)
        finally:
            with self.stub._lock:
                if not replying:
                    self.stub.in_flight -= 1
                record["answered"] = time.time()  # when the reply was sent (or the client gone)


def _public(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in batch.items() if not k.startswith("_")}


def answer_lines(stub: StubServer, lines: list[dict[str, Any]], expire_after: int | None = None
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A batch's output and error lines, each request answered by `stub` as it answers a live one
    (no delay): 200 to the output file, anything else to the error file; with `expire_after`, the
    lines past the first N as OpenAI writes requests a batch expired before."""
    out, errors = [], []
    for n, line in enumerate(lines):
        if expire_after is not None and n >= expire_after:
            errors.append({"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": line["custom_id"], "response": None,
                           "error": {"code": "batch_expired",
                                     "message": "This request could not be executed before the completion window expired."}})
            continue
        status, _, data, _ = stub._respond(line["body"])
        try:
            body = json.loads(data)
        except json.JSONDecodeError:
            body = {"error": {"message": "stub: the answer was not JSON", "type": "stub"}}
            status = 500
        row = {"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": line["custom_id"],
               "response": {"status_code": status, "request_id": f"req_{uuid.uuid4().hex[:16]}", "body": body},
               "error": None}
        (out if status == 200 else errors).append(row)
    return out, errors


def run_batch(input_path: str, output_path: str, stub: StubServer | None = None) -> int:
    """What vLLM's `run_batch` does, answered by the stub: every line of the input file gets one line
    in the output file, in vLLM's layout (`id`, `custom_id`, `response` with `status_code`,
    `request_id` and `body`; a failed request has status 400, no body and its `error` as text)."""
    stub = stub or StubServer()
    lines = [json.loads(x) for x in open(input_path, encoding="utf-8") if x.strip()]
    os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
    with open(output_path, "w", encoding="utf-8") as f:
        for line in lines:
            status, _, data, _ = stub._respond(line["body"])
            if status == 200:
                row = {"id": f"vllm-{uuid.uuid4().hex}", "custom_id": line["custom_id"], "error": None,
                       "response": {"status_code": 200, "request_id": f"vllm-batch-{uuid.uuid4().hex}",
                                    "body": json.loads(data)}}
            else:
                row = {"id": f"vllm-{uuid.uuid4().hex}", "custom_id": line["custom_id"],
                       "response": {"status_code": 400, "request_id": f"vllm-batch-{uuid.uuid4().hex}", "body": None},
                       "error": f"stub HTTP {status}: {data.decode(errors='replace')[:200]}"}
            f.write(json.dumps(row) + "\n")
    return len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--run-batch", action="store_true", help="answer a batch input file (-i) into an output file "
                                                                 "(-o) in vLLM's run_batch layout, then exit")
    parser.add_argument("-i", "--input-file")
    parser.add_argument("-o", "--output-file")
    args = parser.parse_args()
    if args.run_batch:
        if not (args.input_file and args.output_file):
            parser.error("--run-batch needs -i INPUT and -o OUTPUT")
        print(f"{run_batch(args.input_file, args.output_file)} requests answered into {args.output_file}")
        return
    server = StubServer(delay_s=args.delay, port=args.port)
    print(server.base_url, flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
