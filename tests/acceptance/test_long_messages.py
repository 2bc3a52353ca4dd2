"""A long message is one document to recall: its parts (turns cut at the memory size limit)
each keep their own text and embedding, but BM25 indexes each as the whole message, so a long
message neither enters recall as several short documents nor loses the words of its other
parts. Through the real API, Redis and a worker process."""

from __future__ import annotations

from typing import Any

import pytest

from memworker import episodic, tokens
from memworker.sdk import Client

# four sentences per part at most: the message is cut into several turns
LONG = (
    " ".join(f"Stage {i} of the harbour survey measured the tide at pier {i} before noon." for i in range(12))
    + " The last reading was taken by a quokka-shaped buoy."
)


@pytest.fixture(scope="module")
def alice(api: str, tenants: dict[str, Any]) -> Client:
    return Client(api, tenants["alice"]["key"])


def test_each_part_of_a_split_message_indexes_the_whole_message() -> None:
    (short, *parts) = episodic.turns(
        [{"role": "user", "content": "The survey starts Monday."}, {"role": "assistant", "content": LONG}],
        "",
        None,
    )
    assert short.message_text is None  # a message kept whole indexes its own text
    assert len(parts) >= 3 and {p.message for p in parts} == {1}
    whole = {p.message_text for p in parts}
    assert whole == {" ".join(p.text for p in parts)}
    # what BM25 counts for every part: each part's terms, and the other parts' too
    indexed = set(tokens.tokenize(next(iter(whole)) or ""))
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
    # every part matched the word said in one of them (one document), and the message took
    # one slot: the other parts collapsed into the best-ranked one
    (hit,) = [h for h in hits if h["provenance"] == [f"episode:{r['episode_id']}#m1"]]
    assert hit["signals"]["bm25"] > 0
    assert sorted(hit["collapsed"]) == sorted(p["id"] for p in parts if p["id"] != hit["id"])
    # without the collapse every part is its own hit, each with the whole message's BM25 score
    alice.set_policy({"recall_collapse": False}, agent_id="long-bot")
    hits = alice.recall("long-bot", "quokka", k=10, kinds=["turn"], explain=True)["memories"]
    scores = {h["id"]: h["signals"]["bm25"] for h in hits if h["provenance"] == hit["provenance"]}
    assert set(scores) == {p["id"] for p in parts}
    assert len(set(scores.values())) == 1 and min(scores.values()) > 0


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
    before = alice.recall("ledger-bot", "4111 2222 3333 4444", k=20, kinds=["turn"])["memories"]
    assert {p["id"] for p in parts} <= {h["id"] for h in before}
    receipt = alice.forget("ledger-bot", provenance=f"episode:{said['episode_id']}")
    assert receipt["copies"]["count"] >= len(parts)
    left = alice.list_memories("ledger-bot", limit=200)["memories"]
    assert [m for m in left if m["provenance"] == source and m["kind"] == "turn"] == []
    after = alice.recall("ledger-bot", "4111 2222 3333 4444", k=20, explain=True)["memories"]
    assert [h["text"] for h in after if h["signals"]["bm25"] > 0] == []  # no row answers to the words
