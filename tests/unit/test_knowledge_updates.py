"""Knowledge updates (memworker.lifecycle.updates, through rules.changed): a statement that
says the opposite of a live memory is a change, never a confirmation or a merge; a true
paraphrase is not a change. The pair set is tests/data/knowledge_updates.jsonl (the bench
bench/knowledge_updates.py prints its rates)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memworker import memories
from memworker.lifecycle import rules, updates
from memworker.policy import Policy

PAIRS = [json.loads(line) for line in (Path(__file__).parent.parent / "data" / "knowledge_updates.jsonl").open()]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _fact(i: str, text: str, *, confidence: float = 0.95, tier: str = "L1", kind: str = "preference") -> rules.Fact:
    return rules.Fact(i, text, kind, tier, confidence, T0 + timedelta(minutes=int(i)))


def test_the_pair_set_covers_every_shape() -> None:
    shapes = {p["shape"] for p in PAIRS}
    assert shapes == {"swap", "negation", "value", "paraphrase"}
    assert all(sum(p["shape"] == s for p in PAIRS) >= 15 for s in shapes)


@pytest.mark.parametrize("shape", ["swap", "negation", "value"])
def test_every_update_in_the_set_is_a_change(shape: str) -> None:
    missed = [p for p in PAIRS if p["shape"] == shape and rules.changed(p["older"], p["newer"]) is None]
    assert missed == []


def test_paraphrases_are_mostly_not_changes() -> None:
    para = [p for p in PAIRS if p["shape"] == "paraphrase"]
    wrong = [p for p in para if rules.changed(p["older"], p["newer"]) is not None]
    assert len(wrong) / len(para) <= 0.1, wrong


@pytest.mark.parametrize(
    ("older", "newer", "how"),
    [
        ("prefers phone, never email", "prefers email, never phone", "swap"),
        ("The team prefers Python over Go", "The team prefers Go over Python", "swap"),
        ("Alice reports to Bob", "Bob reports to Alice", "swap"),
        ("The client moved from Berlin to Lisbon", "The client moved from Lisbon to Berlin", "swap"),
        ("The customer wants weekly reports", "The customer doesn't want weekly reports", "negation"),
        ("The service uses Redis", "The service no longer uses Redis", "negation"),
        ("The client can share data", "The client cannot share data", "negation"),
        ("The plan is Enterprise with 40 seats", "The plan is Starter with 3 seats", "value"),
        ("Dana lives in Berlin", "Dana lives in New York", "value"),
        ("The meeting is on March 3", "The meeting is on March 5", "value"),
    ],
)
def test_shapes_are_named(older: str, newer: str, how: str) -> None:
    assert updates.change(older, newer) == how


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("The team uses Python and Go", "The team uses Go and Python"),  # a list, reordered
        ("On Mondays the team meets at 9", "The team meets at 9 on Mondays"),  # a phrase moved
        ("The client moved from Berlin to Lisbon", "The client moved to Lisbon from Berlin"),
        ("Ticket 4411 is about SSO", "Ticket 4412 is about SSO"),  # another ticket: two facts
        ("Meeting with Dana is on Friday", "Meeting with Omar is on Friday"),  # another meeting
        ("Dana lives in Berlin", "Dana still lives in Berlin"),  # a filler
        ("The user doesn't use Slack", "The user never uses Slack"),  # both negated
        ("The customer prefers email", "The customer prefers email, never phone"),  # more detail
        ("", "Anything at all"),
    ],
)
def test_not_changes(older: str, newer: str) -> None:
    assert rules.changed(older, newer) is None


def test_a_swapped_preference_supersedes_when_sure_and_is_reviewed_when_not() -> None:
    old = _fact("1", "The customer prefers email over phone.")
    sure = rules.judge(old, _fact("2", "The customer prefers phone over email."), Policy())
    assert sure is not None and sure.action == "supersede" and sure.reason.startswith("swap")
    unsure = rules.judge(old, _fact("3", "The customer prefers phone over email.", confidence=0.5), Policy())
    assert unsure is not None and unsure.action == "review"
    canonical = rules.judge(
        _fact("1", old.text, tier="L3"), _fact("2", "The customer prefers phone over email."), Policy()
    )
    assert canonical is not None and canonical.action == "review"


def test_opposites_are_never_merged_even_with_the_same_words() -> None:
    a = _fact("1", "The customer prefers to be contacted by email, never by phone.")
    b = _fact("2", "The customer prefers to be contacted by phone, never by email.")
    assert memories.says_the_same(a.text, b.text)  # the words alone would fold one into the other
    assert not rules.mergeable(a, b, 0.99, Policy())
    plan = rules.plan([rules.Pair("1", "2", 0.99)], {"1": a, "2": b}, Policy())
    assert plan.merge == [] and [v.older.id for v in plan.supersede] == ["1"]


def test_paraphrases_still_merge() -> None:
    a = _fact("1", "The team uses Python and Go.")
    b = _fact("2", "The team uses Go and Python.")
    assert rules.mergeable(a, b, 0.99, Policy())


def test_subject_of_messages() -> None:
    msgs = [{"content": "x", "subject": "kim"}, {"content": "y", "subject": "lee"}, {"content": "z"}]
    assert memories.subject_of(msgs, (0,), None) == "kim"
    assert memories.subject_of(msgs, (1,), "team") == "lee"
    assert memories.subject_of(msgs, (2,), "team") == "team"  # a message without one: the episode's
    assert memories.subject_of(msgs, (0, 1), "team") == "team"  # two people: not one person's item
    assert memories.subject_of(None, (), "team") == "team"
    assert memories.subject_of(msgs, (0, 7), None) == "kim"  # an index out of range names nobody
