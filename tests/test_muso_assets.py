"""MuSoBench assets end to end on a stub model that solves every question perfectly."""

import re

import pytest

from assets.definitions import build_definitions
from generators.muso import subsetsum_answer, timetabling_answer
from llm_calls.stub_server import StubServer
from solvers import subsetsum as ss
from solvers import timetabling as tt
from tests.conftest import materialize, stub_config
from warehouse import Warehouse

MUSO = {"timetabling": {"bins": [[1, 50], [51, 100]]}, "subsetsum": {"bins": [[1, 50], [51, None]]},
        "quota": {"demo": 2, "paper": 2}}


def perfect_model(body):
    """Solves the question in the first user message with the project's solvers."""
    first, last = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "rate your confidence" in last:
        return "[[CONFIDENCE: \\boxed{100}]]"
    if "Recheck all your answers" in last:
        return "[[UNCHANGE]]"
    courses = re.findall(r"- Course\d+ : Time \[([\d, ]+)\], Room \[([\d, ]+)\], Teacher \[(\d+)\]", first)
    if courses:
        parsed = [tt.Course(tuple(map(int, t.split(","))), tuple(map(int, r.split(","))), int(p)) for t, r, p in courses]
        problem = tt.TimetablingProblem(tuple(parsed), 10, 10, 5)
        return timetabling_answer(problem, tt.backtracking_solutions(problem))
    values = re.search(r"unique integers: \{([\d, ]+)\}", first)
    target = re.search(r"target: (\d+)", first)
    problem = ss.SubsetSumProblem(tuple(map(int, values.group(1).split(","))), int(target.group(1)))
    return "Solution list: " + subsetsum_answer(ss.backtracking_solutions(problem))


@pytest.fixture
def perfect_stub():
    with StubServer(responder=perfect_model) as server:
        yield server




def test_partitions_follow_the_configured_bins(perfect_stub, tmp_path):
    defs = build_definitions(stub_config(perfect_stub, tmp_path, muso=MUSO).source)
    pdef = defs.get_assets_def("muso_instances").partitions_def
    assert pdef.get_partition_keys() == ["timetabling_1-50", "timetabling_51-100", "subsetsum_1-50", "subsetsum_51+"]


@pytest.mark.slow
def test_levels_to_metrics_end_to_end_with_a_perfect_model(perfect_stub, tmp_path):
    cfg = stub_config(perfect_stub, tmp_path, muso=MUSO)
    defs = build_definitions(cfg.source)
    for pk in ("timetabling_51-100", "subsetsum_51+"):
        result = materialize(defs, ["muso_instances", "muso_responses"], pk)
        assert result.success
        assert all(c.passed for c in result.get_asset_check_evaluations())
    result = materialize(defs, ["muso_metrics"])
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    # the two levels not built here are configured: the coverage check names them
    assert result.success and not checks["every_model_task_level"].passed
    assert sorted(map(tuple, checks["every_model_task_level"].metadata["missing"].value)) == [
        ("stub", "subsetsum", 1, 50), ("stub", "timetabling", 1, 50)]
    assert all(c.passed for name, c in checks.items() if name != "every_model_task_level")
    wh = Warehouse(cfg.warehouse_path())
    assert wh.rows("SELECT task, level, level_lo, level_hi, count(*) AS n FROM muso.instances GROUP BY ALL ORDER BY task") == [
        {"task": "subsetsum", "level": 2, "level_lo": 51, "level_hi": None, "n": 2},
        {"task": "timetabling", "level": 2, "level_lo": 51, "level_hi": 100, "n": 2},
    ]
    counts = wh.rows("SELECT i.instance_id, i.solution_count, count(s.solution) AS stored FROM muso.instances i "
                     "JOIN muso.solutions s USING (instance_id) GROUP BY ALL")
    assert all(r["solution_count"] == r["stored"] and r["solution_count"] > 50 for r in counts)
    metrics = wh.rows("SELECT task, level_label, n_scored, precision, recall, ece_recall, retention, discovery "
                      "FROM muso.metrics WHERE model = 'stub' ORDER BY task, level")
    for m in metrics:
        assert (m["n_scored"], m["precision"], m["recall"], m["retention"], m["discovery"]) == (
            2 if m["level_label"] != "all" else 2, 1.0, 1.0, 1.0, 0.0)
        assert m["ece_recall"] == pytest.approx(0.0)
    assert {m["level_label"] for m in metrics} == {"51-100", "51+", "all"}


