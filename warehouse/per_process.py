"""State a process keeps for itself (attached DuckDB instances, an endpoint's slots, the call loop):
one object per kind, emptied in a forked child, which must not use what its parent opened."""

from __future__ import annotations

import os
import threading
from typing import Any


class PerProcess(dict[Any, Any]):
    """A dict of this process's state, with the lock that guards it. Call `here()` under the lock
    before use: in a forked child it first forgets what the parent held."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.pid = os.getpid()

    def here(self) -> PerProcess:
        if os.getpid() != self.pid:
            self.clear()
            self.pid = os.getpid()
        return self
