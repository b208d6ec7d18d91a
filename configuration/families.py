"""The benchmark families, each described once: every place that spans families loops over `FAMILIES`.

A family is one `Family` record below: its names, its configuration section, and `parts`, where each
of its parts lives ("module:attribute", as a Python entry point names an object). Each part is an
object of its layer's contract type, whose fields say what the cross-family code reads:

| part | the object | its type, defined in |
| --- | --- | --- |
| `config` | its section's model, under `<key>:` in the file | `configuration.base.Section` |
| `warehouse` | its tables, views, docs, item keys, headline, mechanisms, samples, units, ... | `warehouse.parts.WarehouseParts` |
| `protocol` | the calls its evaluation makes, for the plan; its requests; what the demo leaves out | `evaluations.calls.Protocol` |
| `assets` | `build_assets(cfg)`: its Dagster assets and checks | a function (`assets/<key>.py`) |
| `panel` | `panel(wh, model, writer)`: its part of a model's report | a function (`reporting.panels`) |
| `release` | its release's texts and tables; None: the family is never released | `releases.Release` |
| `ahead` | items built ahead, in a worker process, while the run's earlier steps run | `generators.ahead.ItemsAhead` |

Optional parts are `None` (a field of the part, or `release`), never looked for. Each layer loads the
parts it reads with `load(ref)` and checks their type (`warehouse.parts.of`, `evaluations.calls.protocol_of`,
`releases.spec`, `generators.ahead.ahead_of`), so a wrong or missing part fails naming the family and the reference.
Adding a fifth family means its modules and one `Family(...)` entry below (with the import of its
section); `tests/test_families.py` checks every entry's parts, and runs such a family
(`tests/fixtures/fifth_family`) end to end. The order here is the order the command runs the families in,
the plan and the summary list them, and the report shows their panels.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from configuration.base import Section
from configuration.ib import IBConfig
from configuration.muso import MusoConfig
from configuration.s1 import S1Config
from configuration.waken import WakenConfig


@dataclass(frozen=True)
class Parts:
    """Where a family's parts live, each as "module:attribute" (see the table above)."""

    warehouse: str
    protocol: str
    assets: str
    panel: str
    release: str | None = None
    ahead: str | None = None  # items the run command builds ahead in a worker process

    @classmethod
    def of(cls, key: str, *, release: bool, ahead: bool = False) -> Parts:
        """The parts laid out as the four families lay them out: `warehouse/<key>.py: PARTS`,
        `evaluations/<key>.py: PROTOCOL`, `assets/<key>.py: build_assets`, `reporting/panels/<key>.py:
        panel`; with `release`, `releases/<key>.py: RELEASE`; with `ahead`, `generators/<key>.py: AHEAD`."""
        return cls(f"warehouse.{key}:PARTS", f"evaluations.{key}:PROTOCOL", f"assets.{key}:build_assets",
                   f"reporting.panels.{key}:panel", f"releases.{key}:RELEASE" if release else None,
                   f"generators.{key}:AHEAD" if ahead else None)


def load(ref: str) -> Any:
    """The object a part's reference names ("module:attribute"); an error naming the reference if the
    module or the attribute is missing."""
    module, _, name = ref.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise  # the module exists and itself imports something missing
        raise LookupError(f"{ref}: no module {module}") from None
    except AttributeError:
        raise LookupError(f"{ref}: {module} has no {name}") from None


@dataclass(frozen=True)
class Family:
    key: str  # the warehouse schema, the configuration section, `--select`'s value, the module names
    title: str  # as the papers name it
    unit: str  # what one partition of its items asset is, in words
    items: str  # asset names of its three stages (Dagster keys; the jobs are build_/evaluate_/score_<key>)
    responses: str
    metrics: str
    items_table: str  # the warehouse table of its items
    partition_column: str | None  # the items table's column naming the partition (None: one item set)
    config: type[Section]  # its section of the configuration file, under `<key>:` (configuration/<key>.py)
    parts: Parts  # where its warehouse, protocol, assets, panel and release live

    @property
    def assets(self) -> tuple[str, str, str]:
        """(items, responses, metrics) asset names."""
        return self.items, self.responses, self.metrics

    @property
    def release(self) -> str | None:
        """The asset name of its release folder (`<key>_release`), written with its metrics; None for
        a family with no release part."""
        return f"{self.key}_release" if self.parts.release else None


FAMILIES: tuple[Family, ...] = (
    Family("muso", "MuSoBench", "task level", "muso_instances", "muso_responses", "muso_metrics",
           "muso.instances", "partition_key", MusoConfig, Parts.of("muso", release=True, ahead=True)),
    Family("waken", "WakenLLM", "dataset", "waken_items", "waken_outcomes", "waken_metrics",
           "waken.items", "dataset", WakenConfig, Parts.of("waken", release=True)),
    Family("ib", "Instruction Boundary", "dataset", "ib_items", "ib_responses", "ib_metrics",
           "ib.items", "dataset", IBConfig, Parts.of("ib", release=True)),
    Family("s1", "S1-Bench", "run (one item set)", "s1_items", "s1_responses", "s1_metrics",
           "s1.items", None, S1Config, Parts.of("s1", release=True)),
)
KEYS: tuple[str, ...] = tuple(f.key for f in FAMILIES)
BY_KEY: dict[str, Family] = {f.key: f for f in FAMILIES}


def title(key: str) -> str:
    """A family's title; '' (the models probe and the summary, which belong to no family) reads
    'models, summary'; any other name is its own title."""
    return BY_KEY[key].title if key in BY_KEY else key or "models, summary"
