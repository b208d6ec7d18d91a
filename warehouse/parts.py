"""What a family gives the warehouse: one `WarehouseParts` per family (`warehouse/<key>.py: PARTS`), read
by the shared schema (`schema.py`: its tables, the `report` views that union every family's rows), the
report pages and the releases. Optional parts are None (or empty) and say what is then missing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from configuration.families import Family, load


@dataclass(frozen=True)
class WarehouseParts:
    tables: Mapping[str, str]  # "<key>.<table>" -> its DDL body, a `--` comment on every column
    views: Mapping[str, str]  # "<key>.<view>" -> its SELECT
    table_docs: Mapping[str, str]  # table -> what one row is
    view_column_docs: Mapping[str, str]  # "<key>.<view>.<column>" -> its comment
    item_keys: Mapping[str, tuple[str, ...]]  # its items table -> the columns naming one item (partition first)
    made_on: Mapping[str, str]  # a table of replies -> the items table its rows were made on
    headline: str  # its rows of `report.headline` (family, model, scope, metric, value, n)
    mechanisms: str  # its rows of `report.mechanisms`: whether each mechanism was exercised, and why not
    samples: str  # the replies behind each headline scope (scope, item, step, context, question, reply,
    #               how_read, answer, gold, verdict, call_keys): the report's examples and the release card
    headline_units: str | None = None  # the units each headline number rests on (`report.units`);
    #                                    None: no interval, no paired comparison, no item statistics
    item_answers: str | None = None  # each model's answer per unit where answers are labels
    #                                  (`report.item_answers`); None: no majority answer, no label-error flag
    item_texts: str | None = None  # each item's text as asked (family, split, item, text), for
    #                                `report.near_duplicates`; None: never checked for near-duplicates
    stale_listed: tuple[str, ...] | None = None  # the reply tables `report.stale` lists (None: all of `made_on`)
    sample_steps: Mapping[str, str] = field(default_factory=dict)  # metric -> the step of its replies (the
    #                                                                 report links a number to those)
    view_column_doc: Callable[[str], str | None] | None = None  # a comment for a view column named by a
    #                                                              pattern (e.g. a per-level column)

    @property
    def stale_tables(self) -> tuple[str, ...]:
        return tuple(self.made_on) if self.stale_listed is None else self.stale_listed


def of(family: Family) -> WarehouseParts:
    """A family's warehouse part, checked to be one."""
    parts = load(family.parts.warehouse)
    if not isinstance(parts, WarehouseParts):
        raise TypeError(f"{family.key}: {family.parts.warehouse} is a {type(parts).__name__}, not a WarehouseParts")
    return parts
