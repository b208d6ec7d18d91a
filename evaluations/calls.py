"""The calls a protocol declares: what `--plan` counts before a run, each family's from its `Protocol`.

Each family's protocol module (`evaluations/<key>.py`) exports `PROTOCOL = Protocol(...)`, the part
the registry names (`configuration/families.py`). Its `planned_calls(cfg, query) -> list[Line]` gives,
per step (the ledger `purpose`), model and partition, how many requests the run makes, and
whether that count is `exact`, `at most` or `at least` (`reporting/plan.py` explains the kinds).
`query(sql)` reads the warehouse (no rows when there is none): item counts come from it when the
stored items are this configuration's, else from the configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from configuration.families import Family, load

if TYPE_CHECKING:
    from configuration import Config

EXACT, AT_MOST, AT_LEAST = "exact", "at most", "at least"

Query = Callable[[str], list[dict]]  # SQL -> rows (empty without a warehouse)


@dataclass(frozen=True)
class Line:
    family: str
    model: str
    step: str  # the ledger purpose of these calls
    calls: int
    kind: str = EXACT
    source: str = "configuration"  # where the item counts came from
    partition: str | None = None  # the dataset or level (None: the family's one item set, or none)
    for_model: str | None = None  # the evaluated model whose slice makes these calls (None: items, probe)

    @property
    def purpose(self) -> str:
        """The ledger purpose of these calls: the step without a note in parentheses, as one step
        counted exactly and as a bound is named ("ib.multi_turn (later turns)")."""
        return self.step.split(" (")[0]


@dataclass(frozen=True)
class Counts:
    """Item counts per partition, and where they came from."""

    by_partition: dict[str, dict[str, int]]
    source: dict[str, str]


def stored_or_configured(stored: dict[str, int] | None, wanted: dict[str, int], *compare: str
                          ) -> tuple[dict[str, int], str]:
    """The stored counts when they are the configured run's (the same count, in the columns
    `compare`), else the configured ones: items another scale or configuration built are not the
    items this run will ask."""
    if not stored:
        return dict(wanted), "configuration"
    if all(stored.get(c) == wanted[c] for c in compare if c in wanted):
        return dict(stored), "warehouse"
    held = ", ".join(f"{stored.get(c, 0)} {c}" for c in compare if c in wanted)
    return dict(wanted), f"configuration (warehouse holds {held}: another scale or configuration)"


@dataclass(frozen=True)
class Protocol:
    """What the cross-family code (the plan, its cost, the summary) takes from a family's protocol."""

    planned_calls: Callable[[Config, Query], list[Line]]  # per step, model and partition: the calls the run makes
    # (model, purpose, request) of each request whose text the stored items fix, for the plan's token
    # count; None: the plan counts tokens only from the step's stored requests
    planned_requests: Callable[[Config, Query], Iterable[tuple[str, str, Any]]] | None = None
    # the longest chain of dependent calls one item's flow makes (`llm_calls/flows.py`), for a protocol
    # run as per-item flows; None: its steps run one batch after another
    flow_depth: int | None = None
    # what the demo scale leaves out of the configuration, one line each; None: it builds all it has
    left_out_at_demo: Callable[[Config], list[str]] | None = None


def protocol_of(family: Family) -> Protocol:
    """A family's protocol part, checked to be one."""
    protocol = load(family.parts.protocol)
    if not isinstance(protocol, Protocol):
        raise TypeError(f"{family.key}: {family.parts.protocol} is a {type(protocol).__name__}, not a Protocol")
    return protocol
