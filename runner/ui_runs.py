"""Runs launched from the Dagster UI carry the tags of the command's runs (issue 25).

Dagster launches a click on an asset's Materialize button as a run of its implicit asset job
(`__ASSET_JOB`), not of the named job that holds the asset, and without this project's tags; a
Runs page filtered by `benchsmith/family` would miss it. `TaggedRunCoordinator` (the instance's
run coordinator in `dagster.yaml`) is Dagster's queued coordinator that, when a run is submitted,
adds what `python -m assets.materialize_all` would have tagged the same step with (family,
partition, models, configuration: `assets.jobs.run_tags`), `benchsmith/job`, the named job
whose step the run is, and `benchsmith/launched` (`ui`). Dagster stores a run's job name when it
creates the run, so a launch from the asset graph keeps `__ASSET_JOB` as its job name; a launch
from the job's page (Jobs, then `score_ib`, then Materialize) is a run of that job and gets the
same tags (both seen in a browser: tests/test_report.py).
Runs that already carry the project's tags (the command's) are left as they are.
"""

from __future__ import annotations

from collections.abc import Mapping

from dagster._core.run_coordinator import QueuedRunCoordinator, SubmitRunContext
from dagster._core.storage.dagster_run import DagsterRun

from assets.jobs import run_tags, step_of
from assets.partitions import MODEL

PREFIX = "benchsmith/"


def ui_tags(run: DagsterRun, config) -> dict[str, str]:
    """The tags the command gives the step `run` is, or {} when the run is not one step's (or is
    already tagged)."""
    if any(k.startswith(PREFIX) for k in run.tags):
        return {}
    assets = sorted(k.path[-1] for k in (run.asset_selection or ()))
    partition = run.tags.get("dagster/partition")
    step = step_of(assets, partition, run.tags.get(f"dagster/partition/{MODEL}"))
    if step is None:
        return {}
    return {**run_tags(step, config), f"{PREFIX}job": step.job, f"{PREFIX}launched": "ui"}


class TaggedRunCoordinator(QueuedRunCoordinator):
    """Dagster's queued run coordinator, tagging each submitted run as `ui_tags` says."""

    def submit_run(self, context: SubmitRunContext) -> DagsterRun:
        from configuration import ConfigError, load_config

        run = context.dagster_run
        try:
            config = load_config()
        except ConfigError as exc:  # the run itself will fail on it and say so; tag what we can
            self._logger.warning(f"benchsmith tags not added: {exc}")
            return super().submit_run(context)
        tags: Mapping[str, str] = ui_tags(run, config)
        if tags:
            self._instance.add_run_tags(run.run_id, dict(tags))
            run = self._instance.get_run_by_id(run.run_id) or run
            context = SubmitRunContext(run, context.workspace)
        return super().submit_run(context)
