"""The DuckDB warehouse: one file, one schema per benchmark family plus `llm` and `sources`.

Public surface: `Warehouse` (connections serialised across processes, partition
replacement in one transaction) and `WarehouseLockTimeout`.
"""

from warehouse.connection import Warehouse, WarehouseLockTimeout
from warehouse.schema import SCHEMAS

__all__ = ["Warehouse", "WarehouseLockTimeout", "SCHEMAS"]
