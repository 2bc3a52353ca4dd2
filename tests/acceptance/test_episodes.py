"""The main path keeps what happened: every episode is written as turns (the episodic layer)
beside its reflected items, through the real API, Redis and a real worker process."""

from __future__ import annotations

from typing import Any

import pytest

from memworker.sdk import ApiError, Client


@pytest.fixture(scope="module")
def alice(api: str, tenants: dict[str, Any]) -> Client:
    return Client(api, tenants["alice"]["key"])


@pytest.fixture(scope="module")
def bob(api: str, tenants: dict[str, Any]) -> Client:
    return Client(api, tenants["bob"]["key"])


LONG = " ".join(
    f"Step {i} of the failover drill checks that replica {i} takes writes within ten seconds." for i in range(9)
)


def _turns(c: Client, agent: str) -> list[dict[str, Any]]:
    return c.list_memories(agent, kind="turn", limit=200)["memories"]


def test_every_informative_message_becomes_a_turn_beside_the_items(alice: Client, worker: Any) -> None:
    r = alice.add_episode(
        "layers-bot",
        messages=[
            {"role": "user", "name": "Caroline", "content": "I went to an LGBTQ support group yesterday."},
            {"role": "assistant", "content": "haha ok!"},  # no content: skipped
            {"role": "user", "name": "Melanie", "content": "I prefer painting sunsets with watercolours."},
            {"role": "user", "name": "Caroline", "content": LONG, "occurred_at": "2023-05-09T10:00:00Z"},
        ],
        session_id="s-1",
        occurred_at="2023-05-08T13:56:00Z",
        metadata={"channel": "chat"},
    )
    ep = alice.wait_for_episode("layers-bot", r["episode_id"])
    assert ep["status"] == "stored" and ep["memory_ids"]  # the reflected items, as before
    items = [alice.get_memory("layers-bot", m) for m in ep["memory_ids"]]
    assert all(m["kind"] != "turn" and m["tier"] == "L1" for m in items)
    turns = _turns(alice, "layers-bot")
    by_message: dict[str, list[dict[str, Any]]] = {}
    for t in turns:
        (source,) = t["provenance"]
        by_message.setdefault(source, []).append(t)
        assert t["tier"] == "L0" and t["session_id"] == "s-1" and t["metadata"]["channel"] == "chat"
        assert len(t["text"]) <= 280
    eid = r["episode_id"]
    assert sorted(by_message) == [f"episode:{eid}#m0", f"episode:{eid}#m2", f"episode:{eid}#m3"]
    (first,) = by_message[f"episode:{eid}#m0"]
    assert first["text"] == "Caroline (8 May 2023): I went to an LGBTQ support group yesterday."
    assert first["metadata"]["speaker"] == "Caroline" and first["metadata"]["role"] == "user"
    # a long message is split at sentences into several turns, nothing dropped
    parts = by_message[f"episode:{eid}#m3"]
    assert len(parts) >= 3
    bodies = [p["text"].removeprefix("Caroline (9 May 2023): ") for p in parts]
    assert sorted(" ".join(bodies).split()) == sorted(LONG.split())


def test_recall_gives_one_slot_to_an_item_and_its_turn(alice: Client, worker: Any) -> None:
    r = alice.add_episode(
        "collapse-bot",
        messages=[{"role": "user", "name": "Ana", "content": "We decided to move the billing API to Go next quarter."}],
    )
    alice.wait_for_episode("collapse-bot", r["episode_id"])
    hits = alice.recall("collapse-bot", "billing API Go decision", k=5, explain=True)["memories"]
    sources = [s for h in hits for s in h["provenance"]]
    assert len(hits) == 1, hits  # the item and its turn name the same message: one slot
    assert sources == [f"episode:{r['episode_id']}#m0"]
    everything = {m["id"]: m for m in alice.list_memories("collapse-bot")["memories"]}
    assert sorted(m["kind"] for m in everything.values()) == ["decision", "turn"]  # both kept
    (folded,) = hits[0]["collapsed"]  # explain names the one that gave up its slot
    assert {folded, hits[0]["id"]} == set(everything)


