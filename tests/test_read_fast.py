"""The reader's fast forms for ASCII text (validators/read.py, "the same patterns, faster on ASCII
text") read every text as the patterns as written do: the echoed label lists removed, the labels
named, the answer cues and concluding cues found, `plain`'s marks removed. Checked on texts built
from the words, separators, openings and cases that decide those patterns, and on hand-picked
texts where a careless fast form would differ (an opening far before its list, a letter glued to
a label, spacing inside "is not proved")."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from validators import read as R
from validators import reply_text

PIECES = [
    "true", "True", "TRUE", "false", "False", "unknown", "Unknown", "proved", "proven", "disproved", "uncertain",
    "undetermined", "indeterminate", "cannot be determined", "can not be determined", "can't be determined",
    "not determinable", "neither true nor false", "neither proved nor disproven", "cannot be proved or disproved",
    "can't be proven or disproved", "insufficient", "not enough information", "cannot be concluded",
    "not", "is", "isn't", "wasn't", "was", "be", "been", "could", "would", "can", "cannot", "or", "and", "nor",
    "untrue", "xtrue", "truex", "answer", "Answer:", "Final answer:", "option", "label", "verdict", "conclusion",
    "Conclusion:", "so", "So,", "thus", "Therefore", "hence", "overall", "in conclusion", "as a result",
    "(a)", "(B)", "c)", "1.", "2)", "(3)", "a.", "A)", ",", "/", "|", ";", ".", "!", "?", ":", "-", "**", "__", "`",
    "#", ">", "$", "\\(", "\\text{True}", "\\boxed{2}", "the", "cat", "sat", "1", "4", "x",
    "final answer", "Final Answer", "correct answer", "correct option", "correct options", "the answer",
    "My answer", "final label", "prediction", "Verdict", "are", "would be", "should be", "will be", "=",
    "(short)", "(a very long parenthesis here)", "## Final Answer", "Therefore, the correct answer is:",
    "so the answer is", "is:", "Answer (B):", "isx", "labels", "answered",
]
SPACES = [" ", " ", " ", "", "  ", "\t", "\n", "\n\n", " \n ", "\x0b", "\x1c"]


@st.composite
def texts(draw) -> str:
    parts = draw(st.lists(st.tuples(st.sampled_from(PIECES), st.sampled_from(SPACES)), min_size=1, max_size=24))
    return "".join(p + s for p, s in parts)


def plain_as_written(text: str) -> str:
    """`reply_text.plain` without its shortcuts."""
    text = reply_text._LATEX_WRAP.sub(r"\1", text)
    text = text.replace("$", "").replace("\\(", "").replace("\\)", "").replace("\\[", "").replace("\\]", "")
    text = text.replace("\\{", "{").replace("\\}", "}")
    return reply_text._MARKDOWN.sub("", text)


def assert_same(text: str) -> None:
    assert text.isascii()
    low = text.lower()
    assert R._fast_echo_removed(low) == R._ECHO_LIST.sub(" ", text).lower(), text
    for weak in (True, False):
        assert R._mentions(low, weak, R._FAST_FORMS) == R._mentions(text, weak, R._FORMS), (text, weak)
        echoless = R._ECHO_LIST.sub(" ", text)
        assert R._mentions(echoless.lower(), weak, R._FAST_FORMS) == R._mentions(echoless, weak, R._FORMS), (text, weak)
    assert [m.span() for m in R._FAST_CUE_WORD.finditer(low)] == [m.span() for m in R._CUE_WORD.finditer(text)]
    assert [m.span() for m in R._FAST_CONCLUDING.finditer(low)] == [m.span() for m in R._CONCLUDING.finditer(text)]
    assert reply_text.plain(text) == plain_as_written(text), text
    for line in text.split("\n"):
        assert [m.span() for m in R._FAST_CUE.finditer(line.lower())] == [m.span() for m in R._CUE.finditer(line)]
    assert R._FAST_SENTENCE_END.split(text) == R._SENTENCE_END.split(text), text
    assert R.explicit_answers(text) == explicit_answers_as_written(text), text
    assert R.concluding_tails(text) == concluding_tails_as_written(text), text


def explicit_answers_as_written(text: str) -> list[str]:
    """`read.explicit_answers` line by line with the patterns as written, no shortcut."""
    found = [(m.start(), m.group(1)) for m in R._BOXED.finditer(text)]
    lines = R._lines_with_offsets(text)
    for k, (line_start, line) in enumerate(lines):
        if R._ANSWER_HEADING_LINE.match(line):
            following = next((ln for _, ln in lines[k + 1:] if ln.strip()), None)
            if following:
                found.append((line_start, following.strip()))
            continue
        cues = list(R._CUE.finditer(line))
        for j, m in enumerate(cues):
            end = cues[j + 1].start() if j + 1 < len(cues) else len(line)
            body = line[m.end():end].strip()
            if not body and j + 1 == len(cues) and R._OPENS_A_STATEMENT.search(line[:m.end()]):
                body = next((ln.strip() for _, ln in lines[k + 1:] if ln.strip()), "")
            if body:
                found.append((line_start + m.start(), body))
    return [body for _, body in sorted(found, key=lambda x: x[0])]


def concluding_tails_as_written(text: str) -> list[tuple[str, str]]:
    out = []
    for s in reversed([s for s in R._SENTENCE_END.split(text) if s and s.strip()]):
        cues = list(R._CONCLUDING.finditer(s))
        if cues:
            out.append((s, s[cues[-1].end():]))
    return out


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts())
def test_the_fast_forms_read_generated_texts_as_the_patterns_as_written(text):
    assert_same(text)


@pytest.mark.parametrize("text", [
    "(a)      True, (b)\tFalse or (c) Unknown",  # an opening far before its list's first label
    "x(a) True / False",  # the opening glued to a word: the list starts at the label
    "(a)(b) True False",
    "1.\n\nTRUE | FALSE | UNKNOWN", "untrue or false", "TrueFalse Unknown", "true,false;unknown",
    "It is   not\tproved, so the answer is:\nFalse", "It cannot be proved or disproved.", "Isn't TRUE",
    "It is not proven or disproven", "it can not be proved", "been not proved", "not true, not false",
    "Neither true nor false: Unknown.", "Answer: **True**", "`False` # heading > quote",
    "Therefore, the answer is (B) true; thus false.", "in  conclusion: insufficient information",
    "The answer is:\n\n(B)", "Answer: A. Final answer: B", "## Final Answer\n\nTrue", "final   answer (short) = 3",
    "So.\n\nthus. hence!\tTherefore?  so", "Label:\nverdict is\n", "the answeris 3", "xanswer: 2",
    "Conclusion:True", "in\nconclusion: 4", "answer (a parenthesis longer than twenty): 3",
])
def test_the_fast_forms_read_the_hard_cases_as_the_patterns_as_written(text):
    assert_same(text)


def test_a_text_that_is_not_ascii_is_read_by_the_patterns_as_written():
    """Ignoring case is not lowercasing beyond ASCII (the Kelvin sign matches k, the long s matches s):
    such a text, and any CJK one, takes the patterns as written."""
    kelvin = "the answer is unknown\u212a"  # no label: a letter (K) follows the word
    assert R._label_mentions(kelvin, False) == R._mentions(kelvin, False, R._FORMS) == set()
    assert R._label_mentions("fal\u017fe", False) == {"False"}  # 'ſ' folds to 's' under re.IGNORECASE
    assert R.read_label("答案：正确").answer == "True"
    assert re.fullmatch(R._LABEL_RE["False"], "FAL\u017fE")


WORDISH = ["friction", "magnetism", "a", "é", "ß", "İ", "_", "1", "٣", "²", "·", "x_y", "option a", "-", "(b)", "",
           " ", ".", "Ǆ", "ﬁ", "日本"]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(WORDISH + SPACES), max_size=12), st.lists(st.sampled_from(WORDISH), min_size=1, max_size=3))
def test_an_option_text_is_named_as_the_pattern_names_it(parts, phrase_parts):
    """`names_text` (a substring with no word character either side) agrees with the pattern it
    replaced, `(?<!\\w)phrase(?!\\w)`, on texts of letters, digits, underscores, marks and spaces from
    several scripts (`\\w` is Unicode's alphanumerics and the underscore)."""
    text, phrase = "".join(parts), " ".join(phrase_parts).strip() or phrase_parts[0]
    assert R.names_text(text, phrase) == bool(re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text))
    assert R.names_text(text + phrase, phrase) == bool(re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", text + phrase))


CJK = ["答案：", "最终答案是", "结论：", "选项是", "所以", "因此", "正确", "错误", "未知", "。", "！", "？", "：", "日本"]


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(PIECES + CJK), st.sampled_from(SPACES)), min_size=1, max_size=24))
def test_the_answers_and_conclusions_of_any_text_are_those_the_patterns_as_written_find(parts):
    """Texts with CJK marks take the patterns as written, now matched inside the whole text: the
    same stated answers and concluding tails as line by line and sentence by sentence."""
    text = "".join(p + s for p, s in parts)
    assert R.explicit_answers(text) == explicit_answers_as_written(text), text
    assert R.concluding_tails(text) == concluding_tails_as_written(text), text
