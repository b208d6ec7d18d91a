"""Writing a file that others read while it may be rewritten: in the bottom layer, since the
ledger's batch files (llm_calls) and the report pages (reporting) both need it."""

from __future__ import annotations

import uuid
from pathlib import Path


def write_whole(path: Path, text: str) -> None:
    """Write `text` to `path` as a temporary file of this writer's own renamed over it, so a reader
    finds the old file or the new one, whole, never one half written, and writers of one file at
    once all succeed (the last rename's text stays). Written in place, or through one temporary
    name shared by all writers, one writer's truncation or rename cut across another's."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
