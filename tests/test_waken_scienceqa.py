"""WakenLLM on ScienceQA topics: Unknown items by deleting supporting sentences, judge-verified and
replaced when the judge still sees a unique answer; multiple-choice answers through the pipeline."""

import json
import re
from pathlib import Path

import pytest

from assets.definitions import build_definitions
from generators.waken import without_support
from llm_calls.stub_server import StubServer
from tests.conftest import materialize, stub_config
from warehouse import Warehouse

ROWS = [
    ("physics", "Which force slows a sliding box?", ["friction", "magnetism"], 0,
     "A box slides across a rough floor. The rough floor rubs the box. The box slows down and stops."),
    ("physics", "Which magnet pole attracts a north pole?", ["south", "north"], 0,
     "Magnets have two poles. Opposite poles attract each other. Like poles repel each other."),
    ("biology", "Which animal has feathers?", ["a robin", "a frog"], 0,
     "Birds have feathers. A robin is a bird. Frogs have moist skin."),
    ("biology", "Which part of a plant makes food?", ["the leaves", "the roots"], 0,
     "Plants make food in their leaves. The leaves use sunlight. Roots take in water."),
    ("physics", "Which object is heavier?", ["a brick", "a feather"], 0,
     "A brick weighs two kilograms. A feather weighs a gram. Weight measures heaviness."),
    ("biology", "What do fish use to breathe?", ["gills", "lungs"], 0,
     "Fish live in water. Fish breathe with gills. Gills take oxygen from water."),
    ("figurative-language", "Which is a simile?", ["as dark as ink", "dark"], 0, "A simile uses like or as."),
]


def science_file(tmp_path):
    path = tmp_path / "scienceqa.jsonl"
    rows = [{"image": None, "question": q, "choices": c, "answer": a, "hint": h, "task": "closed choice",
             "grade": "grade3", "subject": "natural science", "topic": t, "category": "c", "skill": "s",
             "lecture": "", "solution": ""} for t, q, c, a, h in ROWS]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return path


REJECTED: list[str] = []


def model(body):
    text = body["messages"][-1]["content"]
    if "Do the question and options alone" in text:
        return "No"
    if "Does the context give enough information" in text:
        if not REJECTED:  # the judge still sees a unique answer in the first draft it reads
            REJECTED.append(re.search(r"Question: (.+)", text).group(1))
            return "Yes"
        return "No"
    if "Output only True or False" in text:
        return "False"
    if "mainly caused" in text:
        return "C"
    return "Final answer: Unknown"


@pytest.fixture
def run(tmp_path):
    REJECTED.clear()
    with StubServer(responder=model) as stub:
        cfg = stub_config(stub, tmp_path, waken={
            "datasets": {"science": {"kind": "scienceqa", "form": "story", "topics": ["physics", "biology"],
                                     "source": {"path": str(science_file(tmp_path))}, "count": {"demo": 4, "paper": 4}}},
            "misguiding_rates": [1.0], "baselines": ["few_shot"],
        })
        defs = build_definitions(cfg.source)
        results = [materialize(defs, keys, pk)
                   for keys, pk in ((["waken_items", "waken_outcomes"], "science"), (["waken_metrics"], None))]
        yield cfg, results, [r["body"] for r in stub.requests]


def test_deleting_the_two_most_supporting_sentences():
    modified, deleted = without_support(ROWS[0][4], ROWS[0][1], "friction")
    assert len(deleted) == 2 and modified and all(d not in modified for d in deleted)
    assert without_support("Only one sentence.", "q", "a") is None


