"""Shared fixtures: a fault-injecting OpenAI-compatible stub server, warehouses in tmp_path,
and configuration files written per test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from configuration import Config, load_config
from llm_calls import Ledger, ModelRegistry
from llm_calls.stub_server import StubServer
from warehouse import Warehouse


@pytest.fixture
def stub():
    with StubServer(delay_s=0.0, hang_s=3.0) as server:
        yield server


def write_config(tmp_path: Path, data: dict[str, Any], name: str = "benchsmith.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def stub_config(stub: StubServer, tmp_path: Path, **overrides: Any) -> Config:
    """A configuration whose only model is the stub, with fast retries."""
    data: dict[str, Any] = {
        "warehouse": {"path": str(tmp_path / "wh.duckdb")},
        "ledger": {"timeout_s": 1.0, "max_attempts": 3, "backoff_base_s": 0.01, "backoff_max_s": 0.05,
                   "progress_interval_s": 60, "slots_dir": str(tmp_path / "slots")},  # not one folder per stub
        "models": {"stub": {"base_url": stub.base_url, "model": "stub-model", "concurrency": 4,
                            "sampling": {"temperature": 0.0, "max_tokens": 64}}},
        "evaluate": ["stub"],
        "judge": "stub",
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return load_config(write_config(tmp_path, data))


@pytest.fixture
def stub_ledger(stub, tmp_path):
    cfg = stub_config(stub, tmp_path)
    wh = Warehouse(cfg.warehouse_path(), lock_timeout_s=30)
    with ModelRegistry(cfg) as registry:
        yield Ledger(wh, registry)


class Results:
    """The runs of one `materialize` call, read like one `ExecuteInProcessResult`."""

    def __init__(self, results: list[Any]):
        self.results = results
        self.success = all(r.success for r in results)
        self.all_events = [e for r in results for e in r.all_events]

    def get_asset_check_evaluations(self) -> list[Any]:
        return [e for r in self.results for e in r.get_asset_check_evaluations()]


def partition_keys(asset: Any, partition: str | None) -> list[str | None]:
    """The partition keys of `asset` that make up `partition` (a dataset or level): itself, or every
    (partition, model) slice of a model-partitioned asset; every model for `s1_responses`."""
    import dagster as dg

    pdef = asset.partitions_def
    if pdef is None:
        return [None]
    if isinstance(pdef, dg.MultiPartitionsDefinition):
        keys = pdef.get_partition_keys()
        return [k for k in keys if partition in (k, *k.keys_by_dimension.values())]
    if partition is None:
        return list(pdef.get_partition_keys())
    return [partition]


def materialize(defs: Any, keys: list[str], partition: str | None = None, instance: Any = None) -> Results:
    """Materialise `keys` (and their checks) of a Definitions for one dataset or level, in process,
    each asset in the order given and, when partitioned by model, once per evaluated model."""
    import dagster as dg

    from runner.command import raw_assets

    results = []
    for key in keys:
        for pk in partition_keys(defs.resolve_assets_def(key), partition):
            results.append(dg.materialize(
                [*raw_assets(defs), *defs.asset_checks], resources=defs.resources, partition_key=pk, instance=instance,
                selection=dg.AssetSelection.assets(key) | dg.AssetSelection.checks_for_assets(key),
                raise_on_error=False))
    return Results(results)


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def pytest_terminal_summary(terminalreporter):
    """The reply readers' agreement with the written corpus, per answer kind, after every run."""
    from tests.reply_corpus import agreement

    terminalreporter.section("reply readers: agreement with tests/replies/")
    for kind, (ok, n) in agreement().items():
        terminalreporter.write_line(f"{kind:12s} {ok:3d}/{n:<3d} {100 * ok / n:5.1f}%")
