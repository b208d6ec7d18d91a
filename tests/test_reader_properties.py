"""Property tests of every reply reader: a reply that names no answer reads as none, whatever
surrounds it (issue: "no answer read from a reply that gives none").

Replies are made of neutral prose (no answer cue, label word, option label or confidence wording),
numbered or lettered lists of such prose, numbers inside the prose, and restatements of every
option's text at once (naming all options chooses none). Hypothesis searches for a reply of that
kind that a reader turns into an answer; `validators/read.py`'s ladder must find none.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from validators.muso_read import read_confidence, read_recheck, read_subsets, read_timetables
from validators.read import read_label, read_number, read_options

# Words that state nothing an answer reader looks for: no cue (answer, option, label, so, thus, hence,
# therefore), no label (true, false, unknown, yes, no), no "solution" or "subset", no confidence words.
WORDS = ["the", "cat", "sat", "on", "a", "mat", "we", "looked", "at", "each", "item", "carefully", "before",
         "moving", "it", "was", "red", "blue", "large", "small", "near", "table", "garden", "morning", "river",
         "tree", "walked", "counted", "apples", "pears", "boxes", "I", "tried", "first", "then", "again", "later",
         "with", "and", "of", "in", "to", "this", "that", "many", "few", "some", "step", "list", "number"]
OPTIONS = ["Paris", "London", "Berlin", "Madrid"]

word = st.sampled_from(WORDS)
number = st.integers(min_value=0, max_value=999).map(str)
token = st.one_of(word, word, word, number)
# A sentence opens with a word: one made only of numbers ("1 1.") is a bare answer, not prose.
sentence = st.tuples(word, st.lists(token, min_size=1, max_size=11)).map(
    lambda ws: " ".join([ws[0], *ws[1]]).capitalize() + ".")
marker = st.sampled_from(["{k}. ", "{k}) ", "({k}) ", "- ", "* ", "{letter}. ", "{letter}) ", "Step {k}: "])


@st.composite
def listed(draw) -> str:
    """A numbered, lettered or bulleted list of prose lines (each line has words after its marker)."""
    lines = draw(st.lists(sentence, min_size=2, max_size=6))
    form = draw(marker)
    return "\n".join(form.format(k=k, letter="ABCDEFGHIJ"[k - 1]) + line for k, line in enumerate(lines, start=1))


restated = st.permutations(OPTIONS).map(lambda o: f"We compared {o[0]}, {o[1]}, {o[2]} and {o[3]}.")
block = st.one_of(sentence, listed(), restated)
reply = st.lists(block, min_size=1, max_size=5).map("\n\n".join)
with_thinking = st.tuples(reply, reply).map(lambda pair: f"<think>\n{pair[0]}\n</think>\n\n{pair[1]}")
replies = st.one_of(reply, reply, with_thinking)

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@PROPERTY
@given(replies)
def test_a_reply_naming_no_label_reads_as_none(text):
    assert read_label(text).answer is None
    assert read_label(text, options=["True", "False", "Unknown"]).answer is None


@pytest.mark.slow
@PROPERTY
@given(replies)
def test_a_reply_naming_no_option_reads_as_none(text):
    for options in (OPTIONS, 4, 10):
        got = read_options(text, options)
        assert got.answer is None, (options, got)
    assert read_options(text, OPTIONS, unknown=True).answer is None


@pytest.mark.slow
@PROPERTY
@given(replies)
def test_a_reply_naming_no_subset_reads_as_none(text):
    parsed = read_subsets(text, {"values": list(range(1000)), "target": 50})
    assert parsed.answers == [], parsed


@pytest.mark.slow
@PROPERTY
@given(replies)
def test_a_reply_naming_no_timetable_reads_as_none(text):
    problem = {"courses": [{"times": [0, 1], "rooms": [0, 1], "teacher": 0},
                           {"times": [0, 1], "rooms": [0, 1], "teacher": 1}]}
    assert read_timetables(text, problem).answers == []


@pytest.mark.slow
@PROPERTY
@given(replies)
def test_a_reply_stating_no_confidence_reads_as_none(text):
    assert read_confidence(text).answer is None
    assert read_recheck(text) is None


@PROPERTY
@given(st.lists(st.one_of(st.lists(word, min_size=2, max_size=12).map(" ".join), restated), min_size=1, max_size=5)
       .map("\n".join))
def test_a_reply_with_no_number_reads_as_no_number(text):
    assert read_number(text).answer is None