@pytest.mark.slow
def test_rematerialising_a_level_replaces_it(perfect_stub, tmp_path):
    cfg = stub_config(perfect_stub, tmp_path, muso=MUSO)
    defs = build_definitions(cfg.source)
    for _ in range(2):
        assert materialize(defs, ["muso_instances", "muso_responses"], "subsetsum_1-50").success
    wh = Warehouse(cfg.warehouse_path())
    assert wh.scalar("SELECT count(*) FROM muso.instances") == 2
    assert wh.scalar("SELECT count(*) FROM muso.responses") == 2
    assert wh.scalar("SELECT count(*) FROM (SELECT DISTINCT * FROM muso.solutions)") == wh.scalar(
        "SELECT count(*) FROM muso.solutions")


@pytest.mark.slow
def test_a_level_generated_ahead_in_the_worker_is_stored_exactly_as_one_built_inline(perfect_stub, tmp_path):
    """`materialize_all` generates the levels it will build in a worker process
    (`built_ahead`); the step takes its level from there and stores the same rows, with the same
    data version, as when it generates the level itself. A level not planned is built inline."""
    from configuration import load_config
    from runner.command import built_ahead

    cfg = stub_config(perfect_stub, tmp_path, muso=MUSO)
    defs = build_definitions(cfg.source)
    wh = Warehouse(cfg.warehouse_path())

    def build(pk):
        result = materialize(defs, ["muso_instances"], pk).results[0]
        assert result.success and all(c.passed for c in result.get_asset_check_evaluations())
        meta = result.asset_materializations_for_node("muso_instances")[0]
        stored = wh.rows("SELECT * FROM muso.instances WHERE partition_key = ? ORDER BY instance_id", [pk])
        solutions = wh.rows("SELECT * FROM muso.solutions WHERE partition_key = ? ORDER BY ALL", [pk])
        return meta, stored, solutions

    inline = build("timetabling_51-100")
    assert inline[0].metadata["generated_ahead"].value is False
    with built_ahead(load_config(cfg.source), {"muso": ["timetabling_51-100"]}):
        ahead_built = build("timetabling_51-100")
        other = build("subsetsum_51+")  # not planned: built here
    assert ahead_built[0].metadata["generated_ahead"].value is True
    assert set(ahead_built[0].metadata["build_seconds"].value) == {"generation", "rows", "waited", "validation", "write", "checks"}
    assert other[0].metadata["generated_ahead"].value is False
    assert ahead_built[1] == inline[1] and ahead_built[2] == inline[2] and len(inline[2]) > 100
    assert ahead_built[0].tags["dagster/data_version"] == inline[0].tags["dagster/data_version"]


def test_a_level_s_checks_read_what_the_warehouse_holds_and_its_time_is_reported(perfect_stub, tmp_path):
    """The level's gates count the stored solutions in SQL and read back only the sample CP-SAT
    re-enumerates: a solution row lost from the first instance breaks `counts_in_bin` and
    `enumerators_agree` for that instance; one lost beyond the sample breaks only the count. The
    step's metadata says where its time went."""
    from assets.muso import _level_checks
    from configuration import load_config
    from generators.muso import partitions

    cfg = stub_config(perfect_stub, tmp_path, muso={**MUSO, "cpsat_check_per_level": {"demo": 1, "paper": 1}})
    defs = build_definitions(cfg.source)
    result = materialize(defs, ["muso_instances"], "subsetsum_1-50")
    meta = result.results[0].asset_materializations_for_node("muso_instances")[0].metadata
    assert set(meta["build_seconds"].value) == {"generation", "rows", "validation", "write", "checks"}
    assert meta["build_seconds"].value["generation"] == meta["generation_seconds"].value
    wh = Warehouse(cfg.warehouse_path())
    first, second = [r["instance_id"] for r in wh.rows("SELECT instance_id FROM muso.instances ORDER BY 1")]
    cfg = load_config(cfg.source)
    task, _, b = partitions(cfg)["subsetsum_1-50"]

    def verdicts():
        return {c.name: c for c in _level_checks(wh, cfg, "subsetsum_1-50", task, b, 2)}

    assert all(c.passed for c in verdicts().values())
    with wh.connect() as con:
        con.execute("DELETE FROM muso.solutions WHERE instance_id = ? AND solution_index = 0", [second])
    got = verdicts()
    assert got["counts_in_bin"].metadata["violations"] == [second] and got["enumerators_agree"].passed
    with wh.connect() as con:
        con.execute("DELETE FROM muso.solutions WHERE instance_id = ? AND solution_index = 0", [first])
    got = verdicts()
    assert got["counts_in_bin"].metadata["violations"] == [first, second]
    assert got["enumerators_agree"].metadata["disagree"] == [first]


