"""A long message is one document to recall: its parts (turns cut at the memory size limit)
each keep their own text, but BM25 indexes the message once, on its first part, as the whole
message, and the message is embedded once, by its first part, the only part that is a vector
candidate; every part knows how many its message has. So a long message neither enters recall
as several short documents nor loses the words of its other parts. Through the real API, Redis
and a worker process."""

from __future__ import annotations

import math
from typing import Any

import pytest

from memworker.domain import episodic, tokens
from memworker.sdk import Client

# four sentences per part at most: the message is cut into several turns
LONG = (
    " ".join(f"Stage {i} of the harbour survey measured the tide at pier {i} before noon." for i in range(12))
    + " The last reading was taken by a quokka-shaped buoy."
)


@pytest.fixture(scope="module")
def alice(api: str, tenants: dict[str, Any]) -> Client:
    return Client(api, tenants["alice"]["key"])


def test_the_first_part_of_a_split_message_indexes_the_whole_message() -> None:
    (short, *parts) = episodic.turns(
        [{"role": "user", "content": "The survey starts Monday."}, {"role": "assistant", "content": LONG}],
        "",
        None,
    )
    assert short.message_text is None and short.parts == 1  # a message kept whole indexes its own text
    assert len(parts) >= 3 and {p.message for p in parts} == {1} and {p.parts for p in parts} == {len(parts)}
    first, *rest = parts
    assert first.message_text == " ".join(p.text for p in parts)
    assert {p.message_text for p in rest} == {""}  # the other parts index nothing
    # what BM25 counts for the message: each part's terms, on the first part
    indexed = set(tokens.tokenize(first.message_text or ""))
    assert all(set(tokens.tokenize(p.text)) <= indexed for p in parts)
    assert "quokka" in indexed and sum("quokka" in tokens.tokenize(p.text) for p in parts) == 1


def test_a_word_of_one_part_finds_the_message_once(alice: Client, worker: Any) -> None:
    r = alice.add_episode(
        "long-bot",
        messages=[
            {"role": "user", "content": "How did the harbour survey go?"},
            {"role": "assistant", "content": LONG},
        ],
    )
    alice.wait_for_episode("long-bot", r["episode_id"])
    parts = [
        m
        for m in alice.list_memories("long-bot", kind="turn", limit=200)["memories"]
        if m["provenance"] == [f"episode:{r['episode_id']}#m1"]
    ]
    assert len(parts) >= 3
    assert sum("quokka" in p["text"] for p in parts) == 1
    hits = alice.recall("long-bot", "quokka", k=5, kinds=["turn"], explain=True)["memories"]
    # the message matched the word said in one of its parts (through the first part, which
    # indexes the whole message), and took one slot: the other parts collapsed into it
    (hit,) = [h for h in hits if h["provenance"] == [f"episode:{r['episode_id']}#m1"]]
    assert set(hit["collapsed"] or []) <= {p["id"] for p in parts if p["id"] != hit["id"]}
    # without the collapse every part is its own hit; only the first holds the message's BM25 score
    alice.set_policy({"recall_collapse": False}, agent_id="long-bot")
    hits = alice.recall("long-bot", "quokka", k=10, kinds=["turn"], explain=True)["memories"]
    scores = {h["id"]: h["signals"]["bm25"] for h in hits if h["provenance"] == hit["provenance"]}
    assert set(scores) <= {p["id"] for p in parts}
    (first,) = [p for p in parts if LONG[:40] in p["text"]]
    assert [s for s in scores.values() if s > 0] == [scores[first["id"]]]


def test_a_long_message_is_a_vector_candidate_by_its_first_part_only(alice: Client, worker: Any) -> None:
    r = alice.add_episode("once-bot", messages=[{"role": "assistant", "content": LONG}])
    alice.wait_for_episode("once-bot", r["episode_id"])
    parts = alice.list_memories("once-bot", kind="turn", limit=200)["memories"]
    assert len(parts) >= 3
    alice.set_policy({"recall_collapse": False}, agent_id="once-bot")
    # no word of the message: only the vector can find it, and only through its first part
    hits = alice.recall("once-bot", "ocean water levels near a dock", k=10, kinds=["turn"], explain=True)
    (hit,) = hits["memories"]
    assert LONG[:40] in hit["text"] and hit["signals"]["bm25"] == 0


