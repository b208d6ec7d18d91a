"""Dagster resources: the configuration file, the DuckDB warehouse and the models.

Resources carry paths only. API keys stay in the environment and are read by the
model registry at call time, so they never enter run config, the UI or logs.
"""


import dagster as dg
from pydantic import PrivateAttr

from configuration import Config, load_config
from llm_calls import Ledger, ModelRegistry
from warehouse import Warehouse, open_warehouse


class SettingsResource(dg.ConfigurableResource):
    """The Benchsmith YAML configuration (scale, seeds, models, families)."""

    path: str

    def load(self) -> Config:
        return load_config(self.path)


class WarehouseResource(dg.ConfigurableResource):
    """The warehouse: the DuckDB file at `path` (connections short and serialised across processes),
    or, with `config_path`, whatever that configuration names (a DuckLake when `warehouse.lake` is
    set; its catalog's connection string is read from the environment, never carried here)."""

    path: str
    lock_timeout_s: float = 300.0
    config_path: str | None = None

    def get(self) -> Warehouse:
        if self.config_path is not None:
            return open_warehouse(load_config(self.config_path))
        return Warehouse(self.path, self.lock_timeout_s)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Before a run writes anything, its steps are marked started in `runs.steps`, wherever it
        was launched, so the command's next run does not take what reads them for up to date
        (runner/up_to_date.py)."""
        from assets import step_records

        run = context.run
        if run is None:  # a resource built outside a run (a test, a script)
            return
        keys = run.step_keys_to_execute
        if keys is None and run.execution_plan_snapshot_id and context.instance is not None:
            keys = [s.key for s in context.instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id).steps]
        tags = run.tags
        first, last = tags.get("dagster/asset_partition_range_start"), tags.get("dagster/asset_partition_range_end")
        step_records.started(self.get(), keys or [], tags.get("dagster/partition"), run.run_id,
                           f"{first}...{last}" if first is not None else None)


class LLMResource(dg.ConfigurableResource):
    """Model access through the call ledger.

    The embedded model's server starts on first use within a run and is stopped
    when the run's resources are torn down, also when a step fails.
    """

    config_path: str
    _registry: ModelRegistry | None = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._registry = ModelRegistry(load_config(self.config_path))

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._registry is not None:
            self._registry.close()
            self._registry = None

    @property
    def registry(self) -> ModelRegistry:
        if self._registry is None:  # used outside a run (a notebook, a test)
            self._registry = ModelRegistry(load_config(self.config_path))
        return self._registry

    def ledger(self, context: dg.AssetExecutionContext | dg.OpExecutionContext, warehouse: Warehouse) -> Ledger:
        return Ledger(warehouse, self.registry, log=context.log, run_id=context.run.run_id)
