"""Knowledge updates (memworker.domain.updates, through rules.changed): a statement that
says the opposite of a live memory is a change, never a confirmation or a merge; a true
paraphrase is not a change. The pair set is tests/data/knowledge_updates.jsonl (the bench
bench/knowledge_updates.py prints its rates)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memworker.domain import memories, rules, updates
from memworker.domain.policy import Policy

PAIRS = [json.loads(line) for line in (Path(__file__).parent.parent / "data" / "knowledge_updates.jsonl").open()]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _fact(i: str, text: str, *, confidence: float = 0.95, tier: str = "L1", kind: str = "preference") -> rules.Fact:
    return rules.Fact(i, text, kind, tier, confidence, T0 + timedelta(minutes=int(i)))


def test_the_pair_set_covers_every_shape() -> None:
    shapes = {p["shape"] for p in PAIRS}
    assert shapes == {"swap", "negation", "value", "paraphrase", "near-miss"}
    assert all(sum(p["shape"] == s for p in PAIRS) >= 15 for s in shapes)


@pytest.fixture(scope="module")
def cosines(embedder: Any) -> list[float]:
    """Each pair's cosine under the bundled embedder: what ingest's dedup compares."""
    vectors = np.asarray(embedder.embed([t for p in PAIRS for t in (p["older"], p["newer"])]), dtype=np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [float(vectors[2 * i] @ vectors[2 * i + 1]) for i in range(len(PAIRS))]


def _confirmed(cosines: list[float], shape: str, *, restated: float | None) -> list[bool]:
    policy = Policy()
    return [
        rules.confirms(p["older"], p["newer"], c, similarity=policy.dedup_similarity, restated=restated)
        for p, c in zip(PAIRS, cosines, strict=True)
        if p["shape"] == shape
    ]


def test_dedup_confirms_nine_in_ten_paraphrases_at_their_real_cosine(cosines: list[float]) -> None:
    restated = _confirmed(cosines, "paraphrase", restated=Policy().dedup_restated_similarity)
    words_only = _confirmed(cosines, "paraphrase", restated=None)
    assert sum(restated) / len(restated) >= 0.9
    assert sum(restated) > sum(words_only)  # the restated bar is what lifts it


@pytest.mark.parametrize("shape", ["swap", "negation", "value", "near-miss"])
def test_dedup_never_confirms_an_update_or_a_near_miss(cosines: list[float], shape: str) -> None:
    wrong = [
        p
        for p, ok in zip(
            [p for p in PAIRS if p["shape"] == shape],
            _confirmed(cosines, shape, restated=Policy().dedup_restated_similarity),
            strict=True,
        )
        if ok
    ]
    assert wrong == []


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("The user does not use Slack.", "The user never uses Slack."),  # a negation said otherwise
        ("The customer's plan is Enterprise.", "The customer is on the Enterprise plan."),
        ("The team deploys on Thursdays.", "The team always deploys on Thursdays."),  # a filler
        ("The user wants answers in English.", "The user wants answers in English, please."),
    ],
)
def test_restated(older: str, newer: str) -> None:
    assert updates.restates(older, newer) and rules.changed(older, newer) is None
    assert rules.confirms(older, newer, 0.86, similarity=0.95, restated=0.85)
    assert not rules.confirms(older, newer, 0.84, similarity=0.95, restated=0.85)  # still a cosine bar
    assert not rules.confirms(older, newer, 0.86, similarity=0.95)  # off without the restated bar


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("The customer's account manager is Priya.", "The customer's billing contact is Priya."),
        ("The keys are in the drawer.", "The keys are on the drawer."),  # light words, one each
        ("The flight is to Paris.", "The flight is from Paris."),  # direction words are content
        ("The API uses JSON over HTTPS.", "The API uses JSON over HTTPS only."),  # a word added
        ("The monthly budget is 4000 euros.", "The monthly budget is 5000 euros."),
    ],
)
def test_not_restated(older: str, newer: str) -> None:
    assert not updates.restates(older, newer)


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("The user does not use Slack but uses Teams.", "The user uses Slack but does not use Teams."),
        ("Only admins can delete projects.", "Admins can only delete projects."),
    ],
)
def test_a_negation_or_only_moved_onto_another_word_is_a_change(older: str, newer: str) -> None:
    assert updates.change(older, newer) == "swap" and not updates.reordered(older, newer)
    assert not rules.confirms(older, newer, 0.99, similarity=0.95, restated=0.85)


def test_what_was_never_confirms_or_merges_what_is() -> None:
    was, now = "The customer was on the Enterprise plan.", "The customer is on the Enterprise plan."
    former = "The customer's former account manager is Priya."
    assert updates.timed_apart(was, now) and updates.timed_apart(former, "The customer's account manager is Priya.")
    assert not updates.timed_apart("Dana lives in Berlin.", "Dana still lives in Berlin.")
    assert not rules.confirms(was, now, 0.99, similarity=0.95, restated=0.85)
    assert rules.changed(was, now) is None  # not an update either: both can be true
    assert not rules.mergeable(_fact("1", was), _fact("2", now), 0.99, Policy())


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