@pytest.mark.slow
def test_unknown_items_are_verified_and_replaced_from_the_pool(run):
    cfg, results, bodies = run
    assert all(r.success for r in results)
    wh = Warehouse(cfg.warehouse_path())
    items = wh.rows("SELECT item_id, label, sample_type, context, extra FROM waken.items ORDER BY sample_type, item_id")
    solvable = [i for i in items if i["sample_type"] == "solvable"]
    unknown = [i for i in items if i["sample_type"] == "unsolvable"]
    assert len(solvable) == 2 and len(unknown) == 2
    for i in solvable:
        extra = json.loads(i["extra"])
        assert i["label"] == extra["choices"][extra["answer_index"]]  # the label is the correct option
    for i in unknown:
        extra = json.loads(i["extra"])
        assert i["label"] == "Unknown" and len(extra["deleted_sentences"]) == 2
        assert extra["original_context"] != i["context"] and "No" in extra["verification"]
    asked = [b for b in bodies if "Does the context give enough information" in b["messages"][-1]["content"]]
    assert len(asked) == 3 and len(REJECTED) == 1  # two needed, one rejected and replaced from the pool
    questions = wh.rows("SELECT question FROM waken.items WHERE sample_type = 'unsolvable'")
    assert REJECTED[0] not in {q["question"] for q in questions}
    assert wh.scalar("SELECT count(*) FROM sources.records WHERE dataset = 'waken:science'") == 6  # arts row filtered out


@pytest.mark.slow
def test_choice_items_are_asked_with_lettered_options_and_unknown(run):
    cfg, _, bodies = run
    direct = [b["messages"][-1]["content"] for b in bodies if b["messages"][-1]["content"].startswith("Read the context")
              and b["messages"][-1]["content"].endswith('"Final answer: Unknown".')]
    assert len(direct) == 4 and all("Options:\n(A) " in t and "(B) " in t for t in direct)
    diagnosis = [b["messages"][-1]["content"] for b in bodies if "Output only True or False" in b["messages"][-1]["content"]]
    assert diagnosis and all("no single option can be chosen" in t for t in diagnosis)
    wh = Warehouse(cfg.warehouse_path())
    assert wh.rows("SELECT DISTINCT prediction FROM waken.outcomes WHERE step = 'direct'") == [{"prediction": "Unknown"}]
    shares = {r["sample_type"]: r["value"] for r in wh.rows(
        "SELECT sample_type, value FROM waken.metrics WHERE metric = 'vague_perception_share'")}
    assert shares == {"s": 1.0, "u": 1.0}
    assigned = [b["messages"][-1]["content"] for b in bodies if "A suggested label" in b["messages"][-1]["content"]]
    # M = 100%: every suggested label is wrong, and drawn from the item's own options or Unknown
    assert assigned and all(re.search(r"suggested label for it is: (.+?)\.", t) for t in assigned)



# -- the paper's construction on ScienceQA's original release (appendix C) ---------------------

RELEASE = Path(__file__).parent / "fixtures" / "sources" / "scienceqa_release"


def _release(topics, split="train"):
    from generators.sources import SourceSpec, load_source

    return load_source(SourceSpec("scienceqa", path=str(RELEASE), split=split, topics=tuple(topics)))


def _spec(topics, count=4):
    from configuration import PerScale, WakenDataset, WakenSource

    return WakenDataset(kind="scienceqa", form="story", topics=list(topics), source=WakenSource(path=str(RELEASE)),
                        count=PerScale(demo=count, paper=count))


def _accept_all(drafts):
    return [("accepted", "judge: No")] * len(drafts)


def test_a_deletion_must_leave_context_and_must_not_leave_the_answer():
    from generators.waken import deletion

    two = deletion("Lena lets go of a ball. It falls to the floor.", "Which force pulls a ball?", "gravity")
    assert isinstance(two, str) and "no context" in two
    copper = "Copper carries electricity. Wires are made of copper. Copper is a metal. Rubber blocks electricity."
    kept = deletion(copper, "Which material is a conductor?", "copper")
    assert isinstance(kept, str) and "'copper' is still in the text" in kept
    # a sentence holding the answer verbatim is deleted first
    remaining, deleted = deletion("A brick weighs two kilograms. A feather weighs one gram. Weight tells how heavy "
                                  "a thing is.", "Which object is heavier?", "a brick")
    assert "A brick weighs two kilograms." in deleted and "brick" not in remaining.lower() and remaining


