"""The fleet's MCP tools against the running stack (the real API over HTTP, Postgres, Redis):
`python -m memworker mcp` over stdio recalls across agents and pools, lists pools, reads a
pool, shares a memory into one, and lists, approves and rejects the pools' proposals; a key
without the scope a tool needs gets the API's refusal as a clear tool error and nothing
changes; another tenant's pools and proposals stay invisible; a server bound to an agent or a
subject keeps its binding on the fleet's tools."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import anyio
import pytest

from memworker import keys
from memworker.domain.policy import Policy
from memworker.fleet import pools
from memworker.sdk import Client as ApiClient
from memworker.storage import db
from tests.integration.test_mcp import TOOLS, data, error_text, stdio

REFUND = "Refunds over 500 euros need a manager's approval."
PARCELS = "Parcels to Norway take five working days."
LESSON = "Restarting the billing worker clears the stuck invoice queue."
FREEZE = "Deploys are frozen on the last day of the quarter."
BOBS = "Bob's tenant keeps its vault code in the red binder."


def _key(stack: dict[str, Any], tenant_id: Any, **kw: Any) -> str:
    """A key of the tenant with these powers (scopes, agent_ids), as `memworker key create` makes it."""
    with db.connect(stack["owner_url"]) as conn:
        db.bind_tenant(conn, tenant_id)
        key, _ = keys.create(conn, tenant_id=tenant_id, **kw)
        conn.commit()
    return key


def _propose(stack: dict[str, Any], tenant: Any, agent: str, memory_id: str, pool: str) -> None:
    """What a sleep pass of the agent does with its memory under pools_propose 'review'
    (pools.propose), committed: a proposal to `pool` when another agent learnt it too."""
    with db.connect(stack["app_url"]) as conn:
        db.bind_tenant(conn, tenant)
        done = pools.propose(
            conn, tenant_id=tenant, agent_id=agent, ids=[UUID(memory_id)], policy=Policy(pools_write=(pool,))
        )
        conn.commit()
    assert done == 1


@pytest.fixture(scope="module")
def fleet(api: str, stack: dict[str, Any], tenants: dict[str, Any]) -> dict[str, Any]:
    """alice: agents billing (refund rule, one memory of cust-a and one of cust-b) and shipping;
    billing may write the pool 'faq', night 'lessons', 'ops' and 'shifts'; proposals of night
    open in 'lessons' and 'ops'. bob (another
    tenant): a pool 'faq' of his own, a pool 'vault' and an open proposal in 'lessons'."""
    alice, bob = tenants["alice"], tenants["bob"]
    out: dict[str, Any] = {}
    with ApiClient(api, alice["key"]) as c:
        c.set_policy({"pools_write": ["faq"]}, agent_id="billing")
        c.set_policy({"pools_write": ["lessons", "ops", "shifts"]}, agent_id="night")
        out["refund"] = c.add_memory("billing", REFUND)["id"]
        out["cust_a"] = c.add_memory("billing", "The customer's invoices go to finance@a.example.", subject="cust-a")
        out["cust_b"] = c.add_memory("billing", "The customer's card ends in 4242.", subject="cust-b")
        out["parcels"] = c.add_memory("shipping", PARCELS)["id"]
        lesson = c.add_memory("night", LESSON, kind="method")["id"]
        c.add_memory("day", LESSON, kind="method")
        freeze = c.add_memory("night", FREEZE)["id"]
        c.add_memory("day", FREEZE)
    _propose(stack, alice["id"], "night", lesson, "lessons")
    _propose(stack, alice["id"], "night", freeze, "ops")
    with ApiClient(api, bob["key"]) as b:
        b.set_policy({"pools_write": ["faq"]}, agent_id="billing")
        b.set_policy({"pools_write": ["lessons"]}, agent_id="night")
        bobs = b.add_memory("billing", BOBS)["id"]
        out["bobs_faq"] = b.share_memory("billing", bobs, "faq")["memory"]["id"]
        b.add_pool_memory("vault", BOBS)
        mine = b.add_memory("night", LESSON, kind="method")["id"]
        b.add_memory("day", LESSON, kind="method")
    _propose(stack, bob["id"], "night", mine, "lessons")
    with ApiClient(api, bob["key"]) as b:
        (out["bobs_proposal"],) = [p["id"] for p in b.pool_proposals("lessons")]
    return out


def test_the_fleet_tools_over_stdio(api: str, tenants: dict[str, Any], fleet: dict[str, Any]) -> None:
    async def scenario() -> None:
        async with stdio(api, tenants["alice"]["key"]) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert set(tools) == TOOLS
            for name in ("recall_agents", "pools", "pool_memories", "pool_proposals"):
                assert tools[name].annotations and tools[name].annotations.read_only_hint, name
            assert set(tools["share_memory"].input_schema["required"]) == {"agent", "memory_id", "pool"}

            # recall across agents: one ranked list naming each hit's agent
            out = data(
                await c.call_tool("recall_agents", {"agents": ["billing", "shipping"], "query": "refund approval"})
            )
            assert out["memories"][0]["id"] == fleet["refund"] and out["memories"][0]["agent_id"] == "billing"
            both = {"agents": ["billing", "shipping"], "query": "how long do parcels to Norway take?"}
            top = data(await c.call_tool("recall_agents", both))["memories"][0]
            assert (top["text"], top["agent_id"]) == (PARCELS, "shipping")

            # share into a pool, then the pool lists, reads and ranks it
            shared = data(
                await c.call_tool("share_memory", {"agent": "billing", "memory_id": fleet["refund"], "pool": "faq"})
            )
            assert shared["outcome"] == "copied" and shared["memory"]["text"] == REFUND
            again = data(
                await c.call_tool("share_memory", {"agent": "billing", "memory_id": fleet["refund"], "pool": "faq"})
            )
            assert again["outcome"] == "already shared" and again["memory"]["id"] == shared["memory"]["id"]
            listed = data(await c.call_tool("pools", {}))["pools"]
            assert {p["pool"]: p["memories"] for p in listed} == {"faq": 1, "lessons": 0, "ops": 0}
            faq = data(await c.call_tool("pool_memories", {"pool": "faq"}))
            assert [m["text"] for m in faq["memories"]] == [REFUND] and faq["memories"][0]["pool"] == "faq"
            ranked = data(await c.call_tool("recall_agents", {"pools": ["faq"], "query": "who approves refunds?"}))
            assert [(h["text"], h.get("pool")) for h in ranked["memories"]] == [(REFUND, "faq")]
            refused = error_text(
                await c.call_tool("share_memory", {"agent": "shipping", "memory_id": fleet["parcels"], "pool": "faq"})
            )
            assert "HTTP 403" in refused and "pools_write" in refused

            # proposals: list, approve (twice: the same memory), reject another
            (prop,) = data(await c.call_tool("pool_proposals", {"pool": "lessons"}))["proposals"]
            assert prop["text"] == LESSON and prop["status"] == "open" and prop["agent_id"] == "night"
            approved = data(
                await c.call_tool("approve_proposal", {"pool": "lessons", "proposal_id": prop["id"], "reason": "ok"})
            )
            assert approved["outcome"] == "copied" and approved["proposal"]["status"] == "approved"
            assert approved["proposal"]["reason"] == "ok"
            again = data(await c.call_tool("approve_proposal", {"pool": "lessons", "proposal_id": prop["id"]}))
            assert again["memory"]["id"] == approved["memory"]["id"]
            lessons = data(await c.call_tool("pool_memories", {"pool": "lessons"}))["memories"]
            assert [m["text"] for m in lessons] == [LESSON]
            assert "HTTP 409" in error_text(
                await c.call_tool("reject_proposal", {"pool": "lessons", "proposal_id": prop["id"]})
            )
            (ops,) = data(await c.call_tool("pool_proposals", {"pool": "ops"}))["proposals"]
            rejected = data(
                await c.call_tool("reject_proposal", {"pool": "ops", "proposal_id": ops["id"], "reason": "not ours"})
            )
            assert rejected["proposal"]["status"] == "rejected"
            assert data(await c.call_tool("pool_proposals", {"pool": "ops"}))["proposals"] == []
            decided = data(await c.call_tool("pool_proposals", {"pool": "ops", "status": "rejected"}))["proposals"]
            assert [p["id"] for p in decided] == [ops["id"]]
            assert data(await c.call_tool("pool_memories", {"pool": "ops"}))["memories"] == []

            # open_session takes the subject the session is with
            s = data(await c.call_tool("open_session", {"agent": "billing", "session_id": "s-a", "subject": "cust-a"}))
            assert s["subject"] == "cust-a"

            # errors: clear tool errors, never a traceback
            assert "at least one agent" in error_text(await c.call_tool("recall_agents", {"query": "x"}))
            missing = error_text(await c.call_tool("pool_memories", {"pool": "nowhere"}))
            assert "HTTP 404" in missing and "'nowhere'" in missing
            assert "HTTP 422" in error_text(
                await c.call_tool("approve_proposal", {"pool": "lessons", "proposal_id": "not-a-uuid"})
            )

    anyio.run(scenario)


def test_another_tenants_pools_and_proposals_are_invisible(
    api: str, tenants: dict[str, Any], fleet: dict[str, Any]
) -> None:
    async def scenario() -> None:
        async with stdio(api, tenants["alice"]["key"]) as c:
            names = {p["pool"] for p in data(await c.call_tool("pools", {}))["pools"]}
            assert "vault" not in names
            assert "HTTP 404" in error_text(await c.call_tool("pool_memories", {"pool": "vault"}))
            assert "HTTP 404" in error_text(await c.call_tool("pool_proposals", {"pool": "vault"}))
            # a pool of the same name is alice's own: none of bob's memories in it
            faq = data(await c.call_tool("pool_memories", {"pool": "faq", "limit": 500}))["memories"]
            assert fleet["bobs_faq"] not in {m["id"] for m in faq} and BOBS not in str(faq)
            hits = data(await c.call_tool("recall_agents", {"pools": ["faq"], "agents": ["billing"], "query": "vault"}))
            assert BOBS not in str(hits)
            # bob's open proposal: alice's proposals of the same pool do not hold it, and
            # deciding it by its id is "not found"
            for status in ("open", "all"):
                found = data(await c.call_tool("pool_proposals", {"pool": "lessons", "status": status}))
                assert fleet["bobs_proposal"] not in {p["id"] for p in found["proposals"]}
            for tool in ("approve_proposal", "reject_proposal"):
                args = {"pool": "lessons", "proposal_id": fleet["bobs_proposal"]}
                assert "HTTP 404" in error_text(await c.call_tool(tool, args)), tool

    anyio.run(scenario)
    with ApiClient(api, tenants["bob"]["key"]) as b:
        assert [p["status"] for p in b.pool_proposals("lessons")] == ["open"]
        assert [m["text"] for m in b.pool_memories("vault")] == [BOBS]


def test_a_key_without_the_scope_is_refused_clearly(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], fleet: dict[str, Any]
) -> None:
    """Every tool is listed whatever the key's scopes (no route says them): the API's 403 comes
    back as a tool error naming the scope, and the refused call changes nothing."""
    alice = tenants["alice"]
    reader = _key(stack, alice["id"], name="reader", scopes=("memories:read",))
    writer = _key(stack, alice["id"], name="episodes only", scopes=("episodes:write",))
    billing_only = _key(stack, alice["id"], name="billing", agent_ids=["billing"])
    with ApiClient(api, alice["key"]) as sdk:
        parcel = sdk.add_memory("night", "The night shift hands over at 06:00.")["id"]
        sdk.add_memory("day", "The night shift hands over at 06:00.")
    _propose(stack, alice["id"], "night", parcel, "shifts")

    async def scenario() -> None:
        async with stdio(api, reader) as c:
            assert {t.name for t in (await c.list_tools()).tools} == TOOLS
            (prop,) = data(await c.call_tool("pool_proposals", {"pool": "shifts"}))["proposals"]
            assert data(await c.call_tool("pool_memories", {"pool": "faq"}))["memories"]
            writes: list[tuple[str, dict[str, Any]]] = [
                ("share_memory", {"agent": "billing", "memory_id": fleet["parcels"], "pool": "faq"}),
                ("approve_proposal", {"pool": "shifts", "proposal_id": prop["id"]}),
                ("reject_proposal", {"pool": "shifts", "proposal_id": prop["id"]}),
            ]
            for tool, args in writes:
                text = error_text(await c.call_tool(tool, args))
                assert "HTTP 403" in text and "lacks the 'memories:write' scope" in text, (tool, text)
        async with stdio(api, writer) as c:
            reads: list[tuple[str, dict[str, Any]]] = [
                ("pools", {}),
                ("pool_memories", {"pool": "faq"}),
                ("pool_proposals", {"pool": "shifts"}),
                ("recall_agents", {"agents": ["billing"], "query": "refunds"}),
            ]
            for tool, args in reads:
                text = error_text(await c.call_tool(tool, args))
                assert "HTTP 403" in text and "lacks the 'memories:read' scope" in text, (tool, text)
        async with stdio(api, billing_only) as c:
            # a key limited to agents reaches a pool only when its list names it
            assert data(await c.call_tool("pools", {}))["pools"] == []
            text = error_text(await c.call_tool("pool_memories", {"pool": "faq"}))
            assert "HTTP 404" in text and "does not reach it" in text
            text = error_text(await c.call_tool("recall_agents", {"agents": ["billing", "shipping"], "query": "x"}))
            assert "HTTP 404" in text and "does not reach it" in text
            hits = data(await c.call_tool("recall_agents", {"agents": ["billing"], "query": "refund approval"}))
            assert hits["memories"][0]["id"] == fleet["refund"]

    anyio.run(scenario)
    with ApiClient(api, alice["key"]) as sdk:  # nothing the refused calls asked for happened
        assert [p["status"] for p in sdk.pool_proposals("shifts")] == ["open"]
        assert sdk.pool_memories("shifts") == []
        assert fleet["parcels"] not in str(sdk.pool_memories("faq", limit=500))


def test_a_bound_server_keeps_its_binding_on_the_fleet_tools(
    api: str, tenants: dict[str, Any], fleet: dict[str, Any]
) -> None:
    key = tenants["alice"]["key"]
    with ApiClient(api, key) as sdk:
        sdk.share_memory("billing", fleet["cust_b"]["id"], "faq")  # a memory of cust-b in the pool

    async def scenario() -> None:
        async with stdio(api, key, "--agent", "billing") as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert set(tools) == TOOLS
            assert tools["share_memory"].input_schema["properties"]["agent"]["default"] == "billing"
            # its own agent by default, with pools; another agent is refused
            hits = data(await c.call_tool("recall_agents", {"query": "refund approval", "pools": ["faq"]}))
            assert {h.get("agent_id") or "pool " + h["pool"] for h in hits["memories"]} <= {"billing", "pool faq"}
            assert REFUND in {h["text"] for h in hits["memories"]}
            other = error_text(await c.call_tool("recall_agents", {"agents": ["shipping"], "query": "parcels"}))
            assert "bound to agent 'billing'" in other
            text = error_text(
                await c.call_tool("share_memory", {"agent": "shipping", "memory_id": fleet["parcels"], "pool": "faq"})
            )
            assert "bound to agent 'billing'" in text
            shared = data(await c.call_tool("share_memory", {"memory_id": fleet["refund"], "pool": "faq"}))
            assert shared["outcome"] in ("copied", "already shared") and shared["memory"]["text"] == REFUND

        async with stdio(api, key, "--subject", "cust-a") as c:
            tools = {t.name for t in (await c.list_tools()).tools}
            # deciding a proposal writes general knowledge into a pool: not for one subject's server
            assert tools == TOOLS - {"approve_proposal", "reject_proposal"}
            faq = data(await c.call_tool("pool_memories", {"pool": "faq"}))["memories"]
            assert REFUND in {m["text"] for m in faq} and "4242" not in str(faq)  # general yes, cust-b's no
            assert "bound to subject" in error_text(
                await c.call_tool("pool_memories", {"pool": "faq", "subject": "cust-b"})
            )
            hits = data(await c.call_tool("recall_agents", {"agents": ["billing"], "query": "card", "k": 20}))
            assert "4242" not in str(hits)
            # it shares its subject's memories only
            text = error_text(
                await c.call_tool("share_memory", {"agent": "billing", "memory_id": fleet["refund"], "pool": "faq"})
            )
            assert "is not subject 'cust-a''s" in text
            mine = data(
                await c.call_tool(
                    "share_memory", {"agent": "billing", "memory_id": fleet["cust_a"]["id"], "pool": "faq"}
                )
            )
            assert mine["outcome"] == "copied" and mine["memory"]["subject"] == "cust-a"
            s = data(await c.call_tool("open_session", {"agent": "billing", "session_id": "s-bound"}))
            assert s["subject"] == "cust-a"
            assert "bound to subject" in error_text(
                await c.call_tool("open_session", {"agent": "billing", "session_id": "s-x", "subject": "cust-b"})
            )

    anyio.run(scenario)
    with ApiClient(api, key) as sdk:  # the subject's share is in the pool, as that subject's
        copies = [m for m in sdk.pool_memories("faq", limit=500) if m["subject"] == "cust-a"]
        assert [m["text"] for m in copies] == [fleet["cust_a"]["text"]]
