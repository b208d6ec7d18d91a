"""Parsing the formats models really produce into MuSoBench answer sets."""

import pytest

from validators.muso_read import read_confidence, read_recheck, read_subsets, read_timetables

TT = {"courses": [{"times": [3, 4], "rooms": [8], "teacher": 2},
                  {"times": [0, 4], "rooms": [3], "teacher": 2},
                  {"times": [3, 4], "rooms": [0], "teacher": 1}]}
A = ((3, 8), (0, 3), (3, 0))
B = ((3, 8), (0, 3), (4, 0))
SS = {"values": [18, 25, 16, 45, 48, 40, 38, 14, 22, 8], "target": 62}

PAPER_FORMAT = """Solution 1:
| Course | Time | Room | Teacher |
|---------|-------|-------|----------|
| Course0 | T3 | R8 | P2 |
| Course1 | T0 | R3 | P2 |
| Course2 | T3 | R0 | P1 |
Solution 2:
| Course | Time | Room | Teacher |
|---------|-------|-------|----------|
| Course0 | T3 | R8 | P2 |
| Course1 | T0 | R3 | P2 |
| Course2 | T4 | R0 | P1 |
Total 2 feasible solutions shown above."""


def test_paper_format_tables():
    p = read_timetables(PAPER_FORMAT, TT)
    assert p.answers == [A, B] and p.claimed_total == 2 and p.error is None


def test_bold_and_markdown_headers_and_bold_cells():
    text = ("**Solution 1:**\n| Course | Time | Room | Teacher |\n|---|---|---|---|\n| **Course0** | **T3** | R8 | P2 |\n"
            "| Course1 | T0 | R3 | P2 |\n| Course2 | T3 | R0 | P1 |\n\n### Solution 2\n"
            "| Course0 | T3 | R8 | P2 |\n| Course1 | T0 | R3 | P2 |\n| Course2 | T4 | R0 | P1 |")
    assert read_timetables(text, TT).answers == [A, B]


def test_numbered_headers_without_outer_pipes_and_extra_spaces():
    text = ("1.\nCourse 0 |  T 3 | R 8 | P 2\nCourse 1 | T0 | R3 | P2\nCourse 2 | T3 | R0 | P1\n"
            "2.\n  Course0|Time 3|Room 8|Teacher 2  \nCourse1|T0|R3|P2\nCourse2|T4|R0|P1")
    assert read_timetables(text, TT).answers == [A, B]


def test_schedules_without_headers_split_where_a_course_repeats():
    text = "| Course0 | T3 | R8 | P2 |\n| Course1 | T0 | R3 | P2 |\n| Course2 | T3 | R0 | P1 |\n" \
           "| Course0 | T3 | R8 | P2 |\n| Course1 | T0 | R3 | P2 |\n| Course2 | T4 | R0 | P1 |"
    assert read_timetables(text, TT).answers == [A, B]


def test_duplicate_schedules_count_once():
    text = PAPER_FORMAT + "\nSolution 3:\n| Course0 | T3 | R8 | P2 |\n| Course1 | T0 | R3 | P2 |\n| Course2 | T3 | R0 | P1 |"
    assert read_timetables(text, TT).answers == [A, B]


def test_teacher_cell_spelled_differently_is_still_the_same_teacher():
    text = "Solution 1:\n| Course0 | T3 | R8 | 2 |\n| Course1 | T0 | R3 | Teacher 2 |\n| Course2 | T3 | R0 | p1 |"
    assert read_timetables(text, TT).answers == [A]


def test_teacher_that_really_differs_makes_the_schedule_wrong_not_dropped():
    text = "Solution 1:\n| Course0 | T3 | R8 | P5 |\n| Course1 | T0 | R3 | P2 |\n| Course2 | T3 | R0 | P1 |"
    p = read_timetables(text, TT)
    assert len(p.answers) == 1 and p.answers[0][0] == "invalid"
    assert "teacher differs" in p.invalid_reasons[0] and "[0]" in p.invalid_reasons[0]


def test_missing_teacher_column_is_accepted():
    text = "Solution 1:\n| Course | Time | Room |\n| Course0 | T3 | R8 |\n| Course1 | T0 | R3 |\n| Course2 | T3 | R0 |"
    assert read_timetables(text, TT).answers == [A]


def test_incomplete_schedule_is_an_invalid_answer():
    text = PAPER_FORMAT + "\nSolution 3:\n| Course0 | T3 | R8 | P2 |\n| Course1 | T0 | R3 | P2 |\n"
    p = read_timetables(text, TT)
    assert p.answers[:2] == [A, B] and p.answers[2][0] == "invalid"
    assert "courses [0, 1] instead of 0..2" in p.invalid_reasons[0]


def test_a_new_solution_1_starts_the_answer_again():
    text = "Solution 1:\n| Course0 | T3 | R8 | P2 |\n| Course1 | T0 | R3 | P2 |\nOops, redo.\n" + PAPER_FORMAT
    assert read_timetables(text, TT).answers == [A, B]


def test_no_table_is_a_parse_failure_with_reason():
    p = read_timetables("I think there are 4 schedules.", TT)
    assert p.answers == [] and p.error == "no timetable rows found"