def test_arts_passages_inside_the_question_are_the_supporting_text():
    from generators.waken import build_items

    topics = ["writing-strategies", "figurative-language"]
    items = build_items("arts", _spec(topics), 4, seed=7, records=_release(topics), verify=_accept_all)
    by_source = {i["extra"]["source_id"]: i for i in items}
    in_question = {"301", "302", "303", "402", "403"}  # rows whose passage follows the question's first line
    assert set(by_source) & in_question
    for sid, item in by_source.items():
        assert item["context"].strip() and "\n" not in item["question"]
        if sid in in_question:
            original = next(r for r in _release(topics) if r.source_id == sid).question
            assert original.startswith(item["question"] + "\n")  # the first line is the question asked
            if item["label"] != "Unknown":
                assert original.endswith(item["context"])  # the passage, whole
    unknown = [i for i in items if i["label"] == "Unknown"]
    assert len(unknown) == 2 and all(len(i["extra"]["deleted_sentences"]) == 2 for i in unknown)
    assert all(d not in i["context"] for i in unknown for d in i["extra"]["deleted_sentences"])


def test_solvable_and_unknown_items_come_from_one_pool_with_context():
    """Context is no label cue: rows that could not become Unknown (2 sentences, answer left verbatim, no
    context) are in neither half, and over seeds every eligible row lands on both sides."""
    from generators.waken import build_items

    topics = ["physics", "biology"]
    records = _release(topics)
    sides: dict[str, set[str]] = {}
    for seed in range(12):
        for item in build_items("science", _spec(topics), 4, seed=seed, records=records, verify=_accept_all):
            sides.setdefault(item["extra"]["source_id"], set()).add(item["sample_type"])
    assert set(sides) == {"101", "102", "103", "201", "202", "203"}  # never 5, 104 or 204
    assert all(s == {"solvable", "unsolvable"} for s in sides.values())


def test_topics_are_quotas_each_half_solvable_half_unknown():
    from generators.waken import build_items, topic_quotas

    assert topic_quotas(["physics", "biology"], 800) == {"physics": (200, 200), "biology": (200, 200)}
    assert topic_quotas(["physics", "biology"], 10) == {"physics": (2, 3), "biology": (3, 2)}
    items = build_items("science", _spec(["physics", "biology"]), 6, seed=1, records=_release(["physics", "biology"]),
                        verify=_accept_all)
    per_topic = {(i["extra"]["topic"], i["sample_type"]) for i in items}
    counts = {t: sum(i["extra"]["topic"] == t for i in items) for t in ("physics", "biology")}
    assert counts == {"physics": 3, "biology": 3} and len(per_topic) == 4
    assert sum(i["label"] == "Unknown" for i in items) == 3


def test_a_topic_too_small_for_its_quota_is_built_smaller_one_to_one_and_the_check_says_so():
    """Paper 000 asks 400 items per topic; a release with too few rows whose own context can be cut
    builds what it can, each topic still half solvable and half Unknown, never padded, and the
    `paper_counts_reached` check (a warning) states wanted and built per topic."""
    from generators.waken import build_items, counts_reached

    items = build_items("science", _spec(["physics", "biology"], 8), 8, seed=1,
                        records=_release(["physics", "biology"]), verify=_accept_all)
    per = {(t, k): sum(i["extra"]["topic"] == t and i["sample_type"] == k for i in items)
           for t in ("physics", "biology") for k in ("solvable", "unsolvable")}
    # 3 eligible rows per topic (of 4 wanted): 1 solvable + 1 Unknown each, the third row left out
    assert per == {("physics", "solvable"): 1, ("physics", "unsolvable"): 1,
                   ("biology", "solvable"): 1, ("biology", "unsolvable"): 1}
    check = counts_reached(items, 8, ["physics", "biology"])
    assert not check.passed and check.warn and check.metadata["built"] == 4
    assert check.metadata["per_topic"]["physics"] == {"solvable_wanted": 2, "solvable_built": 1,
                                                      "unknown_wanted": 2, "unknown_built": 1}


