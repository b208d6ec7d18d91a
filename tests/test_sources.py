"""Source loaders on hand-written fixtures in each upstream layout."""

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from generators.sources import SourceError, SourceSpec, by_label, load_source

FIX = Path(__file__).parent / "fixtures" / "sources"


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))


def test_fld_through_load_dataset_from_a_local_dataset_directory_both_configs():
    default = load_source(SourceSpec("fld", hub=str(FIX / "fld_hub"), config="default"))
    star = load_source(SourceSpec("fld", hub=str(FIX / "fld_hub"), config="star"))
    assert [(r.source_id, r.label, r.original_label) for r in default] == [
        ("d0", "True", "PROVED"), ("d1", "False", "DISPROVED"), ("d2", "Unknown", "UNKNOWN")]
    assert default[0].context.startswith("sent1: the lantern is lit") and default[0].question == "the lantern is bright"
    assert default[0].extra["depth"] == 1 and default[2].extra["num_all_distractors"] == 2
    assert [r.subset for r in star] == ["star"] and star[0].extra["depth"] == 2
    assert default[0].origin.endswith("fld_hub/default")


def test_folio_hub_layout():
    recs = load_source(SourceSpec("folio", path=str(FIX / "folio_hub.jsonl")))
    assert [(r.source_id, r.label, r.original_label) for r in recs] == [
        ("10", "True", "True"), ("11", "Unknown", "Uncertain"), ("12", "False", "False")]
    assert recs[0].extra["premises_fol"] == ["∀x (OwlInBarn(x) → HuntsAtNight(x))", "OwlInBarn(hedwig)"]
    assert recs[0].extra["conclusion_fol"] == "HuntsAtNight(hedwig)" and recs[0].extra["story_id"] == 1


def test_folio_v0_train_layout_lists_no_conclusion_fol_and_unknown_spelling():
    recs = load_source(SourceSpec("folio", path=str(FIX / "folio_v0_train.jsonl")))
    assert recs[0].context == "Every violin in the shop is tuned.\nThe old violin is in the shop."
    assert recs[0].extra["conclusion_fol"] is None
    assert [(r.label, r.original_label) for r in recs] == [("True", "True"), ("Unknown", "Unknown")]
    assert [r.source_id for r in recs] == ["folio_v0_train-0", "folio_v0_train-1"]  # no example ids upstream


def test_folio_v0_validation_layout_without_ids():
    recs = load_source(SourceSpec("folio", split="validation", path=str(FIX / "folio_v0_validation.jsonl")))
    assert [(r.source_id, r.label, r.original_label) for r in recs] == [
        ("folio_v0_validation-0", "True", "True"), ("folio_v0_validation-1", "Unknown", "Uncertain")]


def test_scienceqa_keeps_configured_text_only_topics_with_their_form():
    recs = load_source(SourceSpec("scienceqa", path=str(FIX / "scienceqa.jsonl")))
    assert [(r.topic, r.subset) for r in recs] == [
        ("physics", "science"), ("biology", "science"), ("figurative-language", "arts")]  # image row, geography out
    assert recs[0].choices == ["friction", "magnetism"] and recs[0].answer_index == 0
    assert recs[0].context.startswith("A box slides") and recs[0].label is None


def test_parquet_and_json_array_files(tmp_path):
    rows = [json.loads(line) for line in (FIX / "folio_hub.jsonl").read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "folio.parquet")
    (tmp_path / "folio.json").write_text(json.dumps(rows))
    assert by_label(load_source(SourceSpec("folio", path=str(tmp_path / "folio.parquet")))) == {
        "True": 1, "Unknown": 1, "False": 1}
    assert len(load_source(SourceSpec("folio", path=str(tmp_path / "folio.json")))) == 3


