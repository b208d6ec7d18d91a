"""The benchmark families, each described once: every place that spans families loops over `FAMILIES`.

A family's code lives in modules named after its key, one per layer that has work for it:

| layer | module | what the cross-family code takes from it |
| --- | --- | --- |
| `configuration/` | `configuration/<key>.py` | its section's model (`config` below), checked by `Config`; `item_partitions` |
| `warehouse/` | `warehouse/<key>.py` | `TABLES`, `VIEWS`, their docs, `ITEM_KEYS`, `MADE_ON`, `HEADLINE`, `MECHANISMS`, `SAMPLES` |
| `evaluations/` | `evaluations/<key>.py` | `planned_calls(cfg, query)`: the calls its protocol makes |
| `assets/` | `assets/<key>.py` | `build_assets(cfg)`: its assets and checks |
| `reporting/panels/` | `reporting/panels/<key>.py` | `panel(wh, model, writer)`: its part of a model's report |
| `generators/` | `generators/<key>.py` (optional) | `left_out_at_demo(cfg)`: what the demo scale does not build |
| `evaluations/` | `evaluations/<key>.py` (optional) | `planned_requests(cfg, query)`: the requests the plan counts tokens of |
| `releases/` | `releases/<key>.py` (optional) | its release: `parts`, `tables_of`, the card's texts (releases/__init__.py) |

plus whatever its generators, validators and solvers need (imported by its own modules only).
Adding a fifth family means those modules and one `Family(...)` entry below (with the import of its
section); `tests/test_families.py` checks that every entry has them, and runs such a family
(`tests/fixtures/fifth_family`) end to end. The order here is the order the command runs the families in,
the plan and the summary list them, and the report shows their panels.
"""

from __future__ import annotations

from dataclasses import dataclass

from configuration.base import Section
from configuration.ib import IBConfig
from configuration.muso import MusoConfig
from configuration.s1 import S1Config
from configuration.waken import WakenConfig


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

    @property
    def assets(self) -> tuple[str, str, str]:
        """(items, responses, metrics) asset names."""
        return self.items, self.responses, self.metrics

    @property
    def release(self) -> str | None:
        """The asset name of its release folder (`<key>_release`), written with its metrics; None for
        a family without the optional `releases/<key>.py`."""
        import importlib.util

        return f"{self.key}_release" if importlib.util.find_spec(f"releases.{self.key}") else None


FAMILIES: tuple[Family, ...] = (
    Family("muso", "MuSoBench", "task level", "muso_instances", "muso_responses", "muso_metrics",
           "muso.instances", "partition_key", MusoConfig),
    Family("waken", "WakenLLM", "dataset", "waken_items", "waken_outcomes", "waken_metrics",
           "waken.items", "dataset", WakenConfig),
    Family("ib", "Instruction Boundary", "dataset", "ib_items", "ib_responses", "ib_metrics",
           "ib.items", "dataset", IBConfig),
    Family("s1", "S1-Bench", "run (one item set)", "s1_items", "s1_responses", "s1_metrics",
           "s1.items", None, S1Config),
)
KEYS: tuple[str, ...] = tuple(f.key for f in FAMILIES)
BY_KEY: dict[str, Family] = {f.key: f for f in FAMILIES}


def title(key: str) -> str:
    """A family's title; '' (the models probe and the summary, which belong to no family) reads
    'models, summary'; any other name is its own title."""
    return BY_KEY[key].title if key in BY_KEY else key or "models, summary"