@pytest.mark.parametrize("text", [
    "Solution 1: {8, 14, 40}\nSolution 2: {22, 40}",
    "Solution 1: [8, 14, 40]\nSolution 2: [22, 40]",
    "The subsets are [8, 14, 40] and {22, 40}.",
    "8 + 14 + 40 = 62\n22 + 40 = 62",
    "**Solution 1:** 8, 14, 40\n**Solution 2:** 22, 40",
    "Solution 1: {40, 14, 8}\nSolution 2: {22,40}\nSolution 3: { 8 , 14 , 40 }",
])
def test_subset_formats(text):
    assert set(read_subsets(text, SS).answers) == {(8, 14, 40), (22, 40)}


@pytest.mark.parametrize("text", [
    "Solution 1: 14 + 48 = 62\nSolution 2: 22 + 40 = 62",
    "1. 14 + 48 = 62\n2. 22 + 40 = 62",
    "{14, 48} ✓\n{22, 40} ✓",
    "14 + 48 = 62 ✓\n22 + 40 = 62 ✅",
    # a list of checks: the two sums that miss 62 are not claimed solutions
    "45 + 16 = 61\n45 + 18 = 63\n14 + 48 = 62\n22 + 40 = 62",
])
def test_common_reply_shapes_read_their_two_solutions(text):
    """Issue 21 (paper 001, the multi-solution protocol): an unread right answer would be recall 0
    beside a high confidence, the overconfidence the paper measures, faked. Values and target 62 as
    in the review: {14, 48} and {22, 40} are both solutions."""
    assert read_subsets(text, SS).answers == [(14, 48), (22, 40)]


def test_a_numbered_solution_with_a_wrong_sum_is_still_claimed():
    assert read_subsets("Solution 1: 45 + 16 = 61\nSolution 2: 22 + 40 = 62", SS).answers == [(16, 45), (22, 40)]


def test_subsets_echoing_the_question_are_not_answers():
    text = "Given the set of unique integers: {18, 25, 16, 45, 48, 40, 38, 14, 22, 8}\nSolution 1: {14, 48}"
    assert read_subsets(text, SS).answers == [(14, 48)]


def test_wrong_subsets_are_kept_as_answers():
    p = read_subsets("Solution 1: {1, 4, 4}\nSolution 2: {8, 99}\nSolution 3: {14, 48}\nSolution 4: {8, 14}", SS)
    assert p.answers[0][0] == "invalid" and p.answers[1][0] == "invalid"
    assert (14, 48) in p.answers and (8, 14) in p.answers  # (8, 14) is a wrong sum, scored against truth
    assert any("repeated" in r for r in p.invalid_reasons) and any("outside" in r for r in p.invalid_reasons)


def test_no_subsets_is_a_parse_failure():
    assert read_subsets("There are many.", SS).error == "no subsets found"


@pytest.mark.parametrize("text,value,method", [
    ("[[CONFIDENCE: \\boxed{85}]]", 85.0, "tagged"),
    ("I am fairly sure. [[CONFIDENCE: \\boxed{ 72% }]]", 72.0, "tagged"),
    ("\\boxed{60}", 60.0, "boxed"),
    ("My confidence is 90%.", 90.0, "keyword"),
    ("Confidence: 40/100", 40.0, "keyword"),
    ("75", 75.0, "bare"),
    ("I am 95% confident.", 95.0, "keyword"),
    ("I'm 80% sure of this answer.", 80.0, "keyword"),
    ("Confidence level: about 70%", 70.0, "keyword"),
    ("Confidence: high (90%)", 90.0, "keyword"),
    ("I am 90 percent sure.", 90.0, "keyword"),
    ("I'm about 85 per cent certain these are all.", 85.0, "keyword"),
    ("My confidence is 70 percent.", 70.0, "keyword"),
    ("I would rate it 85 out of 100.", 85.0, "scale"),
    ("Overall: 85/100.", 85.0, "scale"),
])
def test_confidence_formats(text, value, method):
    got = read_confidence(text)
    assert (got.answer, got.method) == (value, method)


@pytest.mark.parametrize("text", [
    "I checked 3 of 100 subsets.",  # a count, not a score
    "90% of the subsets sum to more than the target.",  # a share of something else
    "There are 100 possible subsets; I listed 12.",
])
def test_a_number_that_states_no_confidence_is_none(text):
    got = read_confidence(text)
    assert (got.answer, got.method) == (None, "no_confidence")


def test_a_count_after_the_word_confidence_is_no_confidence():
    got = read_confidence("Confidence is high since all 3 subsets were checked.")
    assert (got.answer, got.method) == (None, "no_confidence")


def test_confidence_out_of_range_or_missing_is_none_with_reason():
    got = read_confidence("[[CONFIDENCE: \\boxed{150}]]")
    assert (got.answer, got.method, got.evidence) == (None, "out_of_range", "150")
    assert (read_confidence("I cannot say.").answer, read_confidence("I cannot say.").method) == (None, "no_confidence")


def test_confidence_after_thinking_is_read_from_the_answer():
    assert read_confidence("<think>Maybe 40? No.</think>\n[[CONFIDENCE: \\boxed{85}]]").answer == 85.0


def test_recheck_markers():
    assert read_recheck("All good. [[UNCHANGE]]") == "unchanged"
    assert read_recheck("[[CHANGE]]\nSolution 1: ...") == "changed"
    assert read_recheck("I said [[UNCHANGE]] before but now [[CHANGE]]") == "changed"
    assert read_recheck("Looks right to me.") is None