def test_malformed_rows_are_reported_by_file_row_and_field_and_nothing_is_loaded(tmp_path):
    bad = tmp_path / "fld_bad.jsonl"
    lines = (FIX / "fld_hub" / "default" / "train.jsonl").read_text().splitlines()
    row1 = json.loads(lines[1])
    row1["world_assump_label"] = "MAYBE"
    row2 = json.loads(lines[2])
    del row2["hypothesis"]
    bad.write_text("\n".join([lines[0], json.dumps(row1), json.dumps(row2)]))
    with pytest.raises(SourceError) as err:
        load_source(SourceSpec("fld", path=str(bad)))
    msg = str(err.value)
    assert "2 malformed rows" in msg and "nothing loaded" in msg
    assert f"{bad}: row 1: field 'world_assump_label': unknown label 'MAYBE'" in msg
    assert f"{bad}: row 2: field 'hypothesis': missing or empty" in msg


def test_broken_json_line_names_file_and_line(tmp_path):
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"label": "True"}\n{not json\n')
    with pytest.raises(SourceError, match=r"x.jsonl: row 1 \(line 2\): not valid JSON"):
        load_source(SourceSpec("folio", path=str(bad)))


def test_scienceqa_answer_out_of_range_is_reported(tmp_path):
    row = json.loads((FIX / "scienceqa.jsonl").read_text().splitlines()[0])
    row["answer"] = 5
    (tmp_path / "s.jsonl").write_text(json.dumps(row))
    with pytest.raises(SourceError, match=r"row 0: field 'answer': expected an index into the 2 choices, got 5"):
        load_source(SourceSpec("scienceqa", path=str(tmp_path / "s.jsonl")))


def test_spec_needs_exactly_one_location():
    with pytest.raises(SourceError, match="exactly one of `hub` or `path`"):
        SourceSpec("fld")
    with pytest.raises(SourceError, match="unknown source dataset 'gsm8k'"):
        SourceSpec("gsm8k", path="x")


def test_mmlu_and_commonsenseqa_and_truthfulqa_layouts():
    mmlu = load_source(SourceSpec("mmlu", path=str(FIX / "mmlu.jsonl")))
    assert mmlu[0].choices[mmlu[0].answer_index] == "carbon dioxide" and mmlu[0].topic == "high_school_biology"
    csqa = load_source(SourceSpec("commonsenseqa", path=str(FIX / "commonsenseqa.jsonl")))
    assert csqa[0].choices[csqa[0].answer_index] == "refrigerator"
    tqa = load_source(SourceSpec("truthfulqa", path=str(FIX / "truthfulqa.jsonl")))
    assert tqa[0].choices[tqa[0].answer_index].startswith("It passes")


def test_mmlu_pro_gold_comes_from_answer_index_and_must_agree_with_the_letter(tmp_path):
    recs = load_source(SourceSpec("mmlu_pro", path=str(FIX / "mmlu_pro.jsonl")))
    assert [r.choices[r.answer_index] for r in recs] == ["Mercury", "6"] and len(recs[0].choices) == 10
    row = json.loads((FIX / "mmlu_pro.jsonl").read_text().splitlines()[0])
    row["answer"] = "D"
    (tmp_path / "bad.jsonl").write_text(json.dumps(row))
    with pytest.raises(SourceError, match=r"row 0: field 'answer': letter 'D' disagrees with answer_index 1"):
        load_source(SourceSpec("mmlu_pro", path=str(tmp_path / "bad.jsonl")))


def test_multirc_rows_are_grouped_into_questions_with_their_true_answers():
    recs = load_source(SourceSpec("multirc", path=str(FIX / "multirc.jsonl")))
    by_q = {r.question: r for r in recs}
    plant = by_q["Which flowers did Mira plant?"]
    assert plant.choices == ["tulips", "daisies", "roses", "lilies"] and plant.extra["answer_indices"] == [0, 2]
    assert by_q["When did the roses bloom?"].extra["answer_indices"] == [0]
    assert plant.context.startswith("Mira planted")


def test_multirc_malformed_label_is_reported(tmp_path):
    rows = [json.loads(x) for x in (FIX / "multirc.jsonl").read_text().splitlines()]
    rows[1]["label"] = "yes"
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(SourceError, match=r"row 1: field 'label': expected 0 or 1, got 'yes'"):
        load_source(SourceSpec("multirc", path=str(tmp_path / "m.jsonl")))


def test_scienceqa_original_release_folder_reads_problems_json_by_split():
    # problems.json: one pretty-printed object keyed by problem id; pid_splits.json and captions.json beside it
    release = FIX / "scienceqa_release"
    train = load_source(SourceSpec("scienceqa", path=str(release), split="train"))
    test = load_source(SourceSpec("scienceqa", path=str(release), split="test"))
    assert (train[0].source_id, train[0].topic, train[0].choices[train[0].answer_index]) == ("5", "physics", "gravity")
    assert {r.source_id for r in train} == {"5", "101", "102", "103", "104", "201", "202", "203", "204", "301", "302",
                                           "303", "401", "402", "403", "404"}  # image rows and chemistry left out
    assert [(r.source_id, r.choices[r.answer_index]) for r in test] == [("12", "a rabbit")]  # never mixed into train


def test_a_pretty_printed_json_list_is_read_as_json():
    recs = load_source(SourceSpec("mmlu", path=str(FIX / "mmlu_pretty.json")))
    assert [r.choices[r.answer_index] for r in recs] == ["4", "Mercury"]


def test_a_csv_file_with_a_header_row_is_read(tmp_path):
    f = tmp_path / "folio.csv"
    f.write_text("premises,conclusion,label,story_id,example_id\n"
                 "\"All cats purr. Tom is a cat.\",Tom purrs.,True,1,10\n", encoding="utf-8")
    [rec] = load_source(SourceSpec("folio", path=str(f)))
    assert (rec.question, rec.label) == ("Tom purrs.", "True")


def test_a_file_in_no_known_layout_names_the_file_and_the_layouts_expected(tmp_path):
    f = tmp_path / "splits.json"
    f.write_text(json.dumps({"train": [1, 2], "test": [3]}, indent=2), encoding="utf-8")
    with pytest.raises(SourceError, match=r"splits\.json: a JSON object that is not a collection of rows keyed by id; "
                                          r"expected a JSON list of objects, a JSON object keyed by id, JSON Lines"):
        load_source(SourceSpec("mmlu", path=str(f)))
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"question": "q"}\n{"question": \n', encoding="utf-8")
    with pytest.raises(SourceError, match=r"broken\.jsonl: row 1 \(line 2\): not valid JSON .*expected a JSON list"):
        load_source(SourceSpec("mmlu", path=str(bad)))


def test_mmlu_pro_rows_with_one_option_are_skipped_and_counted_not_fatal(tmp_path):
    rows = [json.loads(line) for line in (FIX / "mmlu_pro.jsonl").read_text().splitlines()]
    single = {**rows[0], "question_id": 9999, "options": ["only one"], "answer": "A", "answer_index": 0}
    f = tmp_path / "mmlu_pro.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in [*rows, single]) + "\n")
    report = {}
    recs = load_source(SourceSpec("mmlu_pro", path=str(f)), report=report)
    assert len(recs) == len(rows) and report["skipped"] == {"fewer than 2 options": 1}


def test_an_older_fld_schema_is_said_once_with_a_hint(tmp_path):
    f = tmp_path / "fld_old.jsonl"
    f.write_text("\n".join(json.dumps({"hypothesis": f"h{i}", "context": f"sent1: c{i}", "label": "PROVED"})
                           for i in range(20)) + "\n")
    with pytest.raises(SourceError) as err:
        load_source(SourceSpec("fld", path=str(f)))
    lines = str(err.value).splitlines()
    assert len(lines) == 2 and "rows 0, 1, 2, 3, 4 and 15 more" in lines[1] and "before FLD.v2" in lines[1]


def test_truthfulqa_original_csv_best_answer_against_the_incorrect_ones():
    report: dict = {}
    recs = load_source(SourceSpec("truthfulqa", path=str(FIX / "TruthfulQA.csv")), report=report)
    assert [r.choices for r in recs] == [
        ["It passes through your digestive system", "It stays in your stomach for seven years",
         "It sticks to your heart", "You grow a gum tree"],
        ["Yes, lightning can strike the same place twice", "No, lightning never strikes the same place twice", "No"],
        ["Nothing in particular happens if you crack your knuckles a lot", "You will get arthritis",
         "Your fingers will grow thicker", "Your joints will break"]]
    assert all(r.answer_index == 0 for r in recs) and recs[0].topic == "Misconceptions"
    assert report["skipped"] == {"no incorrect answer": 1}  # the third row cannot make a choice item


def test_truthfulqa_row_in_neither_layout_names_both(tmp_path):
    (tmp_path / "t.jsonl").write_text(json.dumps({"question": "Why?", "answers": ["a", "b"]}))
    with pytest.raises(SourceError, match=r"t.jsonl: row 0: field 'mc1_targets'.*original CSV's Best Answer"):
        load_source(SourceSpec("truthfulqa", path=str(tmp_path / "t.jsonl")))


def test_multirc_superglue_release_one_row_per_passage():
    recs = load_source(SourceSpec("multirc", split="validation", path=str(FIX / "multirc_superglue_val.jsonl")))
    by_q = {r.question: r for r in recs}
    assert len(recs) == 3
    after = by_q["What did Mara do after baking?"]
    assert after.choices == ["She walked to the river", "She fed the ducks", "She slept", "She baked a cake"]
    assert after.extra["answer_indices"] == [0, 1] and after.context.startswith("Mara baked bread")
    assert by_q["When did Mara bake?"].extra["answer_indices"] == [0]
    assert by_q["What did the keeper do?"].source_id == "p1-q2"


def test_multirc_superglue_malformed_answer_names_row_and_question(tmp_path):
    rows = [json.loads(x) for x in (FIX / "multirc_superglue_val.jsonl").read_text().splitlines()]
    rows[1]["passage"]["questions"][0]["answers"][2]["label"] = "no"
    (tmp_path / "val.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(SourceError, match=r"val.jsonl: row 1: passage question 0: expected \{question, idx, answers"):
        load_source(SourceSpec("multirc", path=str(tmp_path / "val.jsonl")))


def test_mmlu_original_release_headerless_csvs_take_their_subject_from_the_file_name():
    recs = load_source(SourceSpec("mmlu", path=str(FIX / "mmlu_release" / "data" / "test"), split="test"))
    by_id = {r.source_id: r for r in recs}
    light = by_id["astronomy_test-1"]
    assert light.choices == ["8 seconds", "8 minutes", "8 hours", "8 days"] and light.answer_index == 1
    assert light.topic == "astronomy"
    assert by_id["high_school_chemistry_test-1"].question.startswith('Which of these is a noble gas: "argon"')
    assert len(recs) == 5


def test_mmlu_original_csv_with_a_bad_answer_letter_names_file_row_and_column(tmp_path):
    (tmp_path / "virology_test.csv").write_text("What is a virus?,a cell,a particle,a plant,a rock,Z\n")
    with pytest.raises(SourceError, match=r"virology_test.csv: row 0: field 'answer': expected a letter A-D"):
        load_source(SourceSpec("mmlu", path=str(tmp_path / "virology_test.csv")))


def test_commonsenseqa_original_release_layout():
    recs = load_source(SourceSpec("commonsenseqa", split="validation", path=str(FIX / "commonsenseqa_dev_rand_split.jsonl")))
    assert recs[0].question == "When would you most likely open an umbrella?" and recs[0].choices[recs[0].answer_index] == "rain"
    assert [len(r.choices) for r in recs] == [5, 5, 5] and recs[1].topic == "bread"


def test_a_source_file_that_is_not_utf8_names_the_file(tmp_path):
    f = tmp_path / "folio.jsonl"
    f.write_bytes('{"premises": "caf\xe9", "conclusion": "c", "label": "True"}\n'.encode("latin-1"))
    with pytest.raises(SourceError, match=rf"{f}: not UTF-8 text \(byte \d+"):
        load_source(SourceSpec("folio", path=str(f)))
