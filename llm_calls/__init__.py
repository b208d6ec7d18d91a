"""Model access: the call ledger over OpenAI-compatible endpoints and the embedded model.

Everything that talks to a model goes through `Ledger`; see `llm.ledger`. The names below are
imported on first use (PEP 562), so that a submodule without the `openai` client
(`llm_calls.totals`) can be imported without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_WHERE = {
    "CallRequest": "ledger", "CallResult": "ledger", "Ledger": "ledger", "call_key": "ledger",
    "reply_with_reasoning": "ledger",
    "Endpoint": "endpoints", "ModelRegistry": "endpoints", "endpoint_host": "endpoints", "redact": "endpoints",
    "EmbeddedServer": "embedded", "EmbeddedModelError": "embedded", "embedded_model_path": "embedded",
}
__all__ = [
    "CallRequest", "CallResult", "Ledger", "call_key", "reply_with_reasoning",
    "Endpoint", "ModelRegistry", "endpoint_host", "redact",
    "EmbeddedServer", "EmbeddedModelError", "embedded_model_path",
]

if TYPE_CHECKING:
    from llm_calls.embedded import EmbeddedModelError, EmbeddedServer, embedded_model_path
    from llm_calls.endpoints import Endpoint, ModelRegistry, endpoint_host, redact
    from llm_calls.ledger import CallRequest, CallResult, Ledger, call_key, reply_with_reasoning




def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'llm_calls' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"llm_calls.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
