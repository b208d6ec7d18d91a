"""Every written reply in tests/replies/ is read as a careful grader reads it (issue: one reader)."""

import pytest

from tests.reply_corpus import KINDS, cases, expected, reading

ALL = [(kind, k, c) for kind in KINDS for k, c in enumerate(cases(kind))]


@pytest.mark.parametrize("kind,index,case", ALL, ids=[f"{kind}-{k}" for kind, k, _ in ALL])
def test_reply_is_read_as_written(kind, index, case):
    assert reading(kind, case) == expected(kind, case), case.get("note") or case["reply"]


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_has_at_least_40_replies(kind):
    assert len(cases(kind)) >= 40
