"""What every section of the configuration is made of: strict models, per-scale values,
dataset sources, and the one seed derivation."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PerScale(Strict):
    """A value that differs between the `demo` and `paper` scales."""

    demo: int = Field(ge=0)
    paper: int = Field(ge=0)

    def at(self, scale: str) -> int:
        return self.demo if scale == "demo" else self.paper


class SourceSpec(Strict):
    """Where a dataset's rows come from: a hub id or local dataset directory, or local files."""

    hub: str | None = None
    config: str | None = None
    split: str = "train"
    path: str | None = None

    @model_validator(mode="after")
    def _one_location(self) -> SourceSpec:
        if (self.hub is None) == (self.path is None):
            raise ValueError("expected exactly one of `hub` or `path`")
        return self


WakenSource = SourceSpec  # the name WakenLLM's datasets have always used


def derived_seed(seed: int, *parts: object) -> int:
    """The one way a seed for a part of the work (a dataset, a level, a subcategory) is derived
    from the configured seed: sha256 of "seed:part:part...", its first 60 bits (fits a BIGINT).
    The same configuration and seed give the same derived seeds on every machine."""
    text = ":".join(str(x) for x in (seed, *parts))
    return int(hashlib.sha256(text.encode()).hexdigest()[:15], 16)


class Section(Strict):
    """A family's section of the configuration (`configuration/<key>.py`, named by the registry).

    Three hooks let the whole configuration use it without knowing the family: the models it
    names, the paths in it that are relative to the configuration file, and the partitions of its
    items."""

    def item_partitions(self, scale: str) -> list[str] | None:
        """The partition keys of the family's items at `scale`, in the order they are built (a
        dataset or a level each); None: one item set. The one list that the asset definitions
        (assets/partitions.py) and the command's steps (assets/jobs.py) read."""
        return None

    def referenced_models(self) -> list[tuple[str, str, str]]:
        """(key under the section, model name, 'models' or 'evaluate': where the name must be)."""
        return []

    @classmethod
    def paths_beside(cls, section: dict[str, Any], base: Path) -> dict[str, Any]:
        """The raw section with its relative paths made relative to `base`, the file's folder."""
        return section


def source_beside(entry: Any, base: Path) -> Any:
    """A dataset entry whose `source` names a relative `path`, or a relative local copy of a hub
    dataset (one that starts with ./ or ../, or exists beside the file), resolved beside the file."""
    if isinstance(entry, dict) and isinstance(entry.get("source"), dict):
        src = dict(entry["source"])
        path, hub = src.get("path"), src.get("hub")
        if isinstance(path, str) and path and not Path(path).is_absolute():
            src["path"] = str(base / path)
        if isinstance(hub, str) and hub and not Path(hub).is_absolute() and (
                hub.startswith(("./", "../")) or (base / hub).is_dir()):
            src["hub"] = str(base / hub)
        return {**entry, "source": src}
    return entry


def datasets_beside(section: dict[str, Any], base: Path) -> dict[str, Any]:
    """A section's `datasets` (and `miscellany`) entries with their sources resolved beside the file."""
    section = dict(section)
    if isinstance(section.get("datasets"), dict):
        section["datasets"] = {k: source_beside(v, base) for k, v in section["datasets"].items()}
    if "miscellany" in section:
        section["miscellany"] = source_beside(section["miscellany"], base)
    return section

