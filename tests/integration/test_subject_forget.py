"""Subject requests over real HTTP (POST /v1/subjects/{subject}/forget): one subject erased
from three agents and a pool in one call, with one receipt per agent, per pool and in total;
recall afterwards finds nothing of the subject while other subjects' memories and general
ones stay; scopes, a key limited to some agents, another tenant, the cap on holders per call."""

from __future__ import annotations

from typing import Any

import pytest

from memworker import keys
from memworker.erase import subjects
from memworker.sdk import ApiError, Client
from memworker.storage import db

AGENTS = ["sf-support", "sf-billing", "sf-sales"]
POOL = "sf-shared"
GONE = "cust-9"
KEPT = "cust-8"


@pytest.fixture(scope="module")
def clients(api: str, tenants: dict[str, Any]) -> dict[str, Client]:
    return {name: Client(api, t["key"]) for name, t in tenants.items()}


def operator_key(api: str, stack: dict[str, Any], tenant_id: Any, **kw: Any) -> Client:
    with db.connect(stack["owner_url"]) as conn:
        db.bind_tenant(conn, tenant_id)
        key, _ = keys.create(conn, tenant_id=tenant_id, **kw)
    return Client(api, key)


def status_of(call: Any) -> tuple[int, Any]:
    with pytest.raises(ApiError) as err:
        call()
    return err.value.status, err.value.body


def texts(hits: dict[str, Any]) -> list[str]:
    return [m["text"] for m in hits["memories"]]


@pytest.fixture(scope="module")
def fleet(clients: dict[str, Client]) -> dict[str, Any]:
    """Alice's fleet: the subject to erase in three agents (memories, an episode, a session)
    and a pool; another subject and general knowledge beside it. Bob holds the same subject."""
    alice = clients["alice"]
    alice.add_memory(AGENTS[0], "Customer cust-9 uses the Pro plan and email jordan@example.com.", subject=GONE)
    alice.add_memory(AGENTS[0], "Customer cust-8 uses the Basic plan.", subject=KEPT)
    alice.add_memory(AGENTS[0], "Refunds take five business days.")
    alice.add_memory(AGENTS[1], "Invoice 778812 for cust-9 was paid late.", subject=GONE)
    alice.add_memory(AGENTS[1], "Invoice 556677 for cust-8 was paid on time.", subject=KEPT)
    alice.add_episode(AGENTS[1], "cust-9 asked to change the billing address.", subject=GONE)
    alice.add_memory(AGENTS[2], "cust-9 wants a demo of the analytics add-on.", subject=GONE)
    alice.create_session(AGENTS[2], "call-cust-9", subject=GONE, goal="demo follow-up")
    alice.add_pool_memory(POOL, "cust-9 is a reference customer for the Pro plan.", subject=GONE)
    alice.add_pool_memory(POOL, "cust-8 is a reference customer for the Basic plan.", subject=KEPT)
    alice.add_memory("sf-untouched", "This agent never met either customer.")
    clients["bob"].add_memory(AGENTS[0], "Bob's cust-9 uses the Pro plan too.", subject=GONE)
    return {}


def test_a_subject_request_needs_erase_on_a_key_that_reaches_every_agent(
    api: str, stack: dict[str, Any], fleet: dict[str, Any], tenants: dict[str, Any]
) -> None:
    alice_id = tenants["alice"]["id"]
    reader = operator_key(api, stack, alice_id, scopes=("memories:read", "memories:write"))
    code, body = status_of(lambda: reader.forget_subject(GONE))
    assert code == 403 and "erase" in body["error"]
    limited = operator_key(api, stack, alice_id, scopes=("erase",), agent_ids=AGENTS)
    code, body = status_of(lambda: limited.forget_subject(GONE))
    assert code == 403 and "every agent" in body["error"]
    assert status_of(lambda: reader.forget_subject("-not a subject"))[0] in (404, 422)


def test_another_tenants_subject_request_touches_nothing_of_this_tenant(
    clients: dict[str, Client], fleet: dict[str, Any]
) -> None:
    receipt = clients["bob"].forget_subject(GONE)
    assert [a["agent_id"] for a in receipt["agents"]] == [AGENTS[0]] and receipt["pools"] == []
    assert receipt["totals"]["memories"] == 1
    held = clients["alice"].list_memories(AGENTS[0], subject=GONE)["memories"]
    assert [m["text"] for m in held] == ["Customer cust-9 uses the Pro plan and email jordan@example.com."]


