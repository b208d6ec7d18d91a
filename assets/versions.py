"""Code versions of the assets, so the UI marks what a code or configuration change made stale.

An asset's code version is its code's version tag (the generators' `ITEMS_VERSION`, a literal for
the evaluation and metric code, bumped when their output changes) joined to a digest of the
configuration it reads: the family's section, the seed, the scale and the judge model's settings.
Which models are evaluated is a partition dimension, not a version: adding one leaves the other
slices current.
"""

from __future__ import annotations

import hashlib
import json

from configuration import Config


def code_version(tag: str, cfg: Config, section: str | None) -> str:
    judge = cfg.models.get(cfg.judge)
    parts = {"seed": cfg.seed, "scale": cfg.scale,
             "section": getattr(cfg, section).model_dump(mode="json") if section else None,
             "judge": [cfg.judge, judge.model_dump(mode="json") if judge is not None else None]}
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{tag}:{digest}"
