"""Runs llama-cpp-python's OpenAI-compatible server while anyone still needs it.

`python -m llm_calls.serve_embedded --users-lock PATH <llama_cpp.server arguments>`

Every process that uses the server holds a shared lock on PATH (see
llm_calls.embedded). A watchdog thread tries for an exclusive lock every half
second; once it gets one, nobody needs the server any more (the users left, or
were SIGKILLed: the kernel drops a dead process's locks) and it exits instead of
lingering on its port.
"""

from __future__ import annotations

import faulthandler
import fcntl
import os
import runpy
import sys
import threading
import time


def exit_when_unused(users_lock: str) -> None:
    """Exit this process once no process holds a lock on `users_lock` (checked every half second)."""
    fd = os.open(users_lock, os.O_RDWR | os.O_CREAT, 0o644)
    time.sleep(1.0)  # the user that started us takes its shared lock before we look
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            time.sleep(0.5)
            continue
        os._exit(0)


def main() -> None:
    args = sys.argv[1:]
    if len(args) < 2 or args[0] != "--users-lock":
        raise SystemExit("usage: python -m llm_calls.serve_embedded --users-lock PATH [server args]")
    # a crash in llama.cpp (SIGILL, SIGSEGV, ...) is written to the log before the process dies of it, so
    # a process that joined this server and cannot see its exit status still reads what happened
    faulthandler.enable()
    threading.Thread(target=exit_when_unused, args=(args[1],), daemon=True).start()
    sys.argv = ["llama_cpp.server", *args[2:]]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
