"""Runs llama-cpp-python's OpenAI-compatible server, exiting if the process that started it dies.

`python -m llm_calls.serve_embedded --parent-pid PID <llama_cpp.server arguments>`

A watchdog thread polls the parent's pid; when the parent is gone (SIGKILLed,
say) the server exits instead of lingering on its port. (Linux's
PR_SET_PDEATHSIG is no substitute: it fires when the *thread* that forked the
child exits, and the ledger starts servers from short-lived worker threads.)
"""

from __future__ import annotations

import os
import runpy
import sys
import threading
import time


def _watch(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(0.5)


def main() -> None:
    args = sys.argv[1:]
    if len(args) < 2 or args[0] != "--parent-pid":
        raise SystemExit("usage: python -m llm_calls.serve_embedded --parent-pid PID [server args]")
    threading.Thread(target=_watch, args=(int(args[1]),), daemon=True).start()
    sys.argv = ["llama_cpp.server", *args[2:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
