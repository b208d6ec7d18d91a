"""S1-Bench assets end to end on a stub reasoning model that knows the answers: construction,
evaluation and the paper's tables."""

import json
import re
from pathlib import Path

import dagster as dg
import pytest

from assets.definitions import build_definitions
from generators.s1 import ELEMENTS, WORKS
from llm_calls.stub_server import StubServer
from tests.conftest import materialize, stub_config
from warehouse import Warehouse


def knows_the_answers(body):
    q = body["messages"][-1]["content"]
    for name, name_zh, symbol in ELEMENTS:
        if f"symbol for {name}?" in q or q.startswith(f"{name_zh}的化学符号"):
            return f"<think>\nA simple question.\n</think>\n\n{symbol}"
    for work, work_zh, author, author_zh in WORKS:
        if f"author of {work}?" in q:
            return f"<think>\nEasy.\n</think>\n\n{author}"
        if q.startswith(work_zh):
            return f"<think>\n简单。\n</think>\n\n{author_zh}"
    return None


@pytest.fixture
def run(tmp_path):
    with StubServer(responder=knows_the_answers) as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "concurrency": 4, "reasoning": True}})
        defs = build_definitions(cfg.source)
        results = [materialize(defs, [key]) for key in ("s1_items", "s1_responses", "s1_metrics")]
        yield results, Warehouse(cfg.warehouse_path())


@pytest.mark.slow
def test_construction_evaluation_and_tables(run):
    results, wh = run
    assert all(r.success for r in results)
    items = wh.rows("SELECT language, count(*) AS n FROM s1.items GROUP BY 1 ORDER BY 1")
    assert items == [{"language": "en", "n": 2}, {"language": "zh", "n": 2}]
    assert wh.scalar("SELECT count(*) FROM s1.responses WHERE NOT well_formatted OR NOT correct") == 0
    [t3] = wh.rows("SELECT * FROM s1.table3")
    assert (t3["pass@1"], t3["acc@k"], t3["f-acc"]) == (100.0, 100.0, 100.0)
    [t20] = wh.rows('SELECT "100" FROM s1.table20')
    assert t20["100"] == 100.0
    validator_budgets = {r["mt"] for r in wh.rows(
        "SELECT DISTINCT CAST(request->'$.params.max_tokens' AS INTEGER) AS mt FROM llm.calls WHERE purpose = 's1.validate'")}
    assert validator_budgets == {48}  # the demo scale's validator budget


@pytest.mark.slow
def test_tokens_are_counted_with_one_tokenizer_for_every_model_and_the_servers_count_kept(run):
    """Paper 002, section 3.2: every model's tokens by the Qwen2.5 tokenizer "to ensure fair comparison";
    the server's own count (here the stub's word count) stays beside it."""
    from validators.s1 import count_tokens

    _, wh = run
    rows = wh.rows("SELECT reply, tokens, completion_tokens FROM s1.responses")
    # the thinking part's tokens plus the answer part's, the markers left out (the authors' count)
    from validators.s1_read import format_type

    def parts(reply):
        fmt, thinking, answer = format_type(reply, "stop")
        return reply if fmt in (207, 301) else (thinking, answer)

    def counted(reply):
        got = parts(reply)
        return count_tokens(got) if isinstance(got, str) else sum(count_tokens(p) for p in got if p)

    assert rows and all(r["tokens"] == counted(r["reply"]) for r in rows)
    assert any(r["tokens"] < count_tokens(r["reply"]) for r in rows if "</think>" in r["reply"])
    assert any(r["tokens"] != r["completion_tokens"] for r in rows)
    mean = wh.scalar("SELECT value FROM s1.metrics WHERE metric = 'mean_tokens' AND level = 'all'")
    server = wh.scalar("SELECT value FROM s1.metrics WHERE metric = 'mean_server_tokens' AND level = 'all'")
    sampled = wh.rows("SELECT tokens, completion_tokens FROM s1.responses WHERE mode = 'sample'")
    assert mean == pytest.approx(sum(r["tokens"] for r in sampled) / len(sampled))
    assert server == pytest.approx(sum(r["completion_tokens"] for r in sampled) / len(sampled))
    [t3] = wh.rows("SELECT * FROM s1.table3")
    assert t3["Tokens"] == round(mean, 2)


