"""Lifecycle through the real API, Redis and a real `celery worker`: episodes that confirm
(and promote) or contradict (and supersede) earlier memories, forgetting an episode's
memories, and the beat tick fanning out one sweep per agent, harmless when fired twice."""

from __future__ import annotations

import time
from typing import Any

import psycopg
import pytest
from celery import Celery

from memworker.sdk import ApiError, Client


@pytest.fixture(scope="module")
def clients(api: str, tenants: dict[str, Any]) -> dict[str, Client]:
    return {name: Client(api, t["key"]) for name, t in tenants.items()}


def stored(c: Client, agent: str, text: str) -> dict[str, Any]:
    ep = c.wait_for_episode(agent, c.add_episode(agent, text)["episode_id"])
    assert ep["status"] == "stored", ep
    return ep


def test_a_later_episode_confirms_promotes_or_supersedes(clients: dict[str, Client], worker: Any) -> None:
    alice = clients["alice"]
    first = stored(alice, "ops", "The staging database definitely lives in Frankfurt.")
    again = stored(alice, "ops", "The staging database definitely lives in Frankfurt!")
    assert again["memory_ids"] == first["memory_ids"]
    m = alice.get_memory("ops", first["memory_ids"][0])
    assert m["tier"] == "L2" and m["confidence"] == pytest.approx(0.92)  # confirmed at 0.9: promoted
    events = [e["event"] for e in alice.history("ops", m["id"])["events"]]
    assert events == ["created", "strengthened", "promoted"]

    old = stored(alice, "ops", "The project uses Python 3.9.")["memory_ids"][0]
    new = stored(alice, "ops", "The project now definitely uses Python 3.11.")["memory_ids"][0]
    assert alice.get_memory("ops", old)["superseded_by"] == new
    hits = alice.recall("ops", "python version of the project", k=10)["memories"]
    assert new in [h["id"] for h in hits] and old not in [h["id"] for h in hits]
    assert [v["id"] for v in alice.history("ops", new)["versions"]] == [old, new]


def test_forgetting_an_episode_leaves_no_trace_in_recall(
    clients: dict[str, Client], worker: Any, stack: dict[str, Any]
) -> None:
    bob = clients["bob"]
    ep = stored(bob, "desk", "The customer Mrs Okafor lives at 7 Harbour Lane. The invoice is due Friday.")
    keep = stored(bob, "desk", "The printer on floor two is out of toner.")
    turns = {m["provenance"][0]: m["id"] for m in bob.list_memories("desk", kind="turn")["memories"]}
    ep_ids = [*ep["memory_ids"], turns[f"episode:{ep['episode_id']}#m0"]]  # its items and its turn
    keep_ids = [*keep["memory_ids"], turns[f"episode:{keep['episode_id']}#m0"]]
    receipt = bob.forget("desk", provenance=f"episode:{ep['episode_id']}")
    assert sorted(receipt["memories"]["ids"]) == sorted(ep_ids)
    assert receipt["episodes"]["ids"] == [ep["episode_id"]]
    with pytest.raises(ApiError) as err:
        bob.get_episode("desk", ep["episode_id"])
    assert err.value.status == 404
    for q in ("where does Mrs Okafor live", "Harbour Lane", "when is the invoice due"):
        assert all(h["id"] in keep_ids for h in bob.recall("desk", q, k=10)["memories"])
    with psycopg.connect(stack["owner_url"]) as conn:
        left = conn.execute(
            "SELECT count(*) FROM memworker.memories WHERE text ILIKE '%%Okafor%%' OR text ILIKE '%%Harbour%%'"
        ).fetchone()
    assert left == (0,)


def test_the_beat_tick_sweeps_each_agent_once_per_window(
    clients: dict[str, Client], worker: Any, stack: dict[str, Any]
) -> None:
    clients["charlie"].add_memory("tick-a", "Tick agent A remembers the blue door.")
    clients["charlie"].add_memory("tick-b", "Tick agent B remembers the red door.")
    window = "2030-01-01T05:00:00+00:00"  # a window no other test uses
    app = Celery(broker=stack["redis_url"])
    try:
        for _ in range(2):  # a double fire
            app.send_task("memworker.retention_tick", args=[window], queue="maintenance")
    finally:
        app.close()
    deadline = time.monotonic() + 60
    rows: list[tuple[Any, ...]] = []
    while time.monotonic() < deadline:
        with psycopg.connect(stack["owner_url"]) as conn:
            rows = conn.execute(
                "SELECT agent_id, run_key, status, trigger FROM memworker.retention_runs "
                "WHERE agent_id IN ('tick-a', 'tick-b') ORDER BY agent_id"
            ).fetchall()
        if len(rows) >= 2 and all(r[2] != "running" for r in rows):
            break
        time.sleep(0.3)
    assert [(r[0], r[1], r[3]) for r in rows] == [
        ("tick-a", f"beat:{window}", "beat"),
        ("tick-b", f"beat:{window}", "beat"),
    ]
    assert {r[2] for r in rows} == {"done"}
    runs = clients["charlie"].retention_runs("tick-a")
    assert runs[0]["run_key"] == f"beat:{window}" and runs[0]["clock"].startswith("2030-01-01T05:00:00")
