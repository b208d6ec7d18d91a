"""Configuration: valid files load; bad ones fail naming the file, the key and the expectation."""

import re

import pytest

from configuration import ConfigError, load_config, parse_config
from tests.conftest import write_config


def test_repository_config_loads_with_embedded_default():
    cfg = load_config()
    assert cfg.scale == "demo"
    assert cfg.models["smollm2"].embedded == "smollm2-135m-instruct"
    assert cfg.evaluate == ["smollm2"]


def test_unknown_key_names_file_and_key(tmp_path):
    path = write_config(tmp_path, {"warehouse": {"pth": "x.duckdb"}})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(path) in str(err.value)
    assert "warehouse.pth: unknown key" in str(err.value)


def test_wrong_type_names_key_expectation_and_value(tmp_path):
    path = write_config(tmp_path, {"models": {"m": {"embedded": "smollm2-135m-instruct", "concurrency": "many"}},
                                   "evaluate": ["m"], "judge": "m"})
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert f"{path}: models.m.concurrency: expected an integer, got 'many'" in msg


def test_out_of_range_value_is_rejected():
    with pytest.raises(ConfigError, match=r"cfg.yaml: models.m.concurrency: expected a value that is greater than or equal to 1, got 0"):
        parse_config({"models": {"m": {"embedded": "smollm2-135m-instruct", "concurrency": 0}},
                      "evaluate": ["m"], "judge": "m"}, "cfg.yaml")


def test_unknown_model_referenced_by_evaluate_names_the_key():
    with pytest.raises(ConfigError) as err:
        parse_config({"evaluate": ["smollm2", "gpt9"]}, "cfg.yaml")
    assert "cfg.yaml: evaluate.1: unknown model 'gpt9'" in str(err.value)
    assert "smollm2" in str(err.value)


def test_unknown_judge_model_is_rejected():
    with pytest.raises(ConfigError, match=r"cfg.yaml: judge: unknown model 'nobody'"):
        parse_config({"judge": "nobody"}, "cfg.yaml")


def test_remote_model_needs_base_url_and_model():
    with pytest.raises(ConfigError, match=r"cfg.yaml: models.r: .*base_url"):
        parse_config({"models": {"r": {"model": "x"}}, "evaluate": ["r"], "judge": "r"}, "cfg.yaml")


def test_missing_api_key_variable_fails_when_the_model_is_used(monkeypatch):
    cfg = parse_config({"models": {"r": {"base_url": "http://h:1/v1", "model": "x", "api_key_env": "BENCH_TEST_KEY"}},
                        "evaluate": ["r"], "judge": "r"}, "cfg.yaml")  # loading alone is fine
    monkeypatch.delenv("BENCH_TEST_KEY", raising=False)
    with pytest.raises(ConfigError) as err:
        cfg.api_key("r")
    assert "cfg.yaml: models.r.api_key_env: environment variable BENCH_TEST_KEY is not set" in str(err.value)
    monkeypatch.setenv("BENCH_TEST_KEY", "sk-123")
    assert cfg.api_key("r") == "sk-123"


def test_invalid_yaml_names_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("scale: demo\nmodels: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: line \d+, column \d+: not valid YAML"):
        load_config(path)


def test_missing_file_names_the_path(tmp_path):
    with pytest.raises(ConfigError, match="nope.yaml: configuration file not found"):
        load_config(tmp_path / "nope.yaml")


def test_warehouse_path_is_relative_to_the_config_file(tmp_path):
    path = write_config(tmp_path, {"warehouse": {"path": "sub/wh.duckdb"}})
    assert load_config(path).warehouse_path() == tmp_path / "sub" / "wh.duckdb"


def test_scale_accepts_only_demo_or_paper():
    with pytest.raises(ConfigError, match=r"cfg.yaml: scale: expected 'demo' or 'paper', got 'huge'"):
        parse_config({"scale": "huge"}, "cfg.yaml")


