"""A quality check's result, as the layer that computes it states it: a name, passed or not, and
the evidence. `assets/` turns each into a Dagster asset-check result (`assets.metadata.check_results`);
nothing here knows Dagster."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    metadata: dict[str, Any] = field(default_factory=dict)  # numbers and strings as they are; lists as JSON
    description: str = ""
    warn: bool = False  # a failure is a warning, not an error