def test_the_tokenizer_is_qwen25s():
    """Known counts of Qwen2.5's byte-level BPE: "<think>" is not one token there (it is in Qwen3)."""
    from validators.s1 import count_tokens

    assert count_tokens("Hello world") == 2
    assert count_tokens("<think>") == 3
    assert count_tokens("") == 0


RELEASE = Path(__file__).parent / "fixtures" / "sources" / "s1bench_release" / "S1-Bench.json"
ANSWERS = {"chemical symbol for gold": "Au", "Pride and Prejudice": "Jane Austen", "铁的化学符号": "Fe",
           '"moon"': "MOON"}


def answers_and_grades(body):
    """A reasoning model that knows the released items' answers, and a judge that grades by the ground truth."""
    q = body["messages"][-1]["content"]
    if q.startswith("**Question:**"):
        answer = q.split("**Model Answer:**\n", 1)[1].split("\n\n**Ground Truth:**", 1)[0]
        truth = q.split("**Ground Truth:**\n", 1)[1].split("\n\n", 1)[0]
        return f'{{"explain": "compared", "result": {int(truth in answer)}}}'
    for cue, answer in ANSWERS.items():
        if cue in q:
            return f"<think>\nEasy.\n</think>\n\n{answer}"
    return None


@pytest.mark.slow
def test_the_released_benchmark_is_evaluated_without_building_one(tmp_path):
    """Paper 002's released items (the authors' S1-Bench.json: a list of items with ID, question, answer)
    load as a source: `build: false` evaluates only them; the judge grades against `answer`."""
    with StubServer(responder=answers_and_grades) as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "concurrency": 4, "reasoning": True}},
                          s1={"release": str(RELEASE), "build": False})
        defs = build_definitions(cfg.source)
        results = [materialize(defs, [key]) for key in ("s1_items", "s1_responses", "s1_metrics")]
    assert all(r.success for r in results)
    wh = Warehouse(cfg.warehouse_path())
    items = wh.rows("SELECT item_id, language, category, origin FROM s1.items ORDER BY item_id")
    assert [(i["item_id"], i["language"], i["category"]) for i in items] == [
        ("release-1", "en", "knowledge"), ("release-2", "en", "knowledge"), ("release-3", "zh", "knowledge"),
        ("release-4", "en", "instruction following")]
    assert {i["origin"] for i in items} == {"release:S1-Bench.json"}
    assert wh.scalar("SELECT count(*) FROM s1.candidates") == 0  # nothing was built
    [t3] = wh.rows("SELECT * FROM s1.table3")
    assert (t3["pass@1"], t3["acc@k"]) == (100.0, 100.0)
    assert wh.rows("SELECT DISTINCT method FROM s1.responses") == [{"method": "judge"}]


def s11_answers_and_grades(body):
    """s1.1 as its authors serve it: it continues the prefill "<|im_start|>think", thinks, then answers
    after "<|im_start|>answer"; the judge grades by the ground truth."""
    q = body["messages"][0]["content"] if body["messages"][-1]["role"] == "assistant" else body["messages"][-1]["content"]
    if q.startswith("**Question:**"):
        return answers_and_grades(body)
    for cue, answer in ANSWERS.items():
        if cue in q:
            return f"\nThe question asks for {cue}. That is {answer}.\n<|im_start|>answer\nAnswer: {answer}"
    return None


@pytest.mark.slow
def test_s1_1_is_scored_on_the_answer_after_its_own_marker(tmp_path):
    """Paper 002, table 3 prints s1.1-7B at pass@1 88.58, f-acc 88.96: s1.1 closes its thinking with
    "<|im_start|>answer", not "</think>". Its replies are standard (format 100), judged on the answer part,
    and their tokens count the thinking and the answer without the markers."""
    with StubServer(responder=s11_answers_and_grades) as stub:
        cfg = stub_config(stub, tmp_path, models={
            "stub": {"base_url": stub.base_url, "model": "stub-model", "concurrency": 4},
            "s11": {"base_url": stub.base_url, "model": "simplescaling/s1.1-7B", "concurrency": 4, "reasoning": True,
                    "prefill": "<|im_start|>think"}},
            evaluate=["s11"], judge="stub", s1={"release": str(RELEASE), "build": False})
        defs = build_definitions(cfg.source)
        results = [materialize(defs, [key]) for key in ("s1_items", "s1_responses", "s1_metrics")]
    assert all(r.success for r in results)
    wh = Warehouse(cfg.warehouse_path())
    assert wh.rows("SELECT DISTINCT format_type, well_formatted FROM s1.responses") == [
        {"format_type": 100, "well_formatted": True}]
    [t3] = wh.rows("SELECT * FROM s1.table3 WHERE model = 's11'")
    assert (t3["pass@1"], t3["acc@k"], t3["f-acc"]) == (100.0, 100.0, 100.0)
    from validators.s1 import count_tokens

    reply = wh.rows("SELECT reply, tokens FROM s1.responses WHERE item_id = 'release-1' LIMIT 1")[0]
    assert reply["reply"].startswith("<|im_start|>think")  # the prefill put back
    assert reply["tokens"] == count_tokens("The question asks for chemical symbol for gold. That is Au.") \
        + count_tokens("Answer: Au") < count_tokens(reply["reply"])


