"""Agent, pool and subject names checked in Python match what the API's patterns (and
Postgres's checks) accept: Python's '$' also matches before a trailing newline, so every
check must hold for the whole string."""

from __future__ import annotations

import pytest

from memworker import errors
from memworker.domain.policy import Policy
from memworker.erase import forget
from memworker.fleet import pools
from memworker.recall import hybrid as recall


@pytest.mark.parametrize("name", ["alice\n", "a/b", "", "-x"])
def test_a_name_must_be_the_whole_string(name: str) -> None:
    with pytest.raises(errors.InvalidInput):
        recall.Query("refunds", 5, subject=name).validate()
    with pytest.raises(errors.InvalidInput):
        forget.Request(subject=name).validate()
    with pytest.raises(errors.InvalidInput):
        pools.owner(name)
    with pytest.raises(errors.InvalidInput):
        Policy.resolve({"pools_read": [name]})


def test_good_names_pass() -> None:
    recall.Query("refunds", 5, subject="user:42@example.org").validate()
    forget.Request(subject="alice").validate()
    assert pools.owner("faq") == "pool~faq"
    assert Policy.resolve({"pools_write": ["faq", "faq"]}).pools_write == ("faq",)