def test_a_row_with_no_context_of_its_own_never_becomes_unknown():
    """Paper 000, appendix C deletes supporting sentences "from the given facts": a row whose question and
    options alone decide the answer (no hint, no passage) has nothing of its own to cut, and cutting its
    lecture leaves it answerable as shown."""
    from generators.waken import NO_OWN_CONTEXT, deletion

    lecture = "A magnet has two poles. Like poles push each other away. Opposite poles pull together."
    assert deletion("", "Will these magnets attract or repel?", "attract", lecture) == NO_OWN_CONTEXT
    remaining, deleted = deletion("Two magnets face each other. Their south poles meet.",
                                  "Will these magnets attract or repel?", "repel", lecture)
    assert deleted == ["Two magnets face each other.", "Their south poles meet."]  # the own context is cut
    assert remaining == lecture  # the lecture stays as it is


def test_a_draft_the_question_and_options_alone_decide_is_rejected():
    """The verifier asks the judge twice per draft; a Yes from the question and options alone rejects
    the draft whatever the cut context gives."""
    from validators.judge import _verdict
    from validators.reply_text import Reading

    no, yes = Reading(False, "judge", "No"), Reading(True, "judge", "Yes")
    assert _verdict(no, yes)[0] == "rejected" and "alone decide" in _verdict(no, yes)[1]
    assert _verdict(yes, no)[0] == "rejected"
    assert _verdict(no, no)[0] == "accepted"
    assert _verdict(no, Reading(None, "judge_unreadable", "Hmm"))[0] == "unverified"


def test_the_judges_verdict_is_read_as_a_careful_grader_would():
    from validators.judge import read_sufficiency

    assert read_sufficiency("The context does not provide enough information to choose exactly one option. The "
                            "answer is") is False  # SmolLM2's usual reply, with no yes or no in 16 tokens
    assert read_sufficiency("**No**") is False and read_sufficiency("Answer: yes") is True
    assert read_sufficiency("It cannot be determined from the context.") is False
    assert read_sufficiency("Yes, the context has enough information.") is True
    assert read_sufficiency("The answer is (B)") is None and read_sufficiency("Noah is a bird.") is None


def _science_run(tmp_path, responder, count=4, **stub_options):
    with StubServer(responder=responder, **stub_options) as stub:
        cfg = stub_config(stub, tmp_path, waken={
            "datasets": {"science": {"kind": "scienceqa", "form": "story", "topics": ["physics", "biology"],
                                     "source": {"path": str(RELEASE)}, "count": {"demo": count, "paper": count}}}})
        result = materialize(build_definitions(cfg.source), ["waken_items"], "science")
        return cfg, result, [b["body"]["messages"] for b in stub.requests]


@pytest.mark.slow
def test_a_judge_that_cannot_decide_stops_at_once_records_each_draft_and_says_unverified(tmp_path):
    cfg, result, asked = _science_run(tmp_path, lambda body: "Let me think about the options.")
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    said = failure.step_failure_data.error.to_string()
    assert "no Unknown item verified of 2 wanted" in said and "2 unverified" in said and "could not decide" in said
    assert "failed verification" not in said
    # the first batch (2 drafts, two questions each), each asked once more for one word; then it stops
    assert len(asked) == 8
    assert all(m[-1]["content"] == "Answer with one word: Yes or No." for m in asked if len(m) > 1)
    wh = Warehouse(cfg.warehouse_path())
    drafts = wh.rows("SELECT topic, verdict, evidence FROM waken.unknown_drafts ORDER BY topic")
    assert [(d["topic"], d["verdict"]) for d in drafts] == [("biology", "unverified"), ("physics", "unverified")]
    assert all("Let me think" in d["evidence"] for d in drafts)
    assert wh.scalar("SELECT count(*) FROM waken.items") == 0