def test_s1_budgets_fit_each_task_per_scale_and_a_single_number_serves_both_scales():
    cfg = parse_config({"s1": {"validator_max_tokens": 64}})
    s = cfg.s1
    assert (s.eval_max_tokens.paper, s.generation_max_tokens.paper) == (10000, 8192)  # the paper's evaluation budget
    assert s.discrimination_max_tokens.paper > 512 and s.reduction_max_tokens.paper > 256
    assert (s.validator_max_tokens.demo, s.validator_max_tokens.paper) == (64, 64)


def test_muso_temperature_may_be_a_sweep_and_the_confidence_turn_has_the_paper_budget():
    cfg = parse_config({"muso": {"temperature": [0.2, 1.0]}})
    assert cfg.muso.temperatures == [0.2, 1.0] and cfg.muso.confidence_max_tokens.paper == 20480
    with pytest.raises(ValueError, match="temperature"):
        parse_config({"muso": {"temperature": [0.2, 3.0]}})


def test_a_model_can_be_declared_a_reasoning_model():
    cfg = parse_config({"models": {"r1": {"base_url": "http://127.0.0.1:8000/v1", "model": "deepseek-r1",
                                          "reasoning": True}}, "evaluate": ["r1"], "judge": "r1"})
    assert cfg.models["r1"].reasoning and not parse_config({}).models["smollm2"].reasoning


def test_relative_source_paths_resolve_beside_the_config_file_like_the_warehouse(tmp_path, monkeypatch):
    cfg_dir = tmp_path / "project"
    cfg_dir.mkdir()
    path = write_config(cfg_dir, {
        "warehouse": {"path": "data/wh.duckdb"},
        "waken": {"datasets": {"folio": {"kind": "folio", "form": "story", "count": {"demo": 2, "paper": 640},
                                         "source": {"path": "releases/folio_validation.jsonl"}}}},
        "ib": {"datasets": {"mmlu": {"form": "single", "count": {"demo": 2, "paper": 50},
                                     "source": {"kind": "mmlu", "path": "releases/mmlu"}}},
               "miscellany": {"form": "single", "count": {"demo": 1, "paper": 300},
                              "source": {"kind": "mmlu_pro", "path": "/abs/mmlu_pro.jsonl"}}},
    })
    monkeypatch.chdir(tmp_path)  # the working directory is elsewhere
    cfg = load_config(path)
    assert cfg.warehouse_path() == cfg_dir / "data" / "wh.duckdb"
    assert cfg.waken.datasets["folio"].source.path == str(cfg_dir / "releases" / "folio_validation.jsonl")
    assert cfg.ib.datasets["mmlu"].source.path == str(cfg_dir / "releases" / "mmlu")
    assert cfg.ib.miscellany.source.path == "/abs/mmlu_pro.jsonl"  # absolute paths stay


def test_a_relative_local_copy_of_a_hub_dataset_resolves_beside_the_config_file(tmp_path, monkeypatch):
    cfg_dir = tmp_path / "project"
    (cfg_dir / "data" / "FLD.v2").mkdir(parents=True)
    path = write_config(cfg_dir, {"waken": {"datasets": {
        "fld_local": {"kind": "fld", "count": {"demo": 2, "paper": 600},
                      "source": {"hub": "data/FLD.v2", "config": "default"}},
        "fld_dot": {"kind": "fld", "count": {"demo": 2, "paper": 600}, "source": {"hub": "./elsewhere/FLD.v2"}},
        "fld_hub": {"kind": "fld", "count": {"demo": 2, "paper": 600}, "source": {"hub": "hitachi-nlp/FLD.v2"}}}}})
    monkeypatch.chdir(tmp_path)
    datasets = load_config(path).waken.datasets
    assert datasets["fld_local"].source.hub == str(cfg_dir / "data" / "FLD.v2")
    assert datasets["fld_dot"].source.hub == str(cfg_dir / "elsewhere" / "FLD.v2")
    assert datasets["fld_hub"].source.hub == "hitachi-nlp/FLD.v2"  # a hub id stays a hub id


