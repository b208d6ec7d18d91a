"""Instruction Boundary items built from fixture rows (paper appendix A.3)."""

import random
from pathlib import Path

import pytest

from generators import ib as gen
from generators.sources import SourceSpec, load_source

FIX = Path(__file__).parent / "fixtures" / "sources"


def bases(kind, form, name="d"):
    return gen.source_bases(load_source(SourceSpec(kind, path=str(FIX / f"{kind}.jsonl"))), form, name)


def by_variant(items):
    return {it["variant"]: it for it in items}


def test_single_choice_tense_item_and_its_insufficient_variant():
    base = bases("mmlu", "single")[0]  # carbon dioxide is option 2 of 4
    items = by_variant(gen.items_for("d", base, sparse=False, rng=random.Random(1), seed=1))
    c, i = items["complete"], items["insufficient"]
    assert c["label_type"] == "tense" and sorted(c["options"]) == sorted(base.options)
    assert c["options"][c["gold"][0] - 1] == "carbon dioxide"
    # one incorrect option removed, the gold renumbered to the same text
    assert i["removed_option"] in base.options and i["removed_option"] != "carbon dioxide"
    assert len(i["options"]) == 3 and i["options"][i["gold"][0] - 1] == "carbon dioxide"


def test_single_choice_sparse_item_replaces_the_correct_option_and_then_loses_it():
    base = bases("mmlu", "single")[0]
    items = by_variant(gen.items_for("d", base, sparse=True, rng=random.Random(1), seed=1))
    c, i = items["complete"], items["insufficient"]
    assert c["label_type"] == "sparse" and "carbon dioxide" not in c["options"]
    assert c["options"][c["gold"][0] - 1] == gen.ALL_FALSE and c["extra"]["replaced_option"] == "carbon dioxide"
    # insufficient: the replacement removed, so no option is correct (a no-correct-answer item)
    assert i["gold"] == "none" and gen.ALL_FALSE not in i["options"] and i["removed_option"] == gen.ALL_FALSE


def test_multiple_choice_items_are_multi_select_and_all_of_them_gr3_items():
    """Paper 003, table 3: GR3 is accuracy over all 150 multi-select MultiRC items (4 options, 2 true, no
    combined option; its values 0.67, 2.00, 3.33, 4.67 are multiples of 1/150), as in the authors' items.
    Whichever half a question falls in, it stays multi-select and counts in GR (sparse)."""
    base = [b for b in bases("multirc", "multiple") if b.question.startswith("Which flowers")][0]
    for half in (True, False):
        got = by_variant(gen.items_for("d", base, sparse=half, rng=random.Random(2), seed=1))
        c, i = got["complete"], got["insufficient"]
        assert c["label_type"] == i["label_type"] == "sparse"
        assert not any(o.startswith("Options ") for o in c["options"])
        assert sorted(c["options"][g - 1] for g in c["gold"]) == ["roses", "tulips"]
        assert i["removed_option"] in ("daisies", "lilies") and len(i["options"]) == len(c["options"]) - 1
    items = gen.build_items("mrc", bases("multirc", "multiple"), 2, seed=3)
    assert {r["label_type"] for r in items} == {"sparse"}


def test_with_combined_option_half_the_questions_combine_the_true_answers_into_the_sparse_option():
    base = [b for b in bases("multirc", "multiple") if b.question.startswith("Which flowers")][0]
    sparse = by_variant(gen.items_for("d", base, sparse=True, rng=random.Random(2), seed=1, combined=True))
    c = sparse["complete"]
    combined = c["options"][-1]
    assert c["label_type"] == "sparse" and c["gold"] == [len(c["options"])]
    true_numbers = sorted(c["options"].index(x) + 1 for x in ("tulips", "roses"))
    assert combined == f"Options {true_numbers[0]} and {true_numbers[1]} are all true"
    # the combined option removed again: the true set is the gold
    assert sparse["insufficient"]["gold"] == true_numbers and sparse["insufficient"]["removed_option"] == combined
    tense = by_variant(gen.items_for("d", base, sparse=False, rng=random.Random(2), seed=1, combined=True))
    t = tense["complete"]
    assert t["label_type"] == "tense" and sorted(t["options"][g - 1] for g in t["gold"]) == ["roses", "tulips"]
    assert tense["insufficient"]["removed_option"] in ("daisies", "lilies")  # one wrong answer removed


def test_judging_items_remove_unknown_or_a_wrong_label():
    recs = gen.source_bases(load_source(SourceSpec("folio", path=str(FIX / "folio_hub.jsonl"))), "judging", "f")
    unknown = [b for b in recs if b.options[b.true[0]] == "Unknown"][0]
    items = by_variant(gen.items_for("f", unknown, sparse=True, rng=random.Random(0), seed=1))
    assert items["complete"]["options"] == ["True", "False", "Unknown"] and items["complete"]["gold"] == [3]
    assert items["insufficient"]["options"] == ["True", "False"] and items["insufficient"]["gold"] == "none"
    true = [b for b in recs if b.options[b.true[0]] == "True"][0]
    items = by_variant(gen.items_for("f", true, sparse=False, rng=random.Random(0), seed=1))
    assert items["insufficient"]["options"] == ["True", "Unknown"] and items["insufficient"]["gold"] == [1]


def test_truthfulqa_options_are_shuffled_so_the_answer_is_not_always_first():
    base = bases("truthfulqa", "single")[0]
    firsts = {gen.items_for("d", base, sparse=False, rng=random.Random(s), seed=1)[0]["gold"][0] for s in range(10)}
    assert firsts == {1, 2}