@pytest.mark.slow
def test_an_unreadable_verdict_is_asked_again_and_every_verdict_is_recorded(tmp_path):
    def judge(body):
        messages = body["messages"]
        if "Do the question and options alone" in messages[0]["content"]:
            return "No"
        if "Does the context give enough information" not in messages[0]["content"]:
            return "Final answer: Unknown"
        if len(messages) > 1:
            return "No."  # the second turn decides
        return "Yes" if "Which object is heavier" in messages[0]["content"] else "Hmm, let me see."

    cfg, result, asked = _science_run(tmp_path, judge)
    assert result.success
    wh = Warehouse(cfg.warehouse_path())
    verdicts = {d["item_id"]: d["verdict"] for d in wh.rows("SELECT item_id, verdict FROM waken.unknown_drafts")}
    unknown = {r["item_id"] for r in wh.rows("SELECT item_id FROM waken.items WHERE label = 'Unknown'")}
    assert len(unknown) == 2 and unknown == {k for k, v in verdicts.items() if v == "accepted"}
    assert set(verdicts.values()) <= {"accepted", "rejected"}
    assert ("science-103-unknown" not in verdicts) or verdicts["science-103-unknown"] == "rejected"


@pytest.mark.slow
def test_failed_judge_calls_are_said_to_have_failed_not_to_be_unverified(tmp_path):
    cfg, result, asked = _science_run(tmp_path, None, fail_share=1.0)  # every call fails (HTTP 400)
    assert not result.success
    said = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE").step_failure_data.error.to_string()
    assert "2 judge calls failed" in said and "the judge's calls failed" in said and "could not decide" not in said
    verdicts = Warehouse(cfg.warehouse_path()).rows("SELECT verdict FROM waken.unknown_drafts")
    assert [v["verdict"] for v in verdicts] == ["failed", "failed"]


def _problems(tmp_path):
    """A problems.json in the release's layout: two Physics rows without a hint, one per split."""
    lecture = ("A magnet has two poles. Like poles push each other away. Opposite poles pull together. "
               "The pull between magnets is called magnetic force.")
    rows = {str(k): {"question": "Will these magnets attract or repel each other?", "choices": ["attract", "repel"],
                     "answer": 0, "hint": "", "image": None, "task": "closed choice", "grade": "grade3",
                     "subject": "natural science", "topic": "physics", "category": "Magnets",
                     "skill": "Predict magnets", "lecture": lecture, "solution": "Opposite poles attract.",
                     "split": split} for k, split in enumerate(["train", "val", "test"])}
    path = tmp_path / "problems.json"
    path.write_text(json.dumps(rows))
    return path


def test_all_splits_and_the_lecture_widen_the_pool_appendix_c_draws_from(tmp_path):
    """Paper 000, appendix C: 21,208 questions, i.e. every split of the release; a Physics row with no hint
    shows its lecture as supporting text, but has no context of its own to cut for an Unknown draft."""
    from generators.sources import SourceSpec, load_source, split_names
    from generators.waken import NO_OWN_CONTEXT, deletion, study_parts, study_text

    path = _problems(tmp_path)
    assert split_names("all") == {"train", "validation", "test"} and split_names("train+val") == {"train", "validation"}
    assert len(load_source(SourceSpec("scienceqa", path=str(path), split="train", topics=("physics",)))) == 1
    every = load_source(SourceSpec("scienceqa", path=str(path), split="all", topics=("physics",)))
    assert len(every) == 3
    row = every[0]
    assert study_text(row) == ("", row.question)  # without the lecture: nothing to delete from
    context, question = study_text(row, with_lecture=True)
    assert context.startswith("A magnet has two poles.") and "Opposite poles attract." not in context  # no solution
    own, lecture, _ = study_parts(row, with_lecture=True)
    assert deletion(own, question, "attract", lecture) == NO_OWN_CONTEXT


def test_lecture_is_for_scienceqa_only():
    from configuration import WakenDataset

    with pytest.raises(ValueError, match="`lecture` is for kind `scienceqa` only"):
        WakenDataset(kind="fld", generator={}, count={"demo": 2, "paper": 2}, lecture=True)
