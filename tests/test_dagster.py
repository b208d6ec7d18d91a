"""Dagster surface: definitions load, the models asset, concurrent runs, no secret stored, the UI."""

import json
import multiprocessing as mp
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest

from assets.definitions import build_definitions
from assets.resources import WarehouseResource
from runner.command import raw_assets
from tests.conftest import stub_config
from warehouse import Warehouse

REPO = Path(__file__).resolve().parent.parent


def test_definitions_load_from_the_repository_config():
    from assets.definitions import defs

    dg.Definitions.validate_loadable(defs)  # what `dagster dev` does: job and asset names must not clash
    repo = defs.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert {"models", "llm_call_summary", "muso_instances", "muso_metrics", "waken_items", "waken_metrics"} <= keys
    # per family: items per dataset or level, responses per (dataset, model) slice, metrics unpartitioned
    assert defs.resolve_job_def("probe_models").partitions_def is None
    assert defs.resolve_job_def("build_muso").partitions_def.get_partition_keys()[0] == "timetabling_1-50"
    assert defs.resolve_job_def("build_waken").partitions_def.get_partition_keys() == ["fld"]
    assert defs.resolve_job_def("evaluate_waken").partitions_def.get_partition_keys() == ["fld|smollm2"]
    assert defs.resolve_job_def("evaluate_s1").partitions_def.get_partition_keys() == ["smollm2"]
    assert defs.resolve_job_def("score_waken").partitions_def is None


def _materialize(defs: dg.Definitions, instance: dg.DagsterInstance | None = None) -> dg.ExecuteInProcessResult:
    """Materialise the `models` asset and its check (the families' assets are partitioned)."""
    return dg.materialize(
        [*raw_assets(defs), *defs.asset_checks], resources=defs.resources, instance=instance, raise_on_error=False,
        selection=dg.AssetSelection.assets("models") | dg.AssetSelection.checks_for_assets("models"),
    )


@pytest.mark.slow
def test_models_asset_records_a_reachable_model_and_its_probe(stub, tmp_path):
    cfg = stub_config(stub, tmp_path)
    defs = build_definitions(cfg.source)
    result = _materialize(defs)
    assert result.success
    row = Warehouse(cfg.warehouse_path()).rows("SELECT * FROM llm.models")[0]
    assert row["name"] == "stub" and row["reachable"] and row["served_ids"] == ["stub-model"]
    assert row["probe_answer"].startswith("reply to: What is 2 + 3?") and row["error"] is None
    checks = result.get_asset_check_evaluations()
    assert [c.passed for c in checks] == [True]


@pytest.mark.slow
def test_unreachable_model_is_recorded_and_fails_the_check(stub, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]
    cfg = stub_config(stub, tmp_path, models={
        "stub": {"base_url": stub.base_url, "model": "stub-model"},
        "down": {"base_url": f"http://127.0.0.1:{dead_port}/v1", "model": "x"},
    }, evaluate=["stub", "down"])
    result = _materialize(build_definitions(cfg.source))
    assert result.success  # recorded, not fatal
    rows = {r["name"]: r for r in Warehouse(cfg.warehouse_path()).rows("SELECT * FROM llm.models")}
    assert rows["stub"]["reachable"] and not rows["down"]["reachable"]
    assert "Connection" in rows["down"]["error"]
    [check] = result.get_asset_check_evaluations()
    assert not check.passed and "down" in check.metadata["failing"].value


# -- concurrent materialisations -------------------------------------------------------

PARTS = dg.StaticPartitionsDefinition([f"p{i}" for i in range(6)])


