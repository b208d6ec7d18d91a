"""Reading True / False / Unknown (and lettered choices) from the reply shapes models produce, with
the step that decided each reading (`validators.read`)."""

import pytest

from validators.read import normalise_gold_label, read_label, read_options
from validators.reply_text import UNKNOWN

CASES = [
    # (reply, label, method)
    ("True", "True", "strict"),
    ("false.", "False", "strict"),
    ("**Unknown**", "Unknown", "strict"),
    ("PROVED", "True", "strict"),
    ("DISPROVED", "False", "strict"),
    ("Final answer: True", "True", "final_answer"),
    ("Reasoning...\nFinal Answer: **False**", "False", "final_answer"),
    ("The final answer is: Unknown.", "Unknown", "final_answer"),
    ("Answer: (C) Unknown", "Unknown", "final_answer"),
    ("So the label is \\boxed{True}", "True", "final_answer"),
    ("\\boxed{\\text{False}}", "False", "final_answer"),
    ("答案：正确", "True", "final_answer"),
    ("最终答案：不确定", "Unknown", "final_answer"),
    ("结论：错误", "False", "final_answer"),
    ("final answer: true", "True", "final_answer"),
    # echoed label lists must not decide
    ("The options are True, False, or Unknown. The facts imply the hypothesis. Final answer: True", "True", "final_answer"),
    ("We must choose True/False/Unknown. From fact 2 and fact 5 the hypothesis follows. Therefore it is true.",
     "True", "conclusion"),
    ("Possible labels: PROVED | DISPROVED | UNKNOWN\nThe contradiction shows it is disproved.", "False", "scan"),
    ("(A) True (B) False (C) Unknown\nThe context never mentions the dog, so the answer cannot be determined.",
     "Unknown", "conclusion"),
    ("Answer with True, False, or Unknown: the hypothesis is false.", "False", "scan"),
    # "insufficient" inside the reasoning does not make it Unknown
    ("At first the facts seem insufficient, but combining fact 1 and fact 3 we get the hypothesis. So it is true.",
     "True", "conclusion"),
    ("The premises are insufficient to decide whether Bob is tall. Therefore the statement is uncertain.",
     "Unknown", "conclusion"),
    ("There is not enough information, thus the hypothesis cannot be concluded.", "Unknown", "conclusion"),
    ("Hence, the hypothesis is not true.", "False", "conclusion"),
    ("Thus the claim is not false.", "True", "conclusion"),
    ("In conclusion, the statement is true.", "True", "conclusion"),
    ("所以答案是真", "True", "final_answer"),
    ("Based on the facts, the hypothesis is clearly false given that rule 3 contradicts it", "False", "scan"),
    ("Rule 3 contradicts it, which makes it false", "False", "scan"),
    ("True False Unknown\nThe dog is red by fact 4, and fact 4 is all we need; it is proved.", "True", "scan"),
    ("It's unknown whether the cat is blue", "Unknown", "scan"),
    ("Label: Uncertain", "Unknown", "final_answer"),
    # several labels and no conclusion: undecided, never Unknown
    ("It could be true or it could be false depending on the reading of rule 2, I think it might be unknown",
     None, "needs_judge"),
    ("The sky is blue and grass is green.", None, "needs_judge"),
    ("", None, "empty"),
    ("   \n ", None, "empty"),
    (None, None, "empty"),
]


@pytest.mark.parametrize("reply,label,method", CASES)
def test_reply_shapes(reply, label, method):
    out = read_label(reply)
    assert (out.answer, out.method) == (label, method)


def test_there_are_at_least_thirty_shapes():
    assert len(CASES) >= 30


def test_unparsed_and_empty_are_not_unknown():
    assert read_label("I am not sure what to say").answer is None
    assert read_label("").answer is None


@pytest.mark.parametrize("raw,label", [("PROVED", "True"), ("DISPROVED", "False"), ("UNKNOWN", "Unknown"),
                                        ("True", "True"), ("False", "False"), ("Uncertain", "Unknown"),
                                        ("Unknown", "Unknown"), (" proved ", "True")])
def test_gold_label_normalisation(raw, label):
    assert normalise_gold_label(raw) == label


def test_unrecognised_gold_label_is_an_error():
    with pytest.raises(ValueError, match="unknown label 'Maybe'"):
        normalise_gold_label("Maybe")


CHOICES = ["friction", "magnetism", "gravity"]


@pytest.mark.parametrize("reply,choice,method", [
    ("Final answer: (A)", "friction", "final_answer"),
    ("Final answer: A) friction", "friction", "final_answer"),
    ("Final answer: magnetism", "magnetism", "final_answer"),
    ("Final answer: Unknown", "Unknown", "final_answer"),
    ("The answer is \\boxed{C}", "gravity", "final_answer"),
    ("B", "magnetism", "strict"),
    ("(c)", "gravity", "strict"),
    ("friction.", "friction", "strict"),
    ("Unknown", "Unknown", "strict"),
    ("The box rubs on the floor, so the force is friction.", "friction", "conclusion"),
    ("Without the missing sentences, so the answer cannot be determined.", "Unknown", "conclusion"),
    ("Options (A) friction (B) magnetism (C) gravity were given. Hmm.", None, "needs_judge"),
    ("It is either friction or gravity, hard to say", None, "needs_judge"),
    ("Final answer: (F)", None, "needs_judge"),
    ("", None, "empty"),
])
def test_choice_reply_shapes(reply, choice, method):
    out = read_options(reply, CHOICES, unknown=True)
    got = out.answer if out.answer in (None, UNKNOWN) else CHOICES[next(iter(out.answer)) - 1]
    assert (got, out.method) == (choice, method)
