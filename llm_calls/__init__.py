"""Model access: the call ledger over OpenAI-compatible endpoints and the embedded model.

Everything that talks to a model goes through `Ledger`; see `llm.ledger`. The names below are
imported on first use (PEP 562), so that a submodule without the `openai` client
(`llm_calls.totals`) can be imported without it.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {  # each public name -> the submodule that defines it
    "CallRequest": "ledger", "CallResult": "ledger", "Ledger": "ledger", "call_key": "ledger",
    "reply_with_reasoning": "ledger",
    "Endpoint": "endpoints", "ModelRegistry": "endpoints", "endpoint_host": "endpoints", "redact": "endpoints",
    "EmbeddedServer": "embedded", "EmbeddedModelError": "embedded", "embedded_model_path": "embedded",
}
__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'llm_calls' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"llm_calls.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