def test_build_items_is_seeded_and_half_sparse():
    generated = gen.arithmetic_bases(random.Random(3), 8, "a")
    a = gen.build_items("a", generated, 4, seed=9)
    assert a == gen.build_items("a", generated, 4, seed=9)
    assert a != gen.build_items("a", generated, 4, seed=10)
    complete = [i for i in a if i["variant"] == "complete"]
    assert sorted(i["label_type"] for i in complete) == ["sparse", "sparse", "tense", "tense"]
    assert all(i["number_scheme"] == "1..n" for i in a)


def test_miscellany_items_keep_the_correct_option_with_one_to_nine_wrong_ones():
    items = gen.miscellany_items("m", bases("mmlu_pro", "single", "m"), 1, seed=1)
    assert [i["n_options"] for i in items] == list(range(2, 11))
    for it in items:
        assert it["options"][it["gold"][0] - 1] == "Mercury" or it["options"][it["gold"][0] - 1] == "6"
    # nested: every smaller item's wrong options appear in the larger ones
    sets = [set(i["options"]) for i in items]
    assert all(a <= b for a, b in zip(sets, sets[1:]))


def test_generated_answers_are_exact():
    for b in gen.arithmetic_bases(random.Random(5), 20, "a"):
        a, c = (int(x) for x in b.question.removeprefix("What is ").rstrip("?").split(" + "))
        assert b.options[b.true[0]] == str(a + c) and len(set(b.options)) == len(b.options)
    for b in gen.even_number_bases(random.Random(5), 20, "e"):
        assert sorted(b.true) == [i for i, x in enumerate(b.options) if int(x) % 2 == 0]


def test_choice_questions_are_fitted_to_the_configured_option_count():
    csqa = bases("commonsenseqa", "single")[0]  # five options
    fitted = gen.fit_options(csqa, 4, 2, random.Random(1))
    assert len(fitted.options) == 4 and fitted.options[fitted.true[0]] == csqa.options[csqa.true[0]]
    assert set(fitted.options) <= set(csqa.options)
    assert fitted == gen.fit_options(csqa, 4, 2, random.Random(1))  # seeded
    # the wrong options are sampled: over seeds more than one set of three is kept
    assert len({frozenset(gen.fit_options(csqa, 4, 2, random.Random(s)).options) for s in range(20)}) > 1
    two = gen.Base("b", "single", "", "q", ["yes", "no"], [0], "x")
    assert gen.fit_options(two, 4, 2, random.Random(1)) == "fewer than 4 options"
    one_true = gen.Base("m", "multiple", "", "q", ["a", "b", "c", "d"], [1], "x")
    assert gen.fit_options(one_true, 4, 2, random.Random(1)) == "fewer than 2 true answers"
    three_true = gen.Base("m", "multiple", "", "q", ["a", "b", "c", "d", "e"], [0, 1, 3], "x")
    fitted = gen.fit_options(three_true, 4, 2, random.Random(1))
    assert len(fitted.options) == 4 and len(fitted.true) == 2 and {"c", "e"} <= set(fitted.options)


def test_every_choice_item_has_the_configured_options_and_unfit_questions_are_counted():
    release = load_source(SourceSpec("scienceqa", path=str(FIX / "scienceqa_release"), split="train"))
    report: dict = {}
    items = gen.build_items("sqa", gen.source_bases(release, "single", "sqa"), 4, seed=3, report=report)
    assert report["unfit"] == {"fewer than 4 options": sum(len(r.choices) < 4 for r in release)}
    for it in items:  # never a one-option item: 4 offered, 3 after the insufficient variant removes one
        assert it["n_options"] == (4 if it["variant"] == "complete" else 3)
    usable = sum(len(r.choices) >= 4 for r in release)
    left = len(release) - usable
    with pytest.raises(ValueError, match=rf"{usable + 1} questions wanted, the source has {usable} usable "
                                         rf"\({left} left out: {left} with fewer than 4 options\)"):
        gen.build_items("sqa", gen.source_bases(release, "single", "sqa"), usable + 1, seed=3)
    multi = gen.build_items("mrc", bases("multirc", "multiple"), 2, seed=3, report=report)
    assert report["unfit"] == {"fewer than 2 true answers": 1}  # "When did the roses bloom?" has one
    complete = [it for it in multi if it["variant"] == "complete"]
    assert len(complete) == 2 and all(it["n_options"] == 4 and len(it["gold"]) == 2 for it in complete)


def test_true_options_must_leave_room_for_a_wrong_option():
    from configuration import IBDataset

    with pytest.raises(ValueError, match="true_options"):
        IBDataset(form="multiple", generator="even_numbers", count={"demo": 1, "paper": 1}, options=3, true_options=3)


def test_the_stored_items_checks_name_a_gold_option_outside_the_options():
    from configuration import IBDataset, PerScale

    spec = IBDataset(form="single", generator="arithmetic", count=PerScale(demo=1, paper=1))
    ok = {"item_id": "a:complete", "variant": "complete", "label_type": "tense", "gold": "[2]", "n_options": 4}
    far = {**ok, "item_id": "b:complete", "label_type": "sparse", "gold": "[5]"}
    checks = {c.name: c for c in gen.item_checks("x", spec, [ok, far])}
    assert checks["tense_sparse_balanced"].passed
    assert not checks["gold_among_options"].passed and checks["gold_among_options"].metadata["bad"] == ["b:complete"]