def test_a_seed_beyond_a_bigint_is_refused_when_the_file_is_read(tmp_path):
    with pytest.raises(ConfigError, match=r"seed: expected a value that is less than 9223372036854775808"):
        parse_config({"seed": 10 ** 25}, str(tmp_path / "c.yaml"))
    with pytest.raises(ConfigError, match=r"seed: expected a value that is greater than or equal to 0"):
        parse_config({"seed": -1}, str(tmp_path / "c.yaml"))


def test_a_yaml_alias_bomb_is_refused_at_once_and_errors_quote_values_briefly(tmp_path):
    import time

    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdef", "bcdefg"):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 10) + "]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\nseed: *g\n")
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match=r"bomb.yaml: more than 100,000 values once its aliases"):
        load_config(bomb)
    assert time.monotonic() - t0 < 5
    big = tmp_path / "big.yaml"  # a long bad value is quoted briefly, with its length
    big.write_text("seed: [" + ",".join(["1"] * 5000) + "]\n")
    with pytest.raises(ConfigError) as err:
        load_config(big)
    assert len(str(err.value)) < 400 and "characters)" in str(err.value)


def test_each_configuration_list_is_the_one_its_code_implements():
    """The settings, baselines and generators are named once, in the configuration; the code that
    implements them has exactly those."""
    from configuration import IB_GENERATOR_FORMS, IB_SETTINGS, WAKEN_BASELINES
    from evaluations import ib, waken
    from generators import ib as ib_gen

    assert set(ib_gen.GENERATORS) == set(IB_GENERATOR_FORMS)
    assert ib.SETTINGS == IB_SETTINGS
    assert set(waken.BASELINE_PREFIX) == set(WAKEN_BASELINES)


def test_a_configuration_not_in_utf8_is_refused_naming_the_line_not_a_traceback(tmp_path):
    """D13: a configuration saved as cp1252 (Windows' default) ended in a bare UnicodeDecodeError."""
    path = tmp_path / "benchsmith.yaml"
    path.write_bytes("scale: demo\n# caf\u00e9 \u2013 notes\n".encode("cp1252"))
    with pytest.raises(ConfigError, match=r"benchsmith.yaml: line 2: not UTF-8 text .*save the file as UTF-8"):
        load_config(path)


@pytest.mark.parametrize("section, message", [
    ({"release": {"load": {"mmlu": "data/releases/mmlu-1"}}}, "no family 'mmlu'"),
    ({"release": {"source_licenses": {"scienceqa": "cc-by-4.0"}}},
     "scienceqa: its authors release it under cc-by-nc-sa-4.0; a configuration cannot relabel it cc-by-4.0"),
    ({"release": {"source_licenses": {"multirc": "free-for-all"}}}, "'free-for-all' is no licence Benchsmith knows"),
    ({"release": {"generated_license": "public"}}, "'public' is no licence Benchsmith knows"),
    ({"models": {"m": {"base_url": "http://h/v1", "model": "x", "batch": {"mode": "api", "completion_window": "forever"}}},
      "evaluate": ["m"], "judge": "m"}, "completion_window"),
])
def test_release_and_batch_settings_that_cannot_hold_are_refused(tmp_path, section, message):
    """D13: an unknown family under release.load, a source's licence relabelled, an unknown licence and
    a completion window no provider takes were accepted."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(write_config(tmp_path, section))


def test_a_licence_for_a_source_not_known_here_may_be_given():
    cfg = parse_config({"release": {"source_licenses": {"multirc": "cc-by-sa-4.0", "fld": "cc-by-4.0"}}})
    assert cfg.release.source_licenses["multirc"] == "cc-by-sa-4.0"
