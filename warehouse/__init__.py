"""The DuckDB warehouse: one file, one schema per benchmark family plus `llm` and `sources`.

Public surface: `Warehouse` (connections serialised across processes, partition
replacement in one transaction), `WarehouseLockTimeout`, and `open_warehouse`, the configured
warehouse: the file, or a DuckLake (`warehouse.lake`) when `warehouse.lake` is set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from warehouse.connection import OnConflict, Warehouse, WarehouseLockTimeout
from warehouse.schema import SCHEMAS

if TYPE_CHECKING:
    from configuration import Config

__all__ = ["OnConflict", "Warehouse", "WarehouseLockTimeout", "SCHEMAS", "open_warehouse"]


def open_warehouse(cfg: Config) -> Warehouse:
    """The warehouse the configuration names: the DuckDB file at `warehouse.path`, or the DuckLake
    of `warehouse.lake` (its reports still go beside `warehouse.path`)."""
    lake = cfg.warehouse.lake
    if lake is None:
        return Warehouse(cfg.warehouse_path(), cfg.warehouse.lock_timeout_s)
    from warehouse.lake import open_lake

    data = lake.data_path if "://" in lake.data_path else str(cfg.beside(lake.data_path))
    return open_lake(lake.catalog, lake.catalog_env, cfg.beside(lake.catalog_path) if lake.catalog_path else None,
                     data, cfg.warehouse_path().parent, cfg.warehouse.lock_timeout_s)