def test_forget_takes_every_part_of_a_message_that_copied_the_erased_text(alice: Client, worker: Any) -> None:
    """A part whose own text lacks an erased identifier still answers to it through the whole
    message's words, so erasing a copy erases every part of that message."""
    said = alice.add_episode("ledger-bot", messages=[{"role": "user", "content": "My card is 4111 2222 3333 4444."}])
    alice.wait_for_episode("ledger-bot", said["episode_id"])
    # a later long answer quotes the number in its last part only
    copied = LONG.replace("quokka-shaped buoy", "buoy paid with card 4111 2222 3333 4444")
    copy = alice.add_episode("ledger-bot", messages=[{"role": "assistant", "content": copied}])
    alice.wait_for_episode("ledger-bot", copy["episode_id"])
    source = [f"episode:{copy['episode_id']}#m0"]
    parts = [
        m for m in alice.list_memories("ledger-bot", kind="turn", limit=200)["memories"] if m["provenance"] == source
    ]
    assert len(parts) >= 3 and sum("4444" in p["text"] for p in parts) == 1
    alice.set_policy({"recall_collapse": False}, agent_id="ledger-bot")
    before = alice.recall("ledger-bot", "4111 2222 3333 4444", k=20, kinds=["turn"], explain=True)["memories"]
    # the message answers to the number through its first part, whose text lacks it
    (first,) = [h for h in before if h["provenance"] == source and h["signals"]["bm25"] > 0]
    assert "4444" not in first["text"]
    receipt = alice.forget("ledger-bot", provenance=f"episode:{said['episode_id']}")
    assert receipt["copies"]["count"] >= len(parts)
    left = alice.list_memories("ledger-bot", limit=200)["memories"]
    assert [m for m in left if m["provenance"] == source and m["kind"] == "turn"] == []
    after = alice.recall("ledger-bot", "4111 2222 3333 4444", k=20, explain=True)["memories"]
    assert [h["text"] for h in after if h["signals"]["bm25"] > 0] == []  # no row answers to the words


def test_a_message_of_many_parts_is_discounted_and_a_short_one_is_not(alice: Client, worker: Any) -> None:
    """The same exchange in two agents, the part discount on (the default) and off: each part
    of the long answer scores 0.2 x ln(parts / 2) lower with it on; the short message and its
    items the same."""
    messages = [
        {"role": "user", "content": "The harbour survey's buoys are quokka-shaped, by the way."},
        {"role": "assistant", "content": LONG},
    ]
    for agent in ("parts-on", "parts-off"):
        alice.wait_for_episode(agent, alice.add_episode(agent, messages=messages)["episode_id"])
    alice.set_policy({"recall_collapse": False}, agent_id="parts-on")
    alice.set_policy({"recall_collapse": False, "recall_part_discount": 0}, agent_id="parts-off")
    turns = alice.list_memories("parts-on", kind="turn", limit=200)["memories"]
    n = sum(t["text"].startswith("assistant") for t in turns)  # the answer's parts
    assert n >= 3

    def fused(agent: str) -> dict[tuple[str, str], float]:
        hits = alice.recall(agent, "harbour survey tide at the pier", k=40, explain=True)["memories"]
        return {(h["kind"], h["text"], h["provenance"][0][-3:]): h["signals"]["fused"] for h in hits}

    on, off = fused("parts-on"), fused("parts-off")
    assert on.keys() == off.keys()
    # the user's message gives items; in a conversation the assistant's answer gives turns only
    assert {k[2] for k in on if k[0] != "turn"} == {"#m0"}
    for key, score in on.items():
        discount = 0.2 * math.log(n / 2) if key[2] == "#m1" else 0.0
        assert off[key] - score == pytest.approx(discount, abs=1e-6), key
