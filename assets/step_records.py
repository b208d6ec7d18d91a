"""`runs.steps`: what each step of the run command last ran with and how it ended, one row per step.

Every run of a step's assets, wherever it was launched (the run command, the UI, a sensor, a test's
`materialize`), marks the step started as it sets up (`started`, from
`assets.resources.WarehouseResource`); the run command records how its own runs ended (`record`).
`runner/up_to_date.py` reads the records to skip the steps that are up to date.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from assets.jobs import LAST, Step, stage_assets, stage_of, step_of
from warehouse import OnConflict, Warehouse

TABLE = "runs.steps"
ANY = "*"  # the base of a run over a range of partitions: every one


def records(wh: Warehouse) -> dict[str, dict[str, Any]]:
    """Every step's record, by its label; none for a warehouse that does not exist yet."""
    if not wh.exists():
        return {}
    return {r["step"]: r for r in wh.rows(f"SELECT * FROM {TABLE}")}


def started(wh: Warehouse, step_keys: Sequence[str], partition: str | None, run_id: str,
            partition_range: str | None = None) -> None:
    """Every run of a step's assets, wherever it was launched (the command, the UI, a sensor, a
    test's `materialize`), marks the step started and not ended before it writes anything
    (`assets.resources.WarehouseResource` calls this as the run sets up): not up to date, and
    newer than every step that reads it, until the command records how it ended. `step_keys`:
    the run's steps (an asset's step is its name); those of no command step are left alone. A run
    of a range of partitions (`partition_range`, a single-run backfill) is no step of the command:
    its row, under the range, counts for every partition and ended as it started (nothing would
    ever record its end)."""
    now = datetime.now(UTC).replace(tzinfo=None)
    rows, summary = [], False
    for key in sorted(set(step_keys)):
        if key in LAST[1]:
            summary = True  # the command runs the summary and the reports as one step
            continue
        step = step_of([key], partition_range or partition)
        if step is not None and step.family:  # the command's step of the job: all its assets (metrics and release)
            step = step_of(stage_assets(step.family, stage_of(step)), step.partition, step.model) or step
        if step is not None:
            rows.append((step, (ANY if partition_range else step.partition) if stage_of(step) == "items" else None))
    if summary:
        rows.append((Step(LAST[0], "", tuple(LAST[1]), None), None))
    rows = list({s.label: (s, base) for s, base in rows}.values())
    if rows:
        _store(wh, [_row(s, base, "", False, run_id, now, now if partition_range else None) for s, base in rows])


def record(wh: Warehouse, step: Step, digest: str, ok: bool, run_id: str, started: datetime,
           finished: datetime) -> None:
    """Store what `step` ran with and how it ended (one row per step: its last run's). The times
    are the run's own, whenever this is written."""
    _store(wh, [_row(step, step.base, digest, ok, run_id, started, finished)])


def _row(step: Step, base: str | None, digest: str, ok: bool, run_id: str, started: datetime,
         finished: datetime | None) -> dict[str, Any]:
    return {"step": step.label, "job": step.job, "family": step.family, "stage": stage_of(step),
            "partition": step.partition, "base": base, "inputs": digest, "ok": ok, "run_id": run_id,
            "started_at": started, "finished_at": finished}


def _store(wh: Warehouse, rows: list[dict[str, Any]]) -> None:
    """Each row replaces the step's earlier one."""
    wh.upsert(TABLE, rows, OnConflict(("step",), {c: f"incoming.{c}" for c in rows[0] if c != "step"}))