def tables(path):
    wh = Warehouse(path)
    return (wh.rows("SELECT * FROM muso.instances ORDER BY instance_id"),
            wh.rows("SELECT * FROM muso.solutions ORDER BY instance_id, solution_index"))


@pytest.mark.slow
def test_same_seed_identical_tables_other_seed_other_instances(perfect_stub, tmp_path):
    paths = {}
    for name, seed in (("a", 7), ("b", 7), ("c", 8)):
        (tmp_path / name).mkdir()
        cfg = stub_config(perfect_stub, tmp_path / name, muso=MUSO, seed=seed)
        defs = build_definitions(cfg.source)
        for pk in ("timetabling_1-50", "subsetsum_1-50"):
            assert materialize(defs, ["muso_instances"], pk).success
        paths[name] = cfg.warehouse_path()
    a, b, c = tables(paths["a"]), tables(paths["b"]), tables(paths["c"])
    assert a == b
    assert [r["parameters"] for r in a[0]] != [r["parameters"] for r in c[0]]


@pytest.mark.slow
def test_inserting_a_level_makes_the_metrics_check_fail_until_the_stale_bin_is_rebuilt(perfect_stub, tmp_path):
    cfg = stub_config(perfect_stub, tmp_path, muso=MUSO)
    assert materialize(build_definitions(cfg.source), ["muso_instances", "muso_responses"], "subsetsum_1-50").success
    # a level inserted in the middle: 1-50 becomes 1-25 and 26-50
    split = {**MUSO, "subsetsum": {"bins": [[1, 25], [26, 50], [51, None]]}}
    cfg2 = stub_config(perfect_stub, tmp_path, muso=split)
    result = materialize(build_definitions(cfg2.source), ["muso_metrics"])
    [check] = result.get_asset_check_evaluations()
    assert not check.passed and check.metadata["bins_not_configured"].value == ["subsetsum 1-50"]
    rows = Warehouse(cfg2.warehouse_path()).rows(
        "SELECT level, level_label FROM muso.metrics WHERE level IS DISTINCT FROM 0 AND variant = 'standard'")
    assert rows == [{"level": None, "level_label": "1-50"}]  # the stored bin, never renumbered into another


@pytest.mark.slow
def test_a_temperature_sweep_keeps_every_temperature(perfect_stub, tmp_path):
    cfg = stub_config(perfect_stub, tmp_path, muso={**MUSO, "temperature": [0.2, 0.7]})
    defs = build_definitions(cfg.source)
    assert materialize(defs, ["muso_instances", "muso_responses"], "subsetsum_1-50").success
    assert materialize(defs, ["muso_metrics"]).success
    wh = Warehouse(cfg.warehouse_path())
    assert wh.rows("SELECT temperature, count(*) AS n FROM muso.responses GROUP BY 1 ORDER BY 1") == [
        {"temperature": 0.2, "n": 2}, {"temperature": 0.7, "n": 2}]
    assert {r["temperature"] for r in wh.rows("SELECT temperature FROM muso.metrics")} == {0.2, 0.7}


