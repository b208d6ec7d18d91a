"""How a reply ended, named once: every reply check and metric reads these words.

A reply either was not had (`call_failed`: the model call failed; `judge_failed`: the call
succeeded but the judge's call did not), or was had and read to an answer, or was had and gave
no answer, not even to the judge (undecided). `validators.read` and `validators.judge` name the
reading methods; the ones that leave no answer are `NO_ANSWER`.
"""

from __future__ import annotations

CALL_FAILED = "call_failed"
JUDGE_FAILED = "judge_failed"
FAILED = frozenset({CALL_FAILED, JUDGE_FAILED})
UNDECIDED = "undecided"  # the outcome or output category of a reply read to no answer
NEEDS_JUDGE = "needs_judge"  # the reading method when no exact reading exists: the caller may ask a judge
# reading methods after which no answer exists: nothing in the reply (or only unfinished thinking),
# or a judge that could not read it or found none
NO_ANSWER = frozenset({"empty", "unfinished_thinking", "judge_unreadable", "judge_no_answer"})


def failed(method_or_outcome: str | None) -> bool:
    return method_or_outcome in FAILED


def no_answer(method: str | None) -> bool:
    return method in NO_ANSWER


def undecided(method: str | None, outcome: str | None = None) -> bool:
    """The one definition every run-health check counts: a reply that was had (its call, and any
    judge's, succeeded) and was read to no answer, not even by the judge: its reading `method` left
    no answer, or the family recorded its `outcome` (or output category) as undecided."""
    return not failed(method) and not failed(outcome) and (no_answer(method) or outcome == UNDECIDED)
