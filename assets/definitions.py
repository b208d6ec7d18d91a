"""The Dagster code location: every asset, check, resource and job of Benchsmith.

`dagster dev` (or `dg dev`) loads `defs` from this module, as `pyproject.toml`
says. The configuration file is read here, so a bad file stops the code
location from loading with the file, key and expectation in the error.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from assets.jobs import define_jobs
from assets.models import evaluated_models_reachable, llm_call_summary_asset, models
from assets.release import release_asset
from assets.report import model_report
from assets.resources import LLMResource, SettingsResource, WarehouseResource
from configuration import config_path, load_config
from configuration.families import FAMILIES, load


def build_definitions(path: str | Path | None = None) -> dg.Definitions:
    cfg_path = Path(path) if path is not None else config_path()
    cfg = load_config(cfg_path)
    # each family's assets from its `build_assets` (the registry's `Parts.assets`), in the registry's order
    family_assets = [a for f in FAMILIES for a in load(f.parts.assets)(cfg)]
    # The ledger summary comes last: items assets call judges and validators, responses the models.
    calling = [models, *family_assets]
    summary = llm_call_summary_asset([a.key for a in calling])
    released = [release_asset(f) for f in FAMILIES if f.release]
    all_assets = [models, *family_assets, summary, model_report, *released]
    return dg.Definitions(
        assets=all_assets,
        asset_checks=[evaluated_models_reachable],
        jobs=define_jobs(),
        resources={
            "settings": SettingsResource(path=str(cfg_path.resolve())),
            "warehouse": WarehouseResource(
                path=str(cfg.warehouse_path()), lock_timeout_s=cfg.warehouse.lock_timeout_s,
                config_path=str(cfg_path.resolve()) if cfg.warehouse.lake else None,
            ),
            "llm": LLMResource(config_path=str(cfg_path.resolve())),
        },
        # One process per run: steps share the embedded model server and on a
        # laptop's few cores parallel steps would only compete for them.
        executor=dg.in_process_executor,
    )


defs = build_definitions()