def test_the_episodic_layer_can_be_switched_off(alice: Client, worker: Any) -> None:
    alice.wait_for_episode("items-only", alice.add_episode("items-only", "I prefer tea over coffee.")["episode_id"])
    before = len(_turns(alice, "items-only"))
    alice.set_policy({"episodic_layer": False}, agent_id="items-only")
    ep = alice.wait_for_episode(
        "items-only", alice.add_episode("items-only", "I prefer trains over planes.")["episode_id"]
    )
    assert ep["memory_ids"] and len(_turns(alice, "items-only")) == before == 1
    with pytest.raises(ApiError) as bad:
        alice.set_policy({"episodic_layer": "yes"}, agent_id="items-only")
    assert bad.value.status == 422


def test_another_tenant_sees_no_turn(alice: Client, bob: Client, worker: Any) -> None:
    alice.wait_for_episode("private-bot", alice.add_episode("private-bot", "My locker code is 4512.")["episode_id"])
    assert len(_turns(alice, "private-bot")) == 1
    try:
        assert bob.list_memories("private-bot", kind="turn")["memories"] == []
    except ApiError as exc:
        assert exc.status == 404
    try:
        assert bob.recall("private-bot", "locker code")["memories"] == []
    except ApiError as exc:
        assert exc.status == 404


def test_a_short_reply_is_found_by_the_question_it_answers(alice: Client, worker: Any) -> None:
    r = alice.add_episode(
        "reply-bot",
        messages=[
            {"role": "user", "name": "Calvin", "content": "Wow, that view looks awesome! What city is it?"},
            {"role": "user", "name": "Dave", "content": "That's Boston, Cal! Took it last month from the harbour."},
            {"role": "user", "name": "Calvin", "content": "The view from my studio is a parking lot, sadly."},
            {"role": "user", "name": "Dave", "content": "I took a photo of the sunset from my balcony yesterday."},
            {"role": "user", "name": "Calvin", "content": "My cousin moved to a small town near the coast."},
            {"role": "user", "name": "Dave", "content": "I spent the weekend rebuilding a carburettor."},
        ],
    )
    alice.wait_for_episode("reply-bot", r["episode_id"])
    hits = alice.recall("reply-bot", "Which city was that view?", k=3)["memories"]
    sources = [s for h in hits for s in h["provenance"]]
    assert f"episode:{r['episode_id']}#m1" in sources, hits
    (turn,) = [t for t in _turns(alice, "reply-bot") if t["provenance"] == [f"episode:{r['episode_id']}#m1"]]
    assert turn["text"].endswith("): That's Boston, Cal! Took it last month from the harbour.")  # its own words only


def test_small_talk_the_rules_miss_stays_a_turn_and_is_no_item(alice: Client, worker: Any) -> None:
    # no social word to catch it, so the kinds' examples decide (reflection.settle), in the worker
    chat = "Can't complain, all things considered."
    fact = "My brother flies cargo planes out of Leipzig."
    r = alice.add_episode(
        "settle-bot",
        messages=[
            {"role": "user", "name": "Ines", "content": chat},
            {"role": "user", "name": "Tom", "content": fact},
            {"role": "user", "name": "Ines", "content": "[image: a photo of a red kayak on a lake]"},
        ],
    )
    ep = alice.wait_for_episode("settle-bot", r["episode_id"])
    assert ep["status"] == "stored"
    items = [alice.get_memory("settle-bot", m)["text"] for m in ep["memory_ids"]]
    assert items == ["Tom's brother flies cargo planes out of Leipzig."]  # told in its speaker's name
    turns = " | ".join(t["text"] for t in _turns(alice, "settle-bot"))
    assert chat in turns and "red kayak" in turns and fact in turns  # nothing said is lost, in its words
