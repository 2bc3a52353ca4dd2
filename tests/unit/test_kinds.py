"""The offline reflector's second opinion from the kinds' examples (memworker/models/kinds.py),
on the real embedding model: small talk without a cue leaves, an untyped fact may take a kind,
and nothing else is touched."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from memworker import reflection
from memworker.models import kinds


def _kept(text: str, embedder: Any) -> list[reflection.Item]:
    result = reflection.OfflineReflector().reflect(reflection.Episode(text, [{"role": "user", "content": text}]))
    return reflection.settled(result, embedder).items


@pytest.mark.parametrize(
    "text",
    [
        "Honestly, you made my whole week.",
        "I'm just glad we got through it together.",
        "Can't complain, all things considered.",
        "Hope the rest of your trip is just as fun.",
    ],
)
def test_small_talk_the_rules_let_through_is_no_item(text: str, embedder: Any) -> None:
    assert reflection.OfflineReflector().reflect(reflection.Episode(text, [{"role": "user", "content": text}])).items
    assert _kept(text, embedder) == []


@pytest.mark.parametrize(
    "text",
    [
        "My brother is a pilot for a cargo airline.",
        "Honestly, Porto made my whole week.",  # names a place: kept, whatever its tone
        "I'm so glad we finally have 3 people on call.",  # a number: kept
    ],
)
def test_a_statement_or_a_named_thing_stays(text: str, embedder: Any) -> None:
    assert len(_kept(text, embedder)) == 1


def test_an_untyped_fact_takes_the_kind_of_its_nearest_examples(embedder: Any) -> None:
    [item] = _kept("Nothing beats a quiet morning with a good book.", embedder)
    assert item.kind == "preference"
    assert type(item.kind) is str  # stored and sent as JSON


def test_an_item_with_a_cue_or_from_an_llm_is_left_as_it_is(embedder: Any) -> None:
    cue = reflection.Item("Sounds like we decided to keep it simple.", "decision", 0.7)
    told = reflection.Item("Honestly, you made my whole week.", "fact", 0.7)
    vectors = embedder.embed([cue.text, told.text])
    offline, rows = reflection.settle(reflection.Reflection([cue, told], "offline"), vectors, embedder)
    assert offline.items == [cue]
    assert np.array_equal(rows, vectors[:1])  # the rows of the items kept, in order
    llm, rows = reflection.settle(reflection.Reflection([cue, told], "llm:some-model"), vectors, embedder)
    assert llm.items == [cue, told] and np.array_equal(rows, vectors)


def test_every_kind_has_examples_and_a_stray_line_is_an_error(tmp_path: Any) -> None:
    found = {k for k, _ in kinds.read_examples()}
    assert found == {kinds.SMALL_TALK, "fact", "preference", "event", "decision", "method"}
    bad = tmp_path / "kinds.txt"
    bad.write_text("# a comment\nA sentence before any kind.\n[fact]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="before any"):
        kinds.read_examples(bad)


def test_a_dropped_item_gives_its_place_to_the_next_spare_that_holds(embedder: Any) -> None:
    chat = reflection.Item("Honestly, you made my whole week.", "fact", 0.7)
    fact = reflection.Item("My brother is a pilot for a cargo airline.", "fact", 0.7)
    spares = [
        reflection.Item("Can't complain, all things considered.", "fact", 0.7),  # small talk too
        reflection.Item("Our landlord is selling the building in spring.", "fact", 0.7),
        reflection.Item("We keep two kayaks in the garage.", "fact", 0.7),  # not needed
    ]
    vectors = embedder.embed([chat.text, fact.text])
    settled, rows = reflection.settle(reflection.Reflection([chat, fact], "offline", spare=spares), vectors, embedder)
    assert [i.text for i in settled.items] == [fact.text, spares[1].text]
    assert settled.spare == []
    assert np.allclose(rows, embedder.embed([fact.text, spares[1].text]), atol=1e-4)


def test_a_longer_episode_keeps_more_items() -> None:
    assert reflection.item_cap(1) == reflection.item_cap(10) == reflection.MAX_ITEMS
    assert reflection.item_cap(11) == 6 and reflection.item_cap(30) == 15
    said = [f"My cousin number {i} lives by the harbour and works at the ferry office." for i in range(20)]
    episode = reflection.Episode("", [{"role": "user", "content": s} for s in said])
    result = reflection.OfflineReflector().reflect(episode)
    assert len(result.items) == 10 and len(result.spare) == 10


def test_kept_items_stay_in_the_order_their_messages_were_said(embedder: Any) -> None:
    # governance takes a later item as the newer: a spare said first must not come out last
    said = [reflection.Item("Our launch date is May 2.", "fact", 0.7, (0,))]
    chat = reflection.Item("Honestly, you made my whole week.", "fact", 0.7, (1,))
    later = reflection.Item("The launch slipped to May 9 after the audit.", "event", 0.7, (5,))
    settled = reflection.settled(reflection.Reflection([chat, later], "offline", spare=said), embedder)
    assert [i.messages for i in settled.items] == [(0,), (5,)]


def test_spares_are_saved_with_the_reflection() -> None:
    spare = reflection.Item("We keep two kayaks in the garage.", "fact", 0.7, (2,))
    saved = reflection.Reflection([], "offline (llm failed: timeout)", llm_calls=1, spare=[spare])
    assert reflection.Reflection.from_json(saved.to_json()).spare == [spare]
