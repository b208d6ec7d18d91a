"""Runs llama-cpp-python's OpenAI-compatible server while anyone still needs it.

`python -m llm_calls.serve_embedded --users-lock PATH [--log LOG] <llama_cpp.server arguments>`

Every process that uses the server holds a shared lock on PATH (see
llm_calls.embedded). A watchdog thread tries for an exclusive lock every half
second; once it gets one, nobody needs the server any more (the users left, or
were SIGKILLed: the kernel drops a dead process's locks) and it exits instead of
lingering on its port, removing LOG (its own output: a server that ends this way
ended well; one that crashed never gets here, and its log stays where the error
that reported the crash said it is).
"""

from __future__ import annotations

import contextlib
import faulthandler
import fcntl
import os
import runpy
import sys
import threading
import time


def exit_when_unused(users_lock: str, log: str | None = None) -> None:
    """Exit this process once no process holds a lock on `users_lock` (checked every half second),
    removing `log` first."""
    fd = os.open(users_lock, os.O_RDWR | os.O_CREAT, 0o644)
    time.sleep(1.0)  # the user that started us takes its shared lock before we look
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            time.sleep(0.5)
            continue
        if log:
            with contextlib.suppress(OSError):
                os.unlink(log)
        os._exit(0)


def wrapper_args(argv: list[str]) -> tuple[str, str | None, list[str]]:
    """(users lock, log or None, the server's own arguments) from `--users-lock PATH [--log LOG] ...`."""
    if len(argv) < 2 or argv[0] != "--users-lock":
        raise SystemExit("usage: python -m llm_calls.serve_embedded --users-lock PATH [--log LOG] [server args]")
    if argv[2:3] == ["--log"] and len(argv) > 3:
        return argv[1], argv[3], argv[4:]
    return argv[1], None, argv[2:]


def main() -> None:
    users_lock, log, server_args = wrapper_args(sys.argv[1:])
    # a crash in llama.cpp (SIGILL, SIGSEGV, ...) is written to the log before the process dies of it, so
    # a process that joined this server and cannot see its exit status still reads what happened
    faulthandler.enable()
    threading.Thread(target=exit_when_unused, args=(users_lock, log), daemon=True).start()
    sys.argv = ["llama_cpp.server", *server_args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
