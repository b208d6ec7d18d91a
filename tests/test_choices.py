"""Multiple-choice validation (Instruction Boundary appendix E): the six categories of test cases,
plus the pitfalls of the authors' code."""

import pytest

from validators.read import is_correct, read_options
from validators.reply_text import NONE

GOLD = frozenset({1, 3})


def correct(reply: str, gold=GOLD, n: int = 4) -> bool:
    return is_correct(read_options(reply, n).answer, gold)


# E.2 perfect match: formats of a fully correct answer
@pytest.mark.parametrize("reply", ["1, 3", "1,3", "1 and 3", "1 3", "Answer: 3, 1", "The correct options are 1 and 3."])
def test_perfect_match(reply):
    assert correct(reply)


# partial correctness is wrong
@pytest.mark.parametrize("reply", ["1", "3", "Answer: 1", "Final answer: option 3"])
def test_partial_answers_are_wrong(reply):
    assert read_options(reply, 4).answer is not None and not correct(reply)


# extra options are wrong
@pytest.mark.parametrize("reply", ["1, 2, 3", "1 3 4", "Answer: 1, 2, 3 and 4"])
def test_extra_options_are_wrong(reply):
    assert not correct(reply)


# completely wrong
@pytest.mark.parametrize("reply", ["2", "2, 4", "Answer: 4", "B and D"])
def test_completely_wrong(reply):
    assert not correct(reply)


# no answer: explicit phrases are the answer NONE
@pytest.mark.parametrize("reply", ["No correct answer", "None of the options is correct.", "Answer: uncertain",
                                   "unclear", "Final answer: none of the above"])
def test_no_answer_phrases(reply):
    assert read_options(reply, 4).answer == NONE
    assert correct(reply, gold=NONE) and not correct(reply)


# edge cases
@pytest.mark.parametrize("reply,selected,method", [
    ("", None, "empty"),
    ("Answer: 7", None, "needs_judge"),  # not an option of a 4-option question
    ("I think about 12 apples and 30 pears are involved", None, "needs_judge"),  # digits are not answers
    ("Although it is unclear at first, comparing the facts, the answer is 2.", frozenset({2}), "final_answer"),
    ("**Answer:** (1) and (3)", frozenset({1, 3}), "final_answer"),
])
def test_edge_cases(reply, selected, method):
    got = read_options(reply, 4)
    assert (got.answer, got.method) == (selected, method)


def test_letter_answer_is_read_by_position_not_as_a_substring():
    # the authors' check `letter in answer.upper()` matched the A of "ANSWER"
    assert read_options("Answer: B", 5).answer == frozenset({2})
    assert read_options("ANSWER: C", 5).answer == frozenset({3})
    assert read_options("Answer: A", 5).answer == frozenset({1})


def test_uncertainty_inside_reasoning_is_not_a_no_answer():
    reply = "I was uncertain about option 4, but the text supports it.\nFinal answer: 4"
    assert read_options(reply, 4).answer == frozenset({4})


def test_conclusion_sentence():
    assert read_options("Option 1 fits the first clause. Therefore the answer is 1 and 2.", 4).answer == frozenset({1, 2})


def test_single_option_reply():
    assert read_options("3", 4) .answer == frozenset({3})


def test_there_are_at_least_27_cases():
    assert 6 + 4 + 3 + 4 + 5 + 5 >= 27
