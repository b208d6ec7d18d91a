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
                   "progress_interval_s": 60},
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


def materialize(defs: Any, keys: list[str], partition: str | None = None) -> Any:
    """Materialise `keys` (and their checks) of a Definitions for one partition, in process."""
    import dagster as dg

    from assets.materialize_all import raw_assets

    return dg.materialize(
        [*raw_assets(defs), *defs.asset_checks], resources=defs.resources, partition_key=partition,
        selection=dg.AssetSelection.assets(*keys) | dg.AssetSelection.checks_for_assets(*keys), raise_on_error=False,
    )


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def pytest_terminal_summary(terminalreporter):
    """The reply readers' agreement with the written corpus, per answer kind, after every run."""
    from tests.reply_corpus import agreement

    terminalreporter.section("reply readers: agreement with tests/replies/")
    for kind, (ok, n) in agreement().items():
        terminalreporter.write_line(f"{kind:12s} {ok:3d}/{n:<3d} {100 * ok / n:5.1f}%")
