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
    if cfg.warehouse.lake is None:
        return Warehouse(cfg.warehouse_path(), cfg.warehouse.lock_timeout_s)
    from warehouse.lake import open_configured

    return open_configured(cfg)
