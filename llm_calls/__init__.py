"""Model access: the call ledger over OpenAI-compatible endpoints and the embedded model.

Everything that talks to a model goes through `Ledger` (`llm_calls/ledger.py`): `complete` and
`samples` for a batch of calls, `run_flows` with a `Session` for per-item flows. The names below are
the engine's public surface, what assets, generators and evaluations use; the modules behind them
(`records`, `transport`, `flows`, `batch`, `slots`) are its implementation. The names are imported
on first use (PEP 562), so that a submodule without the `openai` client (`llm_calls.totals`) can be
imported without it.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {  # each public name -> the submodule that defines it
    # making calls: one batch (`Ledger.complete`), or per-item flows in a `Session`
    "Ledger": "ledger", "Session": "flows",
    "CallRequest": "records", "CallResult": "records", "call_key": "records", "probe_request": "records",
    "reply_with_reasoning": "records",
    # the models: endpoints, their identity (the cache key's), sampling defaults and prompting
    "Endpoint": "endpoints", "ModelRegistry": "endpoints", "endpoint_host": "endpoints", "redact": "endpoints",
    "model_identity": "endpoints", "default_sampling": "endpoints", "model_messages": "endpoints",
    "EmbeddedServer": "embedded", "EmbeddedModelError": "embedded", "embedded_model_path": "embedded",
    "usable_cores": "embedded",
    # an endpoint's served models (the models probe), and the errors of a request that got no reply
    "served_ids": "http_client", "HttpError": "http_client",
    # batch mode, for the run command: files written, read back, and what waits on them
    "EXPORT_ENV": "batch", "LIVE_PURPOSES": "batch", "Waiting": "batch", "BatchImportError": "batch",
    "exported": "batch", "round_files": "batch", "import_file": "batch",
    # the calls this process counted (the run command's progress and summary)
    "TOTALS": "totals", "calls_cpu": "totals",
}
__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'llm_calls' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"llm_calls.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
