"""The Dagster code location: every asset, check, resource and job of Benchsmith.

`dagster dev` (or `dg dev`) loads `defs` from this module, as `pyproject.toml`
says. The configuration file is read here, so a bad file stops the code
location from loading with the file, key and expectation in the error.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from assets.models import evaluated_models_reachable, llm_call_summary_asset, models
from assets.muso import build_muso_assets
from assets.ib import build_ib_assets
from assets.s1 import s1_items, s1_metrics, s1_responses
from assets.waken import build_waken_assets
from assets.resources import SettingsResource, LLMResource, WarehouseResource
from configuration import config_path, load_config


def build_definitions(path: str | Path | None = None) -> dg.Definitions:
    cfg_path = Path(path) if path is not None else config_path()
    cfg = load_config(cfg_path)
    muso_assets, muso_checks = build_muso_assets(cfg)
    family_assets = [*muso_assets, *build_waken_assets(cfg), *build_ib_assets(cfg), s1_items, s1_responses, s1_metrics]
    # The ledger summary comes last: items assets call judges and validators, responses the models.
    calling = [models, *family_assets]
    summary = llm_call_summary_asset([a.key for a in calling])
    all_assets = [models, *family_assets, summary]
    return dg.Definitions(
        assets=all_assets,
        asset_checks=[evaluated_models_reachable, *muso_checks],
        jobs=[
            # A Dagster job cannot mix partitions definitions, so the graph is split: the
            # unpartitioned assets here, each family's partitioned assets in its own job (launch it
            # as a backfill over all partitions). `python -m assets.materialize_all` runs them all.
            dg.define_asset_job(
                "everything",
                selection=dg.AssetSelection.all() - dg.AssetSelection.assets(
                    *(a for a in all_assets if a.partitions_def is not None)),
                description=("The unpartitioned assets: models, S1-Bench, every family's metrics, the ledger "
                             "summary. The partitioned ones: jobs `muso`, `waken`, `ib`. All of it: "
                             "`python -m assets.materialize_all`."),
            ),
            dg.define_asset_job(
                "muso", selection=dg.AssetSelection.groups("muso") - dg.AssetSelection.assets("muso_metrics"),
                description="MuSoBench instances and responses, one run per task level (then `muso_metrics`).",
            ),
            dg.define_asset_job(
                "ib", selection=dg.AssetSelection.groups("ib") - dg.AssetSelection.assets("ib_metrics"),
                description="Instruction Boundary items and responses, one run per dataset (then `ib_metrics`).",
            ),
            dg.define_asset_job(
                "waken", selection=dg.AssetSelection.groups("waken") - dg.AssetSelection.assets("waken_metrics"),
                description="WakenLLM items and outcomes, one run per dataset (then `waken_metrics`).",
            ),
        ],
        resources={
            "settings": SettingsResource(path=str(cfg_path.resolve())),
            "warehouse": WarehouseResource(
                path=str(cfg.warehouse_path()), lock_timeout_s=cfg.warehouse.lock_timeout_s
            ),
            "llm": LLMResource(config_path=str(cfg_path.resolve())),
        },
        # One process per run: steps share the embedded model server and on a
        # laptop's few cores parallel steps would only compete for them.
        executor=dg.in_process_executor,
    )


defs = build_definitions()
