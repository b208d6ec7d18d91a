"""S1-Bench parts: registry, programmatic generators (checked independently), parsers, formats, metrics."""

import random
import re

import pytest

from evaluations.s1 import metric_rows
from generators.s1 import PROGRAMMATIC, load_registry, parse_pairs
from validators.judge import parse_judgement
from validators.s1 import difficulty_awareness, near_duplicates
from validators.s1_read import check_answer, format_type, read_verdict


def test_registry_has_28_subcategories_in_4_categories_in_both_languages():
    reg = load_registry()
    assert len(reg.subcategories) == 28
    counts = {}
    for s in reg.subcategories.values():
        counts[s.category] = counts.get(s.category, 0) + 1
        assert s.definition["en"] and s.definition["zh"]
        assert re.search(r"[\u4e00-\u9fff]", s.definition["zh"]) and re.search(r"[\u4e00-\u9fff]", s.example["question_zh"])
        assert s.example["question_en"] and s.example["answer_en"] and s.example["answer_zh"]
    assert counts == {"reasoning": 7, "knowledge": 7, "instruction following": 6, "analysis": 8}
    assert reg.criteria("numerical reasoning", "zh") and reg.general_criteria["en"]


def test_registry_missing_translation_names_file_and_entry(tmp_path):
    text = (load_registry.__globals__["REGISTRY_PATH"]).read_text(encoding="utf-8")
    bad = tmp_path / "reg.yaml"
    bad.write_text(text.replace("zh: 基本算术或一步方程，答案是一个数。", "zh: ''"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"reg.yaml: reasoning / numerical reasoning: definition.zh is missing"):
        load_registry(bad)


def independent_answer(c):
    """Recompute each programmatic answer from the question text, by other means than the generator."""
    q = c.question
    nums = [int(x) for x in re.findall(r"\d+", q)]
    if c.subcategory == "numerical reasoning":
        return str(sum(nums))
    if c.subcategory == "temporal reasoning":
        return str(nums[0] * 60)
    if c.subcategory == "measurement units":
        return str(nums[0] * 100)
    if c.subcategory == "counting constraints":
        letter, word = re.findall(r'"([^"]+)"', q)
        return str(sum(1 for ch in word if ch == letter))
    if c.subcategory == "transformation constraints":
        return "".join(chr(ord(ch) - 32) for ch in re.findall(r'"([^"]+)"', q)[0])
    if c.subcategory == "code reasoning":
        return str(len(re.search(r'word = "([^"]+)"', q).group(1)))
    return None


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("name", sorted(PROGRAMMATIC))
def test_programmatic_answers_pass_an_independent_check(name, lang):
    rng = random.Random(11)
    for _ in range(15):
        c = PROGRAMMATIC[name](rng, lang)
        assert c.subcategory == name and c.language == lang and c.check
        expected = independent_answer(c)
        if expected is not None:
            assert c.answer == expected and check_reply(f"The answer is {expected}.", c.check, c.question)
        elif c.check["type"] in ("pattern", "symbol"):
            n = {"two": 2, "three": 3, "four": 4, "five": 5, "两": 2, "三": 3, "四": 4, "五": 5}
            if name == "length constraints":
                digits = next(v for k, v in n.items() if k in c.question)
                assert check_reply("9" * digits, c.check) and not check_reply("9" * (digits + 1), c.check)
            elif name == "character constraints":
                d = re.search(r"(\d)", c.question).group(1)
                assert check_reply(f"{d}42", c.check) and not check_reply(f"0{d}", c.check)
            elif name == "scientific notation":
                symbol = c.answer
                assert check_reply(f"The symbol is {symbol}.", c.check) and not check_reply("Xx", c.check)
        else:
            assert check_reply(c.answer, c.check, c.question)
        if name == "repetition constraints":
            ch = re.search(r'"(\w)"', c.question).group(1)
            assert set(c.answer) == {ch} and check_reply(c.answer, c.check) and not check_reply(c.answer + ch, c.check)


def check_reply(reply, check, question=""):
    return check_answer(reply, check, question)


def test_exact_check_needs_a_whole_token():
    check = {"type": "exact", "answers": ["5"]}
    assert check_reply("It is 5.", check) and not check_reply("It is 15.", check) and not check_reply("", check)
    assert check_reply("答案是莎士比亚", {"type": "exact", "answers": ["莎士比亚"]})


def test_parse_pairs_is_robust():
    text = ("Here you go:\n1. [question] What is 2+2?\n[answer]: 4\n2. [Question]二加二等于几？[Answer] 4\n"
            "[question] a question without answer")
    assert parse_pairs(text) == [("en", "What is 2+2?", "4"), ("zh", "二加二等于几？", "4")]
    assert parse_pairs("no markers at all") == [] and parse_pairs(None) == []


@pytest.mark.parametrize("reply,result", [
    ('{"explain": "contains Paris", "result": 1}', 1),
    ('Sure! ```json\n{"explain": "no", "result": 0}\n```', 0),
    ('"explain": "matches", "result": 1', 1),
    ('“explain”: “fine”, “result”: 1', 1),
    ('{"explain": "x", "result": "1"}', 1),
])
def test_judge_json_parsing(reply, result):
    assert parse_judgement(reply)[0] == result


@pytest.mark.parametrize("reply", ["", "I think it is correct.", '{"explain": "x", "result": 2}', '{"explain": "x"'])
def test_malformed_judge_replies_are_unreadable_not_correct(reply):
    assert parse_judgement(reply)[0] is None


def test_discriminator_verdicts():
    assert read_verdict("Looks fine.\nVerdict: retain")[0] == "retain"
    assert read_verdict("Ambiguous.\n**Verdict:** Discard")[0] == "discard"
    assert read_verdict("Verdict: retain ... on reflection Verdict: modify")[0] == "modify"
    assert read_verdict("no verdict here")[0] == "unparsed"


@pytest.mark.parametrize("reply,finish,fmt", [
    ("<think>2+3 is 5</think>The answer is 5.", "stop", 100),
    ("</think>The answer is 5.", "stop", 101),
    ("<think>2+3 is 5</think>", "stop", 200),
    ("<think>a</think>b</think>The answer is 5.", "stop", 201),
    ("<think>a</think>b</think>", "stop", 202),
    ("</think></think>The answer is 5.", "stop", 203),
    ("<|begin_of_thought|>a<|end_of_thought|>The answer is 5.", "stop", 204),
    ("<|begin_of_thought|>a<|end_of_thought|>", "stop", 205),
    ("<|end_of_thought|>The answer is 5.", "stop", 206),
    ("The answer is 5.", "stop", 207),
    ("</think>", "stop", 300),
    ("and so on and so on and so on", "length", 301),
])
def test_every_format_type(reply, finish, fmt):
    assert format_type(reply, finish)[0] == fmt


def test_thinking_and_answer_split():
    _, thinking, answer = format_type("<think>two plus three</think>\nFive.", "stop")
    assert thinking == "two plus three" and answer == "Five."


@pytest.mark.parametrize("text,cls", [
    ("Hmm, this question seems very simple. Two plus three...", 1),
    ("This looks a bit complex, let me think.", 2),
    ("Interesting, this is not hard.", 3),
    ("This question seems not complicated, though tricky later.", 3),
    ("The user asks about birds and feathers.", 4),
    ("这个问题看起来挺简单的", 1),
])
def test_difficulty_awareness(text, cls):
    assert difficulty_awareness(text) == cls


def test_near_duplicates_with_minilm():
    dup = near_duplicates(["What is two plus three?", "Who wrote Hamlet?", "What is 2 plus 3?"], 0.85)
    assert list(dup) == [2] and dup[2][0] == 0 and dup[2][1] > 0.85
    assert near_duplicates(["Who wrote Hamlet?"], 0.85, earlier=["Who is the author of Hamlet?"]) != {}


def resp(item, mode, s, correct, fmt=207, tokens=10, well=None, language="en", method="exact"):
    return {"item_id": item, "mode": mode, "sample_index": s, "correct": correct, "format_type": fmt,
            "tokens": tokens, "completion_tokens": tokens, "difficulty_class": 4, "redundancy": None, "well_formatted": well,
            "category": "knowledge", "subcategory": "geographic facts", "language": language, "method": method}


def test_pass_at_1_and_acc_at_k_hand_computed():
    rows = ([resp("a", "sample", s, True) for s in range(5)] + [resp("b", "sample", s, s < 3) for s in range(5)]
            + [resp("a", "greedy", 0, True), resp("b", "greedy", 0, False)])
    rows[5]["format_type"] = 301
    m = {(r["level"], r["metric"], r["category"]): r["value"] for r in metric_rows("m", rows, 5)}
    assert m[("all", "pass@1", "-")] == pytest.approx((1.0 + 3 / 5) / 2)
    assert m[("all", "acc@5", "-")] == pytest.approx(1 / 2)
    assert m[("all", "greedy_acc", "-")] == pytest.approx(1 / 2)
    assert m[("all", "loose_format", "-")] == pytest.approx(9 / 10)
    assert m[("all", "strict_format", "-")] == 0.0
    assert m[("subcategory", "mean_tokens", "-")] == pytest.approx(10)


def test_reasoning_model_accuracy_counts_only_well_formatted_replies_and_tokens_skip_endless_ones():
    # item a: 5 well formatted correct; item b: 3 well formatted correct, 1 malformed (207), 1 endless (301)
    rows = ([resp("a", "sample", s, True, fmt=100, well=True, tokens=20) for s in range(5)]
            + [resp("b", "sample", s, True, fmt=100, well=True, tokens=20) for s in range(3)]
            + [resp("b", "sample", 3, False, fmt=207, well=False, method="malformed", tokens=40),
               resp("b", "sample", 4, False, fmt=301, well=False, method="malformed", tokens=1000),
               resp("a", "greedy", 0, True, fmt=100, well=True), resp("b", "greedy", 0, False, fmt=204, well=False)])
    m = {(r["level"], r["metric"], r["category"]): r["value"] for r in metric_rows("m", rows, 5)}
    assert m[("all", "pass@1", "-")] == pytest.approx((1.0 + 3 / 5) / 2)
    assert m[("all", "f-acc", "-")] == pytest.approx(8 / 10) and m[("all", "pass@1", "-")] <= m[("all", "f-acc", "-")]
    assert m[("all", "acc@5", "-")] == pytest.approx(1 / 2)
    assert m[("all", "mean_tokens", "-")] == pytest.approx((8 * 20 + 40) / 9)  # the 301 reply is left out
    assert m[("all", "greedy_f-acc", "-")] == pytest.approx(1 / 2) and m[("all", "greedy_acc", "-")] == 0.5
    assert m[("all", "format_type", "301")] == pytest.approx(1 / 10) and m[("all", "format_type", "205")] == 0.0


def test_models_that_do_not_think_have_no_format_accuracy():
    rows = [resp("a", "sample", s, True) for s in range(5)]
    m = {(r["level"], r["metric"], r["category"]): r["value"] for r in metric_rows("m", rows, 5)}
    assert m[("all", "f-acc", "-")] is None and m[("all", "pass@1", "-")] == 1.0


def test_language_and_category_scopes_for_table5():
    rows = [resp("a", "sample", 0, True, tokens=10, language="en"), resp("b", "sample", 0, True, tokens=30, language="zh")]
    m = {(r["level"], r["scope"], r["metric"]): r["value"] for r in metric_rows("m", rows, 1)}
    assert m[("language", "zh", "mean_tokens")] == 30 and m[("language_category", "en:knowledge", "mean_tokens")] == 10


def test_chinese_near_duplicates_are_read_by_characters():
    # all-MiniLM-L6-v2 scores these two 1.000 (most Chinese characters are one unknown token)
    assert near_duplicates(["碳的化学符号是什么？", "铁的化学符号是什么？"], 0.9, language="zh") == {}
    dup = near_duplicates(["碳的化学符号是什么？", "碳的化学符号是什么"], 0.9, language="zh")
    assert list(dup) == [1] and dup[1][1] == pytest.approx(1.0)


def test_s1_views_in_the_papers_layout(tmp_path):
    from warehouse import Warehouse

    rows = ([resp("a", "sample", s, True, fmt=100, well=True, tokens=20) for s in range(5)]
            + [resp("b", "sample", s, s < 4, fmt=100 if s < 4 else 301, well=s < 4, tokens=20) for s in range(5)]
            + [resp("a", "greedy", 0, True, fmt=100, well=True, tokens=12),
               resp("b", "greedy", 0, False, fmt=207, well=False, tokens=8, language="zh")])
    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.replace_partition("s1.metrics", metric_rows("m", rows, 5))
    [t3] = wh.rows("SELECT * FROM s1.table3")
    assert t3 == {"model": "m", "pass@1": 90.0, "acc@k": 50.0, "f-acc": 90.0, "Tokens": 20.0}
    [t8] = wh.rows("SELECT * FROM s1.table8")
    assert t8 == {"model": "m", "acc": 50.0, "f-acc": 50.0, "tokens": 10.0}
    [t5] = wh.rows('SELECT "EN Kno", "EN Avg", "ZH Kno", "Avg" FROM s1.table5 WHERE model = \'m\'')
    assert t5 == {"EN Kno": 20.0, "EN Avg": 20.0, "ZH Kno": None, "Avg": 20.0}  # top-p: no zh samples
    [t19] = wh.rows('SELECT "100", "301", "207" FROM s1.table19')
    assert t19 == {"100": 90.0, "301": 10.0, "207": 0.0}
    [t20] = wh.rows('SELECT "100", "207" FROM s1.table20')
    assert t20 == {"100": 50.0, "207": 50.0}


def test_table5_column_averages_and_improvement_as_the_paper_computes_them(tmp_path):
    """Paper 002, table 5: the small LLMs' Column Avg of EN Rsn is 74.6, the LRMs' 713.8, and the
    Improvement row is their ratio, x9.6. Two LLMs (no f-acc) and two LRMs (one with f-acc, one whose
    reasoning the API hid) reproduce those columns."""
    from warehouse import Warehouse

    def rows(model, en_rsn, lrm=None):
        out = [{"model": model, "level": "language_category", "scope": "en:reasoning", "metric": "mean_tokens",
                "category": "-", "value": en_rsn, "n": 10, "n_failed": 0},
               {"model": model, "level": "language_category", "scope": "en:reasoning", "metric": "pass@1",
                "category": "-", "value": 0.5, "n": 10, "n_failed": 0},
               {"model": model, "level": "all", "scope": "all", "metric": "f-acc", "category": "-",
                "value": 0.9 if lrm == "f-acc" else None, "n": 10, "n_failed": 0}]
        if lrm == "hidden":
            out.append({"model": model, "level": "all", "scope": "all", "metric": "reasoning_hidden",
                        "category": "-", "value": 1.0, "n": 10, "n_failed": 0})
        return out

    wh = Warehouse(tmp_path / "wh.duckdb")
    wh.replace_partition("s1.metrics", rows("gemma", 74.8) + rows("llama", 74.4)
                         + rows("r1", 700.0, "f-acc") + rows("o4-mini", 727.6, "hidden"))
    t5 = {r["model"]: r["EN Rsn"] for r in wh.rows('SELECT model, "EN Rsn" FROM s1.table5')}
    assert t5["Column Avg (LLMs)"] == 74.6 and t5["Column Avg (LRMs)"] == 713.8
    assert t5["Improvement"] == round(713.8 / 74.6, 1) == 9.6
    assert [r["model"] for r in wh.rows('SELECT model FROM s1.table5')] == [
        "gemma", "llama", "o4-mini", "r1", "Column Avg (LLMs)", "Column Avg (LRMs)", "Improvement"]
    [t4] = wh.rows("""SELECT "EN Rsn" FROM s1.table4 WHERE model = 'r1'""")
    assert t4["EN Rsn"] == 50.0