_ITEM = '"question": "q", "answer": "a", "language": "en", "category": "reasoning_question", ' \
        '"sub_category": "numerical_reasoning"'


@pytest.mark.parametrize("text, error", [
    ('{"ID": 1}', "expected a JSON list of items"),
    ('[{"ID": 1, "question": "q"}]', "item 0: field 'answer' is missing or empty"),
    (f'[{{"ID": 1, {_ITEM}}}, {{"ID": 1, {_ITEM}}}]', "item 1 (ID 1): ID 1 appears twice"),
    ('[{"ID": 1, "question": "q", "answer": "a"', "not JSON (line 1"),
    ('[{"ID": 7, "question": "q", "answer": "a", "category": "reasoning_question"}]',
     "item 0 (ID 7): field 'sub_category' is missing or empty"),
    ('[{"ID": 7, "question": "q", "answer": "a", "category": "reasoning_question", "sub_category": "riddles"}]',
     "item 0 (ID 7): field 'sub_category' is 'riddles', which names no subcategory of the registry"),
    ('[{"ID": 7, "question": "q", "answer": "a", "category": "trivia_question", "sub_category": "numerical_reasoning"}]',
     "item 0 (ID 7): field 'category' is 'trivia_question'"),
    ('[{"ID": 7, "question": "q", "answer": "a", "category": "analysis_question", '
     '"sub_category": "numerical_reasoning"}]',
     "item 0 (ID 7): field 'category' is 'analysis_question' but subcategory 'numerical reasoning' belongs to "
     "'reasoning'"),
    (f'[{{"ID": 7, {_ITEM.replace(chr(34) + "en" + chr(34), chr(34) + "fr" + chr(34))}}}]',
     "item 0 (ID 7): field 'language' is 'fr'"),
])
def test_a_bad_release_file_is_named_with_its_item_and_field(tmp_path, text, error):
    from generators.s1 import load_release

    path = tmp_path / "S1-Bench.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(f"{path}: ") + ".*" + re.escape(error)):
        load_release(path)


def test_the_release_layout_keeps_every_field_with_the_authors_label_names_mapped(tmp_path):
    """The S1-Bench release as the authors' dataset card prints it: a JSON list of {ID, question, answer,
    language, category, sub_category} with their category names (`reasoning_question`,
    `analysis_questions`, ...). Every label maps to the registry's names; the language is kept as
    marked, also where the question's script says otherwise."""
    from generators.s1 import load_release

    path = tmp_path / "S1-Bench.json"
    path.write_text(json.dumps([
        {"ID": 11, "question": "What is 2 plus 2?", "answer": "4", "language": "en",
         "category": "reasoning_question", "sub_category": "numerical_reasoning"},
        {"ID": 12, "question": "“gracias”是西班牙语还是德语？", "answer": "西班牙语", "language": "zh",
         "category": "analysis_questions", "sub_category": "language_classification"},
        {"ID": 13, "question": "输出字母“Q”", "answer": "Q", "language": "en",
         "category": "instruction_following", "sub_category": "repetition_constraints"},
        {"ID": 14, "question": "How many grams are in a kilogram?", "answer": "1000", "language": "en",
         "category": "knowledge_question", "sub_category": "measurement_units"}], ensure_ascii=False),
        encoding="utf-8")
    rows = load_release(path)
    assert [(r["item_id"], r["category"], r["subcategory"], r["language"]) for r in rows] == [
        ("release-11", "reasoning", "numerical reasoning", "en"),
        ("release-12", "analysis", "language classification", "zh"),
        ("release-13", "instruction following", "repetition constraints", "en"),  # marked en, kept as marked
        ("release-14", "knowledge", "measurement units", "en")]
    assert all(r["question"] and r["answer"] for r in rows) and "unlabelled" not in str(rows)