@dg.asset(partitions_def=PARTS)
def partitioned_writer(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> None:
    wh = warehouse.get()
    with wh.connect() as con:
        con.execute("CREATE TABLE IF NOT EXISTS sources.concurrency_probe (part VARCHAR, i INTEGER)")
    for _ in range(5):  # several writes per step, to interleave with the other runs
        wh.replace_partition(
            "sources.concurrency_probe", [{"part": context.partition_key, "i": i} for i in range(100)],
            {"part": context.partition_key},
        )


def _run_partitions(config_path: str, keys: list[str], out: "mp.Queue[tuple[str, bool]]") -> None:
    defs = build_definitions(config_path)
    for key in keys:
        result = dg.materialize([partitioned_writer], resources=defs.resources, partition_key=key, raise_on_error=False)
        out.put((key, result.success))
    ok = _materialize(defs).success  # the real models asset (ledger writes) at the same time
    out.put(("models", ok))


@pytest.mark.slow
def test_concurrent_materialisations_do_not_hit_the_duckdb_lock(stub, tmp_path):
    cfg = stub_config(stub, tmp_path)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    # three run processes at once, like a UI launch beside a backfill of several partitions
    procs = [ctx.Process(target=_run_partitions, args=(cfg.source, keys, out))
             for keys in (["p0", "p1"], ["p2", "p3"], ["p4", "p5"])]
    for p in procs:
        p.start()
    for p in procs:
        p.join(240)
    results = [out.get(timeout=5) for _ in range(9)]
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert all(ok for _, ok in results), results
    wh = Warehouse(cfg.warehouse_path())
    assert wh.rows("SELECT count(DISTINCT part) AS parts, count(*) AS n FROM sources.concurrency_probe") == [
        {"parts": 6, "n": 600}
    ]
    assert wh.scalar("SELECT count(*) FROM llm.models") == 1


@pytest.mark.slow
def test_no_api_key_in_warehouse_or_dagster_storage(stub, tmp_path, monkeypatch):
    secret = "sk-live-DO-NOT-STORE-8675309"
    monkeypatch.setenv("BENCH_SECRET_KEY", secret)
    cfg = stub_config(stub, tmp_path, models={
        "stub": {"base_url": stub.base_url, "model": "stub-model", "api_key_env": "BENCH_SECRET_KEY"}})
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        result = _materialize(build_definitions(cfg.source), instance=instance)
        assert result.success
    assert stub.requests and all(r["authorization"] == f"Bearer {secret}" for r in stub.requests)
    leaked = [p for p in [*home.rglob("*"), cfg.warehouse_path()] if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaked == []
    assert any(home.rglob("*.db")), "the Dagster instance stored nothing: the test would prove nothing"


@pytest.mark.slow
def test_dagster_ui_starts_on_the_project(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        query = json.dumps({"query": "{ workspaceOrError { ... on Workspace { locationEntries { name "
                                     "locationOrLoadError { __typename } } } } }"}).encode()
        deadline, entries = time.monotonic() + 120, None
        while time.monotonic() < deadline and entries is None:
            time.sleep(1)
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", data=query,
                                             headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=5) as resp:
                    entries = json.load(resp)["data"]["workspaceOrError"]["locationEntries"]
            except (OSError, KeyError):
                pass
        assert entries == [{"name": "benchsmith", "locationOrLoadError": {"__typename": "RepositoryLocation"}}]
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.slow
def test_a_401_reply_echoing_the_key_leaves_no_trace_anywhere(tmp_path, monkeypatch, capfd, caplog):
    from llm_calls.stub_server import StubServer

    secret = "sk-proj-ECHOED-BACK-5551234"
    monkeypatch.setenv("BENCH_SECRET_KEY", secret)
    with StubServer(echo_key_401=True) as echoing:
        cfg = stub_config(echoing, tmp_path, models={
            "stub": {"base_url": echoing.base_url, "model": "stub-model", "api_key_env": "BENCH_SECRET_KEY"}})
        home = tmp_path / "dagster_home"
        home.mkdir()
        with dg.instance_for_test(temp_dir=str(home)) as instance:
            _materialize(build_definitions(cfg.source), instance=instance)
        asked = echoing.requests + echoing.get_requests
        assert asked and all(r["authorization"] == f"Bearer {secret}" for r in asked), "the key never reached it"
    [row] = Warehouse(cfg.warehouse_path()).rows("SELECT reachable, error FROM llm.models")
    assert not row["reachable"] and "401" in row["error"] and "***" in row["error"]  # the reason stays readable
    out, err = capfd.readouterr()
    assert secret not in out + err + caplog.text
    leaked = [p for p in [*home.rglob("*"), *tmp_path.rglob("*.duckdb*")] if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaked == []


def test_a_base_url_without_a_scheme_is_refused_when_the_config_loads(tmp_path):
    from configuration import ConfigError, load_config
    from tests.conftest import write_config

    path = write_config(tmp_path, {"models": {"m": {"base_url": "gpu-box:8000/v1", "model": "x"}},
                                   "evaluate": ["m"], "judge": "m"})
    with pytest.raises(ConfigError, match="needs a scheme"):
        load_config(path)


@pytest.mark.slow
def test_the_instance_marks_killed_runs_failed(tmp_path, monkeypatch):
    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(tmp_path)  # the instance's relative storage paths land here
    instance = dg.DagsterInstance.from_config(str(root))
    assert instance.run_monitoring_enabled and instance.run_monitoring_start_timeout_seconds == 180


@pytest.mark.slow
def test_a_built_wheel_carries_the_s1_registry(tmp_path):
    import shutil
    import zipfile

    root = Path(__file__).resolve().parent.parent
    src = tmp_path / "src"  # setuptools builds in the source tree: build a copy, leave the checkout clean
    shutil.copytree(root, src, ignore=shutil.ignore_patterns(".venv", ".git", "data", ".dagster", "build", "*.egg-info",
                                                            "__pycache__"))
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                          str(tmp_path), str(src)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    [wheel] = tmp_path.glob("benchsmith-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "generators/s1_subcategories.yaml" in names  # a non-editable install can build S1-Bench


def test_every_check_has_a_description_and_checks_of_partitioned_assets_are_partitioned():
    from assets.definitions import defs

    graph = defs.get_repository_def().asset_graph
    specs = [spec for key in graph.asset_check_keys for spec in [graph.get_check_spec(key)]]
    assert len(specs) > 20
    assert [s.key.to_user_string() for s in specs if not s.description] == []
    for spec in specs:
        assert spec.partitions_def == graph.get(spec.asset_key).partitions_def, spec.key
