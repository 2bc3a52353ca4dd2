"""Sleep's offline distillation (memworker.sleep.distil): fewer memories than turns, filler
dropped, who/when/names/numbers kept, provenance naming exactly the messages carried, never
across an episode or a subject; the LLM answer validated, the offline rule as its fallback."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memworker.domain import memories
from memworker.sleep import distil

WHEN = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
CHAT = [
    ("Caroline", "Hey Mel! Good to see you! How have you been?"),
    ("Melanie", "Hey Caroline! I'm swamped with the kids & work. What's up with you?"),
    ("Caroline", "I went to a LGBTQ support group yesterday and it was so powerful."),
    ("Melanie", "Wow, that's cool, Caroline!"),
    ("Caroline", "We meet every Tuesday at 7 pm in the Riverside library, room 204."),
    ("Melanie", "Thanks, Caroline! Haha."),
]


def turns(chat: list[tuple[str, str]], episode: str = "episode:e1", subject: str | None = None) -> list[distil.Turn]:
    return [
        distil.Turn(f"{episode}-{i}", episode, i, who, text, WHEN, (subject, episode))
        for i, (who, text) in enumerate(chat)
    ]


def test_filler_goes_and_what_was_said_stays_with_who_and_when() -> None:
    out = distil.distil(turns(CHAT))
    assert len(out) < len(CHAT)
    text = " ".join(s.text for s in out)
    assert text.startswith("8 May 2023: ")
    for kept in ("Caroline:", "Melanie:", "LGBTQ support group", "Tuesday at 7 pm", "Riverside library, room 204"):
        assert kept in text
    for dropped in ("Good to see you", "How have you been", "that's cool", "Haha"):
        assert dropped not in text
    assert all(len(s.text) <= memories.MAX_TEXT_CHARS for s in out)


def test_provenance_names_exactly_the_messages_whose_content_is_carried() -> None:
    out = distil.distil(turns(CHAT))
    named = sorted(m for s in out for m in s.messages)
    assert named == [1, 2, 4]  # 0, 3 and 5 are filler only: nothing of theirs is in a summary
    assert [s.provenance for s in out] == ["episode:e1#m1,2,4"]
    carried = sorted(t for s in out for t in s.carried)
    assert carried == sorted(f"episode:e1-{i}" for i in range(6))  # filler turns are answered for too


def test_a_long_turn_is_split_never_cut_and_carried_once() -> None:
    long = " ".join(f"Item {i} of the packing list is the blue tent number {i}." for i in range(40))
    out = distil.distil(turns([("Dave", long), ("Calvin", "I bought 3 new lenses in Boston.")]))
    assert len(out) > 2 and all(len(s.text) <= memories.MAX_TEXT_CHARS for s in out)
    joined = " ".join(s.text for s in out)
    assert all(f"tent number {i}." in joined for i in range(40))
    assert sum(s.carried.count("episode:e1-0") for s in out) == 1
    assert all(0 in s.messages for s in out[:-1])


def test_summaries_never_cross_an_episode_or_a_subject() -> None:
    a = turns(CHAT[2:3], "episode:a", "alice")
    b = turns(CHAT[4:5], "episode:a", "bob")
    c = turns(CHAT[1:2], "episode:c", "alice")
    out = distil.distil(a + b + c)
    assert len(out) == 3
    assert {s.provenance for s in out} == {"episode:a#m0", "episode:c#m0"} and len({id(s) for s in out}) == 3


def test_a_stored_turn_is_read_back_without_its_head() -> None:
    t = distil.turn_of(
        "m1",
        "Caroline (8 May 2023): I went to a support group.",
        ["episode:abc#m3"],
        {"speaker": "Caroline", "occurred_at": WHEN.isoformat()},
        None,
    )
    assert t is not None and (t.episode, t.message, t.content) == ("episode:abc", 3, "I went to a support group.")
    assert distil.turn_of("m2", "x", ["api"], {}, None) is None


def test_the_llm_answer_is_validated_and_the_rules_stand_in() -> None:
    window = turns(CHAT)
    good = '[{"text": "Caroline joined an LGBTQ support group (Tuesdays 7 pm, room 204).", "messages": [3, 5]}]'
    out, how = distil.with_llm(window, lambda s, u: good)
    assert (
        how == "llm" and out[0].provenance == "episode:e1#m2,4" and out[0].carried == ["episode:e1-2", "episode:e1-4"]
    )
    for bad in ("not json", '[{"text": "x", "messages": [99]}]', '{"text": "x"}'):
        out, how = distil.with_llm(window, lambda s, u, bad=bad: bad)
        assert how.startswith("rules (llm answer malformed") and out == distil.distil(window)
    out, how = distil.with_llm(window, lambda s, u: None)
    assert how == "rules (llm call failed)"
    with pytest.raises(ValueError):
        distil.parse("[]", window)
