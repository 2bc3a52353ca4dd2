"""Administration within a tenant over real HTTP: the agents with their counts and pages, an
agent's subjects, an agent's erase with its receipt, and API keys minted, listed and revoked
by a key with the `keys` scope, never beyond its own powers. Each route: 403 without its
scope, another tenant's agent 404 and never listed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memworker import keys
from memworker.sdk import ApiError, Client
from memworker.storage import db


@pytest.fixture(scope="module")
def clients(api: str, tenants: dict[str, Any]) -> dict[str, Client]:
    return {name: Client(api, t["key"]) for name, t in tenants.items()}


def operator_key(api: str, stack: dict[str, Any], tenant_id: Any, **kw: Any) -> tuple[Client, str]:
    """A key the operator makes on the host (memworker key create), and its prefix."""
    with db.connect(stack["owner_url"]) as conn:
        db.bind_tenant(conn, tenant_id)
        key, row = keys.create(conn, tenant_id=tenant_id, **kw)
    return Client(api, key), row.prefix


def status_of(call: Any) -> tuple[int, Any]:
    with pytest.raises(ApiError) as err:
        call()
    return err.value.status, err.value.body


def test_a_key_made_without_naming_scopes_has_every_scope_but_keys(clients: dict[str, Client]) -> None:
    assert "keys" in keys.SCOPES and "keys" not in keys.DEFAULT_SCOPES
    assert set(keys.DEFAULT_SCOPES) == set(keys.SCOPES) - {"keys"}
    code, body = status_of(lambda: clients["alice"].list_keys())
    assert code == 403 and "keys" in body["error"]
    assert status_of(lambda: clients["alice"].create_key(["memories:read"]))[0] == 403


def test_agents_are_listed_with_their_counts_in_pages_and_only_the_tenants_own(
    api: str, stack: dict[str, Any], clients: dict[str, Client], tenants: dict[str, Any]
) -> None:
    alice, bob = clients["alice"], clients["bob"]
    alice.add_memory("fleet-a", "The VPN gateway is vpn-03.", subject="cust-1")
    alice.add_memory("fleet-a", "Backups run at 02:00 UTC.")
    alice.add_episode("fleet-b", "The customer asked about invoice INV-4471.", subject="cust-1")
    alice.create_session("fleet-c", "s-1", subject="cust-2")
    alice.add_pool_memory("faq-admin", "Office hours are 9 to 5.")
    bob.add_memory("bob-only", "Bob's agent knows nothing of alice.")

    first = alice.agents(limit=2)
    assert [a["agent_id"] for a in first["agents"]] == ["fleet-a", "fleet-b"] and first["next_cursor"]
    rest = alice.agents(limit=2, cursor=first["next_cursor"])
    assert [a["agent_id"] for a in rest["agents"]] == ["fleet-c"] and rest["next_cursor"] is None
    by_id = {a["agent_id"]: a for a in first["agents"] + rest["agents"]}
    assert (by_id["fleet-a"]["memories"], by_id["fleet-a"]["episodes"], by_id["fleet-a"]["sessions"]) == (2, 0, 0)
    assert (by_id["fleet-b"]["episodes"], by_id["fleet-b"]["memories"]) == (1, 0)
    assert by_id["fleet-c"]["sessions"] == 1
    assert all(a["last_activity_at"] >= a["created_at"] for a in by_id.values())
    # pools are not agents here (GET /v1/pools lists them); another tenant's are never listed
    assert "pool~faq-admin" not in by_id and "bob-only" not in by_id
    assert [a["agent_id"] for a in bob.agents()["agents"]] == ["bob-only"]
    assert clients["charlie"].agents() == {"agents": [], "next_cursor": None}

    narrow, _ = operator_key(api, stack, tenants["alice"]["id"], scopes=("memories:read",), agent_ids=["fleet-b"])
    assert [a["agent_id"] for a in narrow.agents()["agents"]] == ["fleet-b"]
    writer, _ = operator_key(api, stack, tenants["alice"]["id"], scopes=("memories:write",))
    assert status_of(lambda: writer.agents())[0] == 403
    assert status_of(lambda: alice.agents(cursor="%%%not-a-cursor"))[0] == 422


def test_an_agents_subjects_with_counts(
    api: str, stack: dict[str, Any], clients: dict[str, Client], tenants: dict[str, Any]
) -> None:
    alice = clients["alice"]
    for text, subject in [("Ann likes tea.", "ann"), ("Ann works in Leeds.", "ann"), ("Bo uses Linux.", "bo")]:
        alice.add_memory("subj-agent", text, subject=subject)
    alice.add_memory("subj-agent", "The agent's general knowledge.")
    alice.add_episode("subj-agent", "Cy called about a refund.", subject="cy")
    alice.create_session("subj-agent", "with-bo", subject="bo")

    page = alice.agent_subjects("subj-agent", limit=2)
    assert [(s["subject"], s["memories"], s["episodes"], s["sessions"]) for s in page["subjects"]] == [
        ("ann", 2, 0, 0),
        ("bo", 1, 0, 1),
    ]
    rest = alice.agent_subjects("subj-agent", cursor=page["next_cursor"])
    assert [(s["subject"], s["episodes"]) for s in rest["subjects"]] == [("cy", 1)] and rest["next_cursor"] is None

    assert status_of(lambda: clients["bob"].agent_subjects("subj-agent"))[0] == 404
    assert status_of(lambda: alice.agent_subjects("no-such-agent"))[0] == 404
    elsewhere, _ = operator_key(api, stack, tenants["alice"]["id"], scopes=("memories:read",), agent_ids=["other"])
    assert status_of(lambda: elsewhere.agent_subjects("subj-agent"))[0] == 404  # not confirmed to exist
    writer, _ = operator_key(api, stack, tenants["alice"]["id"], scopes=("memories:write",))
    assert status_of(lambda: writer.agent_subjects("subj-agent"))[0] == 403


def test_erasing_an_agent_takes_everything_of_it_and_its_pool_copies(
    api: str, stack: dict[str, Any], clients: dict[str, Client], tenants: dict[str, Any]
) -> None:
    alice, bob = clients["alice"], clients["bob"]
    alice.set_policy({"pools_write": ["shared-erase"]}, agent_id="doomed")
    kept = alice.add_memory("doomed", "Deploys go through the release train.", kind="method")
    alice.add_memory("doomed", "Dana prefers calls on Tuesdays.", subject="dana")
    alice.add_episode("doomed", "Dana asked for the Q3 report.", subject="dana")
    alice.create_session("doomed", "s-doomed", subject="dana")
    copy = alice.share_memory("doomed", kept["id"], "shared-erase")["memory"]
    alice.add_pool_memory("shared-erase", "Written to the pool directly.")
    alice.add_memory("survivor", "Another agent keeps its memories.")
    bob.add_memory("doomed", "Bob's agent of the same name is bob's.")

    assert status_of(lambda: bob.erase_agent("survivor"))[0] == 404  # another tenant's agent
    reader, _ = operator_key(api, stack, tenants["alice"]["id"], scopes=("memories:read", "memories:write"))
    code, body = status_of(lambda: reader.erase_agent("doomed"))
    assert code == 403 and "erase" in body["error"]

    receipt = alice.erase_agent("doomed")
    assert receipt["agent_id"] == "doomed"
    assert (receipt["memories"], receipt["episodes"], receipt["sessions"]) == (2, 1, 1)
    assert receipt["pool_copies"] == {"count": 1, "ids": [copy["id"]]}
    assert receipt["terms"] > 0 and receipt["audit_events"] >= 1
    assert "Dana" not in str(receipt) and "release train" not in str(receipt)  # counts and ids, no text

    assert "doomed" not in [a["agent_id"] for a in alice.agents()["agents"]]
    assert status_of(lambda: alice.get_memory("doomed", kept["id"]))[0] == 404
    assert [m["text"] for m in alice.pool_memories("shared-erase")] == ["Written to the pool directly."]
    assert [m["text"] for m in alice.list_memories("survivor")["memories"]] == ["Another agent keeps its memories."]
    assert [m["text"] for m in bob.list_memories("doomed")["memories"]] == ["Bob's agent of the same name is bob's."]
    assert status_of(lambda: alice.erase_agent("doomed"))[0] == 404  # gone: nothing to erase twice
    # the id can be used again: a new agent under it starts empty
    alice.add_memory("doomed", "A fresh start.")
    assert [m["text"] for m in alice.list_memories("doomed")["memories"]] == ["A fresh start."]


def test_a_keys_key_mints_lists_and_revokes_within_its_own_powers(
    api: str, stack: dict[str, Any], clients: dict[str, Client], tenants: dict[str, Any]
) -> None:
    alice_id = tenants["alice"]["id"]
    clients["alice"].add_memory("k-agent", "Keys test memory.")
    clients["alice"].add_pool_memory("k-pool", "Pool memory for keys.")
    admin, admin_prefix = operator_key(
        api,
        stack,
        alice_id,
        name="key-admin",
        scopes=("memories:read", "memories:write", "keys"),
        agent_ids=["k-agent", "k-other", "pool~k-pool"],
    )
    minted = admin.create_key(["memories:read"], name="reader", agents=["k-agent"], pools=["k-pool"])
    assert minted["api_key"].startswith(f"mwk_{minted['prefix']}_") and minted["state"] == "active"
    assert (minted["scopes"], minted["agents"], minted["pools"]) == (["memories:read"], ["k-agent"], ["k-pool"])
    reader = Client(api, minted["api_key"])
    assert [m["text"] for m in reader.list_memories("k-agent")["memories"]] == ["Keys test memory."]
    assert [m["text"] for m in reader.pool_memories("k-pool")] == ["Pool memory for keys."]
    assert status_of(lambda: reader.add_memory("k-agent", "no write scope"))[0] == 403

    # never beyond itself: scopes, agents, pools, "all agents", expiry
    beyond = [
        lambda: admin.create_key(["memories:read", "erase"], agents=["k-agent"]),
        lambda: admin.create_key(["memories:read"], agents=["k-agent", "k-elsewhere"]),
        lambda: admin.create_key(["memories:read"], agents=["k-agent"], pools=["other-pool"]),
        lambda: admin.create_key(["memories:read"]),  # every agent and pool
    ]
    for call in beyond:
        code, body = status_of(call)
        assert code == 403, body
    assert status_of(lambda: admin.create_key(["no-such-scope"], agents=["k-agent"]))[0] == 422
    soon = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    expiring = Client(api, admin.create_key(["memories:read", "keys"], agents=["k-agent"], expires_at=soon)["api_key"])
    assert status_of(lambda: expiring.create_key(["memories:read"], agents=["k-agent"]))[0] == 403  # outlives it
    naive = (datetime.now(UTC) + timedelta(hours=1)).replace(tzinfo=None).isoformat()
    assert status_of(lambda: expiring.create_key(["memories:read"], agents=["k-agent"], expires_at=naive))[0] == 422
    later = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    assert status_of(lambda: expiring.create_key(["memories:read"], agents=["k-agent"], expires_at=later))[0] == 403

    # it lists the keys within its powers (itself included), never a wider one nor a secret
    listed = {k["prefix"]: k for k in admin.list_keys()}
    assert {admin_prefix, minted["prefix"]} <= set(listed)
    assert keys.prefix_of(tenants["alice"]["key"]) not in listed  # the tenant's full key is wider
    assert listed[admin_prefix]["agents"] == ["k-agent", "k-other"] and listed[admin_prefix]["pools"] == ["k-pool"]
    assert "api_key" not in str(listed) and minted["api_key"] not in str(listed)
    wide_prefix = keys.prefix_of(tenants["alice"]["key"])
    assert wide_prefix is not None
    assert status_of(lambda: admin.revoke_key(wide_prefix))[0] == 404  # a wider key: not switched off
    assert clients["alice"].agents()["agents"]  # and still works

    # revoke takes effect at once
    revoked = admin.revoke_key(minted["prefix"])
    assert revoked["state"] == "revoked" and revoked["revoked_at"]
    assert status_of(lambda: reader.list_memories("k-agent"))[0] == 401
    assert status_of(lambda: admin.revoke_key(minted["prefix"]))[0] == 404  # no active key with it


def test_keys_of_another_tenant_are_invisible(
    api: str, stack: dict[str, Any], clients: dict[str, Client], tenants: dict[str, Any]
) -> None:
    bob_admin, _ = operator_key(api, stack, tenants["bob"]["id"], scopes=keys.SCOPES)
    alice_admin, alice_prefix = operator_key(api, stack, tenants["alice"]["id"], scopes=keys.SCOPES)
    alice_minted = alice_admin.create_key(["memories:read"], name="alice-reader")
    bob_prefixes = {k["prefix"] for k in bob_admin.list_keys()}
    assert alice_prefix not in bob_prefixes and alice_minted["prefix"] not in bob_prefixes
    assert keys.prefix_of(tenants["alice"]["key"]) not in bob_prefixes
    assert status_of(lambda: bob_admin.revoke_key(alice_minted["prefix"]))[0] == 404
    assert Client(api, alice_minted["api_key"]).agents()["agents"]  # still works
    # a key bob mints is bob's: it sees none of alice's agents
    bob_reader = Client(api, bob_admin.create_key(["memories:read"])["api_key"])
    assert "fleet-a" not in [a["agent_id"] for a in bob_reader.agents()["agents"]]
    assert status_of(lambda: bob_reader.agent_subjects("subj-agent"))[0] == 404
    # an unlimited keys key may mint a keys key with all of its scopes, and list the tenant's full key
    assert keys.prefix_of(tenants["alice"]["key"]) in {k["prefix"] for k in alice_admin.list_keys()}


def test_the_cli_drives_these_routes_through_the_sdk(
    api: str,
    clients: dict[str, Client],
    tenants: dict[str, Any],
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from memworker.cli import main as cli

    monkeypatch.setenv("MEMWORKER_API_KEY", tenants["charlie"]["key"])
    monkeypatch.setenv("MEMWORKER_API_PORT", api.rsplit(":", 1)[1])
    monkeypatch.setenv("MEMWORKER_DATA_DIR", str(tmp_path))  # no stack.json: the URL from host and port
    assert cli.main(["memories", "add", "--agent", "cli-agent", "--subject", "eve", "Eve prefers SMS.", "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert cli.main(["memories", "get", "--agent", "cli-agent", written["id"]]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == "Eve prefers SMS."
    assert cli.main(["agents", "list", "--json"]) == 0
    assert [a["agent_id"] for a in json.loads(capsys.readouterr().out)["agents"]] == ["cli-agent"]
    assert cli.main(["agents", "subjects", "cli-agent", "--json"]) == 0
    assert [s["subject"] for s in json.loads(capsys.readouterr().out)["subjects"]] == ["eve"]
    assert cli.main(["subject", "forget", "eve", "--yes"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["memories"] == 1
    assert cli.main(["memories", "list", "--agent", "cli-agent", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memories"] == []
    assert cli.main(["agents", "erase", "cli-agent", "--yes"]) == 0
    assert json.loads(capsys.readouterr().out)["agent_id"] == "cli-agent"
    assert cli.main(["agents", "subjects", "cli-agent"]) == 1  # gone: the API's 404, said on stderr
    assert "not found" in capsys.readouterr().err
    assert "cli-agent" not in [a["agent_id"] for a in clients["alice"].agents()["agents"]]
