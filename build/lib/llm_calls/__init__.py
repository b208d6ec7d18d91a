"""Model access: the call ledger over OpenAI-compatible endpoints and the embedded model.

Everything that talks to a model goes through `Ledger`; see `llm.ledger`.
"""

from llm_calls.embedded import EmbeddedModelError, EmbeddedServer, embedded_model_path
from llm_calls.endpoints import Endpoint, ModelRegistry, endpoint_host, redact
from llm_calls.ledger import CallRequest, CallResult, Ledger, call_key, reply_with_reasoning

__all__ = [
    "CallRequest", "CallResult", "Ledger", "call_key", "reply_with_reasoning",
    "Endpoint", "ModelRegistry", "endpoint_host", "redact",
    "EmbeddedServer", "EmbeddedModelError", "embedded_model_path",
]
