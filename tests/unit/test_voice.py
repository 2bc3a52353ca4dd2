"""An item told in its speaker's name (memworker/domain/voice.py, reflection.settle): "I" says
who only beside its message; the memory says it in words."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from memworker import reflection
from memworker.domain import rules, voice
from memworker.domain.policy import Policy


@pytest.mark.parametrize(
    ("said", "told"),
    [
        ("I went to a support group yesterday.", "Caroline went to a support group yesterday."),
        ("I'm starting a new job at the bakery.", "Caroline is starting a new job at the bakery."),
        ("I really love painting with my kids.", "Caroline really loves painting with Caroline's kids."),
        ("My friends gave me a gift.", "Caroline's friends gave Caroline a gift."),
        ("I've been fixing cars since I was a kid.", "Caroline has been fixing cars since Caroline was a kid."),
        ("I do 20 push-ups and I watch my diet.", "Caroline does 20 push-ups and Caroline watches Caroline's diet."),
        ("I don't eat meat and I haven't for years.", "Caroline doesn't eat meat and Caroline hasn't for years."),
        ("I think I'll try pottery next.", "Caroline thinks Caroline will try pottery next."),
        ("I'd love to visit; I'd been there once.", "Caroline would love to visit; Caroline had been there once."),
        (
            "I try to stay positive, I wish I could go.",
            "Caroline tries to stay positive, Caroline wishes Caroline could go.",
        ),
        ("i just finished my first marathon", "Caroline just finished Caroline's first marathon"),
        ("Max and I love long walks.", "Max and Caroline love long walks."),  # one of two subjects
        ("My wife and I love Lyon.", "Caroline's wife and Caroline love Lyon."),
        ("I love it and I adore my cat.", "Caroline loves it and Caroline adores Caroline's cat."),
        ("We moved to Lyon, i.e. near our parents.", "We moved to Lyon, i.e. near our parents."),  # "we" says no one
    ],
)
def test_the_first_person_is_told_in_the_speakers_name(said: str, told: str) -> None:
    assert voice.told_by(said, "Caroline") == told


@pytest.mark.parametrize(
    ("name", "person"),
    [
        ("Caroline", "Caroline"),
        ("Mary Ann", "Mary Ann"),
        ("ops-bot", None),
        ("user_42", None),
        ("", None),
        (None, None),
        ("alice", None),
    ],
)
def test_only_a_persons_name_is_told_in(name: str | None, person: str | None) -> None:
    assert voice.person(name) == person


def _items(messages: list[dict[str, str]], embedder: Any) -> list[reflection.Item]:
    result = reflection.OfflineReflector().reflect(reflection.Episode("", messages))
    return reflection.settled(result, embedder).items


def test_an_item_is_told_in_the_name_its_message_gives(embedder: Any) -> None:
    items = _items(
        [
            {"role": "user", "name": "Caroline", "content": "I prefer painting sunsets with watercolours."},
            {"role": "user", "name": "ops-bot", "content": "I restarted the ingest worker on node 3 at noon."},
            {"role": "user", "content": "I moved the standup to 9:30 on Tuesdays."},
        ],
        embedder,
    )
    by_message = {i.messages: i for i in items}
    told = by_message[(0,)]
    # told in the name; its kind read from the words as said ("I prefer": a preference)
    assert told.text == "Caroline prefers painting sunsets with watercolours."
    assert told.kind == "preference" and told.teller == "Caroline"
    assert by_message[(1,)].text.startswith("I restarted")  # a handle is no person's name
    assert by_message[(2,)].text.startswith("I moved") and by_message[(2,)].teller is None


def test_a_told_item_is_embedded_as_told(embedder: Any) -> None:
    result = reflection.OfflineReflector().reflect(
        reflection.Episode("", [{"role": "user", "name": "Caroline", "content": "I adopted a rescue dog named Max."}])
    )
    settled, rows = reflection.settle(result, embedder.embed([i.text for i in result.items]), embedder)
    (item,) = settled.items
    assert item.text == "Caroline adopted a rescue dog named Max."
    assert float(rows[0] @ embedder.embed([item.text])[0]) == pytest.approx(1.0, abs=1e-5)


def test_a_told_item_survives_a_round_trip_through_json() -> None:
    item = reflection.Item("Caroline adopted a dog.", "event", 0.7, (0,), ("Caroline",), ("dog",), teller="Caroline")
    result = reflection.Reflection([item], "offline")
    assert reflection.Reflection.from_json(result.to_json()).items == [item]


def _told(fact_id: str, said: str, speaker: str, day: int) -> rules.Fact:
    return rules.Fact(fact_id, voice.told_by(said, speaker), "fact", "L1", 0.8, datetime(2026, 1, day), 0, speaker)


def test_the_rules_judge_a_told_item_as_said() -> None:
    # one speaker's change is an update; two speakers' values are two facts, as when both said "I"
    older = _told("a", "I live in Porto.", "Caroline", 1)
    assert older.text == "Caroline lives in Porto."
    moved = rules.judge(older, _told("b", "I live in Lyon now.", "Caroline", 2), Policy())
    assert moved is not None and moved.action == "supersede"
    assert rules.judge(older, _told("c", "I live in Lyon now.", "Melanie", 2), Policy()) is None
    assert voice.as_said("Caroline thinks Caroline's dog is shy.", "Caroline") == "I thinks my dog is shy."