def test_a_subject_is_erased_from_three_agents_and_a_pool_with_one_receipt(
    clients: dict[str, Client], fleet: dict[str, Any]
) -> None:
    alice = clients["alice"]
    query = "cust-9 Pro plan invoice demo"
    before = alice.recall_agents(AGENTS, query, k=20, pools=[POOL], subject=GONE)
    assert sum("cust-9" in t for t in texts(before)) == 4

    receipt = alice.forget_subject(GONE)
    assert receipt["subject"] == GONE and receipt["complete"] is True and receipt["holders_left"] == 0
    per_agent = {a["agent_id"]: a for a in receipt["agents"]}
    assert sorted(per_agent) == sorted(AGENTS)  # the untouched agent was no holder
    assert [p["pool"] for p in receipt["pools"]] == [POOL]
    assert per_agent[AGENTS[0]]["memories"]["count"] == 1
    assert per_agent[AGENTS[1]]["memories"]["count"] == 1 and per_agent[AGENTS[1]]["episodes"]["count"] == 1
    assert per_agent[AGENTS[2]]["sessions"]["ids"] == ["call-cust-9"]
    assert receipt["pools"][0]["memories"]["count"] == 1
    totals = receipt["totals"]
    assert totals["memories"] == 4 and totals["episodes"]["count"] == 1 and totals["sessions"]["count"] == 1
    assert "jordan@example.com" not in str(receipt) and "778812" not in str(receipt)  # ids and counts only

    # recall finds nothing of the subject, anywhere; the other subject and general knowledge stay
    for agent in AGENTS:
        assert not [t for t in texts(alice.recall(agent, "cust-9 plan invoice demo", k=20)) if "cust-9" in t]
        assert not [t for t in texts(alice.recall(agent, "plan", k=20, subject=GONE)) if "cust-9" in t]
    for subject in (GONE, None):
        after = alice.recall_agents(AGENTS, query, k=20, pools=[POOL], subject=subject)
        assert not [t for t in texts(after) if "cust-9" in t or "778812" in t]
    kept = texts(alice.recall_agents(AGENTS, "cust-8 plan invoice", k=20, pools=[POOL], subject=KEPT))
    assert sum("cust-8" in t for t in kept) == 3
    assert [m["text"] for m in alice.list_memories(AGENTS[0], subject=KEPT)["memories"]] == [
        "Customer cust-8 uses the Basic plan."
    ]
    assert [m["text"] for m in alice.pool_memories(POOL)] == ["cust-8 is a reference customer for the Basic plan."]
    assert "Refunds take five business days." in texts(alice.recall(AGENTS[0], "refunds", k=5))
    assert status_of(lambda: alice.session(AGENTS[2], "call-cust-9"))[0] == 404
    for agent in AGENTS:
        assert GONE not in [s["subject"] for s in alice.agent_subjects(agent)["subjects"]]

    # bob's subject of the same name was bob's own: erased by bob's request, not by alice's
    again = alice.forget_subject(GONE)
    assert again["agents"] == [] and again["pools"] == [] and again["totals"] == {} and again["complete"] is True


def test_past_the_cap_a_call_says_what_is_left_and_the_next_call_finishes(
    clients: dict[str, Client], fleet: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    charlie = clients["charlie"]
    for i in range(3):
        charlie.add_memory(f"cap-{i}", f"Subject cap-7 told agent {i} a secret number 99881{i}.", subject="cap-7")
    charlie.add_memory("cap-0", "General: nothing about anyone.")
    monkeypatch.setattr(subjects, "MAX_HOLDERS", 2)  # the API runs in this process (the api fixture)
    first = charlie.forget_subject("cap-7")
    assert [a["agent_id"] for a in first["agents"]] == ["cap-0", "cap-1"]
    assert first["complete"] is False and first["holders_left"] == 1
    second = charlie.forget_subject("cap-7")
    assert [a["agent_id"] for a in second["agents"]] == ["cap-2"] and second["complete"] is True
    assert all(charlie.list_memories(f"cap-{i}", subject="cap-7")["memories"] == [] for i in range(3))
    assert texts(charlie.recall("cap-0", "General nothing", k=5)) == ["General: nothing about anyone."]
