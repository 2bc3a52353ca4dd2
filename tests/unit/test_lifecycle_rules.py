"""The pure lifecycle rules: confidence, promotion, contradiction, merge and the plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memworker.domain import rules
from memworker.domain.policy import Policy
from memworker.domain.rules import Fact, Pair

T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = Policy()


def fact(
    i: str,
    text: str,
    *,
    kind: str = "fact",
    tier: str = "L1",
    confidence: float = 0.7,
    days: float = 0,
    access: int = 0,
) -> Fact:
    return Fact(i, text, kind, tier, confidence, T0 + timedelta(days=days), access)


def test_confidence_grows_toward_one_and_never_past_it() -> None:
    c = 0.7
    seen = []
    for _ in range(30):
        c = rules.grow_confidence(c, 0.7, 0.2)
        seen.append(c)
    assert seen == sorted(seen) and seen[0] == pytest.approx(0.76) and seen[-1] < 1.0
    assert rules.grow_confidence(0.5, 0.9, 0.2) == pytest.approx(0.92)  # the new evidence counts
    assert rules.grow_confidence(1.0, 0.1, 0.2) == 1.0


def test_decay_halves_per_half_life_and_respects_the_floor() -> None:
    assert rules.decayed(0.8, 30, 30) == pytest.approx(0.4)
    assert rules.decayed(0.8, 60, 30) == pytest.approx(0.2)
    assert rules.decayed(0.8, 600, 30, floor=0.1) == 0.1
    assert rules.decayed(0.05, 600, 30, floor=0.1) == 0.05  # already under the floor: stays
    assert rules.decayed(0.8, 10, None) == 0.8 and rules.decayed(0.8, 0, 30) == 0.8
    # incremental application composes: two sweeps equal one
    assert rules.decayed(rules.decayed(0.8, 12, 30), 18, 30) == pytest.approx(rules.decayed(0.8, 30, 30))


@pytest.mark.parametrize(
    "kwargs,expected",
    [
        (dict(tier="L1", access_count=3, confirmations=0, confidence=0.5, connected=False), "recalled 3 times"),
        (
            dict(tier="L1", access_count=0, confirmations=0, confidence=0.5, connected=True),
            "connected by consolidation",
        ),
        (dict(tier="L1", access_count=0, confirmations=2, confidence=0.85, connected=False), "confirmed by 2"),
        (dict(tier="L1", access_count=2, confirmations=1, confidence=0.79, connected=False), None),
        (dict(tier="L1", access_count=0, confirmations=0, confidence=0.99, connected=False), None),  # sure, unconfirmed
        (dict(tier="L0", access_count=9, confirmations=9, confidence=0.99, connected=True), None),  # scratch stays
        (dict(tier="L2", access_count=99, confirmations=9, confidence=0.99, connected=True), None),  # L3 only by hand
    ],
)
def test_promotion_needs_evidence_and_stops_at_l2(kwargs: dict, expected: str | None) -> None:
    reason = rules.promotion_reason(policy=POLICY, **kwargs)
    assert (reason is None) if expected is None else (reason is not None and reason.startswith(expected))


@pytest.mark.parametrize(
    "older,newer,how",
    [
        ("The project uses Python 3.9.", "The project now definitely uses Python 3.11.", "value"),
        ("The deploy target is Postgres 16 on Hetzner.", "The deploy target is Postgres 17 on Hetzner.", "value"),
        ("The cluster has 3 nodes.", "The cluster has 5 nodes.", "value"),
        ("The customer prefers email.", "The customer prefers phone.", "swap"),
        ("Our office is in Berlin.", "Our office is in Lisbon.", "swap"),
        ("The cache is enabled.", "The cache is not enabled.", "negation"),
        ("We use Jira.", "We don't use Jira.", "negation"),
        ("Ticket 4411 is about SSO.", "Ticket 4412 is about SSO.", None),  # a different subject
        ("Bob is on call.", "Alice is on call.", None),
        ("Alice likes tea.", "Alice likes coffee.", None),  # liking both is fine
        ("The cluster has a dog.", "The cluster has a cat.", None),  # 'has' only changes numbers
        ("Release 17 shipped feature 17.", "Release 18 shipped feature 18.", None),
        ("The office is in Berlin.", "The office is in Berlin.", None),
        ("The meeting is on Monday with design.", "The meeting is on Monday with the sales team.", None),
        ("我们使用 Python 3.9", "我们使用 Python 3.11", None),  # no verb we know: left alone
    ],
)
def test_contradiction_needs_the_same_subject_and_attribute(older: str, newer: str, how: str | None) -> None:
    assert rules.contradiction(older, newer) == how


def test_judge_supersedes_when_sure_reviews_otherwise() -> None:
    old = fact("a", "The project uses Python 3.9.", days=0)
    sure = fact("b", "The project uses Python 3.11.", days=1, confidence=0.95)
    unsure = fact("c", "The project uses Python 3.12.", days=2, confidence=0.5)
    v = rules.judge(old, sure, POLICY)
    assert v is not None and v.action == "supersede" and v.older.id == "a" and "value" in v.reason
    v = rules.judge(old, unsure, POLICY)
    assert v is not None and v.action == "review" and "0.50" in v.reason
    canonical = fact("d", "The project uses Python 3.8.", tier="L3")
    v = rules.judge(canonical, sure, POLICY)
    assert v is not None and v.action == "review" and "L3" in v.reason
    event_old = fact("e", "The deploy is at 9:00.", kind="event")
    assert rules.judge(event_old, fact("f", "The deploy is at 10:00.", kind="event", confidence=1.0), POLICY) is None
    assert rules.ordered(sure, old) == (old, sure)


def test_merge_needs_cosine_words_and_numbers() -> None:
    a = fact("a", "The on-call rotation changes every Monday.")
    b = fact("b", "The on-call rotation changes every monday!")
    assert rules.mergeable(a, b, 0.97, POLICY)
    assert not rules.mergeable(a, b, 0.80, POLICY)  # under merge_similarity
    assert not rules.mergeable(fact("c", "Ticket 1 is open."), fact("d", "Ticket 11 is open."), 0.99, POLICY)
    assert not rules.mergeable(
        fact("e", "The customer prefers email."), fact("f", "The customer prefers phone.", days=1), 0.99, POLICY
    )
    assert not rules.mergeable(fact("g", a.text, tier="L3"), b, 0.99, POLICY)
    assert rules.mergeable(a, b, 0.86, Policy(merge_similarity=0.85))


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("Refund approved for invoice INV2024001 yesterday.", "Refund approved for invoice INV2024002 yesterday."),
        ("Nightly backups land on srv12 after midnight.", "Nightly backups land on srv47.example.net after midnight."),
        ("Nightly backups land on db-01 after midnight.", "Nightly backups land on db-02 after midnight."),
        ("We upgraded the agent to v1.2.3 last week.", "We upgraded the agent to v1.2.4 last week."),
        ("Customer reported the outage in OPS-4411 today.", "Customer reported the outage in OPS-4412 today."),
        ("The router answers at 10.0.0.1 in the lab.", "The router answers at 10.0.0.2 in the lab."),
    ],
)
def test_merge_never_folds_two_different_identifiers(older: str, newer: str) -> None:
    """Ids, hostnames, versions and ticket numbers must match exactly."""
    assert rules.contradiction(older, newer) is None  # only the identifier rule can refuse these
    assert not rules.mergeable(fact("a", older), fact("b", newer, days=1), 0.99, POLICY)
    assert rules.mergeable(fact("a", older), fact("b", older.upper(), days=1), 0.99, POLICY)


def test_the_survivor_keeps_protection_then_tier_then_use() -> None:
    ep = fact("e", "x", access=50, tier="L2")
    ins = fact("i", "x", kind="insight")
    assert rules.survivor(ep, ins)[0] is ins
    assert rules.survivor(fact("a", "x", tier="L1", access=9), fact("b", "x", tier="L2"))[0].id == "b"
    assert rules.survivor(fact("a", "x", access=1), fact("b", "x", access=4))[0].id == "b"
    assert rules.survivor(fact("a", "x", days=5), fact("b", "x", days=1))[0].id == "b"  # the older


def test_plan_retires_before_merging_and_uses_each_memory_once() -> None:
    facts = {
        f.id: f
        for f in [
            fact("old", "The project uses Python 3.9.", days=0),
            fact("new", "The project uses Python 3.11.", days=1, confidence=0.95),
            fact("d1", "The build server is called hal9000.", days=0, access=2),
            fact("d2", "The build server is called hal9000!", days=1),
            fact("d3", "the build server is called HAL9000", days=2),
            fact("r1", "The customer prefers email.", days=0),
            fact("r2", "The customer prefers phone.", days=1, confidence=0.6),
        ]
    }
    pairs = [
        Pair("old", "new", 0.99),
        Pair("new", "old", 0.99),
        Pair("d1", "d2", 0.99),
        Pair("d2", "d3", 0.98),
        Pair("d1", "d3", 0.97),
        Pair("r1", "r2", 0.95),
        Pair("x", "d1", 0.99),
    ]
    p = rules.plan(pairs, facts, POLICY)
    assert [(v.older.id, v.newer.id) for v in p.supersede] == [("old", "new")]
    assert [(v.older.id, v.newer.id) for v in p.review] == [("r1", "r2")]
    merged = {(keep.id, away.id) for keep, away, _ in p.merge}
    assert merged == {("d1", "d2"), ("d1", "d3")}  # d1 was recalled: it survives both
    assert all("old" not in pair and "r1" not in pair for pair in merged)  # never merged with a contradiction
