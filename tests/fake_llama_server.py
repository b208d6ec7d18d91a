"""A stand-in for the embedded server process that dies the way a llama.cpp built for another CPU
does: it starts, lists its model, and is killed by SIGILL on its first completion (what
`tileloadd` does on a VM that forbids AMX). Run as `EmbeddedServer.server_module` by the tests,
with the same arguments as `llm_calls.serve_embedded`.

FAKE_LLAMA_STARTS, if set, names a file that gets one line per start. FAKE_LLAMA_ANSWERS makes it a
server that works instead, one request at a time (a single-threaded HTTP server, as llama.cpp's is);
a request holding "[[busy]]" then keeps it busy FAKE_LLAMA_BUSY_S seconds (default 20).
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from llm_calls.serve_embedded import exit_when_unused, wrapper_args


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        data = json.dumps({"object": "list", "data": [{"id": "smollm2-135m-instruct"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        if os.environ.get("FAKE_LLAMA_ANSWERS"):  # a server that works, one request at a time
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if "[[busy]]" in json.dumps(body):
                time.sleep(float(os.environ.get("FAKE_LLAMA_BUSY_S", "20")))  # a long generation
            data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "smollm2-135m-instruct",
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": "OK"},
                                            "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        print("llama_context: graph_compute: running the first matrix product", flush=True)
        os.kill(os.getpid(), signal.SIGILL)


def main() -> None:
    users_lock, log, args = wrapper_args(sys.argv[1:])
    port = int(args[args.index("--port") + 1])
    faulthandler.enable()  # as llm_calls.serve_embedded does
    threading.Thread(target=exit_when_unused, args=(users_lock, log), daemon=True).start()
    if os.environ.get("FAKE_LLAMA_STARTS"):
        with open(os.environ["FAKE_LLAMA_STARTS"], "a") as f:
            f.write(f"{os.getpid()}\n")
    print("llama_model_loader: loaded meta data with 33 key-value pairs", flush=True)
    HTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