@pytest.mark.slow
def test_table2_sweeps_the_listed_models_at_three_temperatures_on_the_final_items(tmp_path):
    """Paper 002, table 2: each small LLM sampled 10 times at t = 0, 0.2, 0.4 on the final items; acc@10
    per temperature (items with all 10 right) and the mean tokens. Here 2 samples, to stay small."""
    with StubServer(responder=knows_the_answers) as stub:
        cfg = stub_config(stub, tmp_path, models={
            "stub": {"base_url": stub.base_url, "model": "stub-model", "concurrency": 4, "reasoning": True},
            "small": {"base_url": stub.base_url, "model": "small-llm", "concurrency": 4}},
            evaluate=["stub", "small"], s1={"table2_models": ["small"], "samples_per_temperature": 2})
        defs = build_definitions(cfg.source)
        results = [materialize(defs, [key]) for key in ("s1_items", "s1_responses", "s1_metrics")]
    assert all(r.success for r in results)
    wh = Warehouse(cfg.warehouse_path())
    modes = {(r["model"], r["mode"]): r["n"] for r in wh.rows(
        "SELECT model, mode, count(*) AS n FROM s1.responses GROUP BY ALL")}
    items = wh.scalar("SELECT count(*) FROM s1.items")
    assert modes[("small", "t=0.2")] == 2 * items and ("stub", "t=0.2") not in modes
    [t2] = wh.rows("SELECT * FROM s1.table2")
    assert t2["model"] == "small" and (t2["t=0.0"], t2["t=0.2"], t2["t=0.4"]) == (100.0, 100.0, 100.0)
    temps = {r["t"] for r in wh.rows("SELECT DISTINCT CAST(request->'$.params.temperature' AS DOUBLE) AS t "
                                     "FROM llm.calls WHERE model = 'small'")}
    assert {0.0, 0.2, 0.4} <= temps
    assert t2["Tokens"] == round(wh.scalar("SELECT avg(tokens) FROM s1.responses WHERE mode LIKE 't=%'"), 2)


@pytest.mark.slow
def test_a_subcategory_that_yields_no_accepted_question_is_named_not_passed_silently(tmp_path):
    def knows_only_symbols(body):  # the chemical symbols (scientific notation), in both languages
        reply = knows_the_answers(body)
        return reply if reply and "A simple question" in reply else "<think>\nHm.\n</think>\n\nno idea"

    with StubServer(responder=knows_only_symbols) as stub:
        cfg = stub_config(stub, tmp_path, models={"stub": {"base_url": stub.base_url, "model": "stub-model",
                                                           "concurrency": 4, "reasoning": True}})
        result = materialize(build_definitions(cfg.source), ["s1_items"])
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == "every_subcategory_accepted"]
    assert result.success and not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    empty = check.metadata["empty"].value
    assert [e.split(":")[0] for e in empty] == ["creative authorship [en]", "creative authorship [zh]"]
    assert all("candidate versions accepted" in e for e in empty)


def test_the_demo_scale_names_what_it_leaves_out():
    from configuration import parse_config
    from reporting.summary import left_out_at_demo

    cfg = parse_config({"muso": {"demo_levels": 1, "timetabling": {"bins": [[1, 50], [51, 100], [101, 200]]},
                                 "subsetsum": {"bins": [[1, 50]]}},
                        "s1": {"subcategories": ["scientific notation", "counting"]}}, "cfg.yaml")
    assert left_out_at_demo(cfg) == [
        "MuSoBench timetabling: levels 51-100, 101-200 not built (muso.demo_levels: 1; scale: paper builds every level)",
        "S1-Bench: subcategories counting not built (demo scale builds s1.demo_subcategories: scientific notation, "
        "creative authorship)"]
    assert left_out_at_demo(parse_config({"scale": "paper", "muso": {"demo_levels": 1}}, "cfg.yaml")) == []