@pytest.mark.slow
def test_each_model_runs_only_its_own_paradigms(perfect_stub, tmp_path):
    """Paper 001, section 3: Qwen3-8B is evaluated non-thinking as Short-CoT and thinking as Long-CoT, i.e.
    two configured models with one paradigm each, while a model without an entry runs `paradigms`."""
    models = {name: {"base_url": perfect_stub.base_url, "model": "stub-model"}
              for name in ("qwen3-nothink", "qwen3-think", "other")}
    cfg = stub_config(perfect_stub, tmp_path, models=models, evaluate=list(models), judge="other",
                      muso={**MUSO, "paradigms": ["short_cot", "long_cot"],
                            "model_paradigms": {"qwen3-nothink": ["short_cot"], "qwen3-think": ["long_cot"]}})
    defs = build_definitions(cfg.source)
    assert materialize(defs, ["muso_instances", "muso_responses"], "subsetsum_1-50").success
    wh = Warehouse(cfg.warehouse_path())
    got = {(r["model"], r["paradigm"]) for r in wh.rows("SELECT DISTINCT model, paradigm FROM muso.responses")}
    assert got == {("qwen3-nothink", "short_cot"), ("qwen3-think", "long_cot"),
                   ("other", "short_cot"), ("other", "long_cot")}


def test_model_paradigms_must_name_configured_models(tmp_path):
    from configuration import ConfigError, parse_config

    with pytest.raises(ConfigError, match=r"muso.model_paradigms.ghost: unknown model 'ghost'"):
        parse_config({"muso": {"model_paradigms": {"ghost": ["long_cot"]}}}, str(tmp_path / "c.yaml"))


@pytest.mark.slow
def test_each_response_keeps_its_solve_turns_length_beside_its_confidence(perfect_stub, tmp_path):
    """Paper 001, figure 5a: reasoning length against the stated confidence, per response."""
    cfg = stub_config(perfect_stub, tmp_path, muso=MUSO)
    defs = build_definitions(cfg.source)
    assert materialize(defs, ["muso_instances", "muso_responses"], "subsetsum_1-50").success
    wh = Warehouse(cfg.warehouse_path())
    rows = wh.rows("SELECT r.solve_tokens, r.confidence, c.completion_tokens FROM muso.responses r "
                   "JOIN llm.calls c ON c.key = (r.call_keys->>'$[0]')")
    assert rows and all(r["solve_tokens"] == r["completion_tokens"] > 0 and r["confidence"] == 100 for r in rows)


@pytest.mark.slow
def test_reflection_checkpoints_run_for_long_cot_models_into_the_responses_and_metrics(tmp_path):
    def thinking_model(body):
        last = body["messages"][-1]
        if last["role"] == "assistant" or "rate your confidence" in last["content"] or "Recheck" in last["content"]:
            return perfect_model({**body, "messages": body["messages"][:1] + [
                {"role": "user", "content": "rate your confidence" if "rate your confidence" in last["content"]
                 else "Recheck all your answers" if "Recheck" in last["content"] else ""}]})
        return "<think>\nA first try.\nWait, check the rest.\n</think>\n\n" + perfect_model(body)

    with StubServer(responder=thinking_model) as stub:
        cfg = stub_config(stub, tmp_path, muso={**MUSO, "paradigms": ["long_cot"], "reflection_checkpoints": [0]})
        defs = build_definitions(cfg.source)
        assert materialize(defs, ["muso_instances", "muso_responses"], "subsetsum_1-50").success
        assert materialize(defs, ["muso_metrics"]).success
    wh = Warehouse(cfg.warehouse_path())
    assert wh.rows("SELECT variant, count(*) AS n FROM muso.responses GROUP BY 1 ORDER BY 1") == [
        {"variant": "checkpoint_0", "n": 2}, {"variant": "standard", "n": 2}]
    assert wh.scalar("SELECT count(*) FROM muso.metrics WHERE variant = 'checkpoint_0'") > 0
    assert wh.scalar("SELECT count(*) FROM llm.calls WHERE purpose = 'muso.checkpoint.answer'") == 2
