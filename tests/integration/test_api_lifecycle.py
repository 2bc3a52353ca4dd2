"""Lifecycle governance over real HTTP with the real embedder and three tenants: promote,
supersede and history, review, merge and id resolution, forget with its receipt, policy
with field-naming 422s, retention runs and reports, scopes and isolation."""

from __future__ import annotations

from typing import Any

import pytest

from memworker import keys
from memworker.sdk import ApiError, Client
from memworker.storage import db


@pytest.fixture(scope="module")
def clients(api: str, tenants: dict[str, Any]) -> dict[str, Client]:
    return {name: Client(api, t["key"]) for name, t in tenants.items()}


def limited(api: str, stack: dict[str, Any], tenant_id: Any, scopes: tuple[str, ...]) -> Client:
    with db.connect(stack["owner_url"]) as conn:
        db.bind_tenant(conn, tenant_id)
        key, _ = keys.create(conn, tenant_id=tenant_id, scopes=scopes)
    return Client(api, key)


def status_of(call: Any) -> tuple[int, Any]:
    with pytest.raises(ApiError) as err:
        call()
    return err.value.status, err.value.body


def test_promote_is_audited_and_l3_needs_admin(
    api: str, stack: dict[str, Any], clients: dict[str, Client], tenants: dict[str, Any]
) -> None:
    alice = clients["alice"]
    m = alice.add_memory("gov", "Production deploys need two approvals.", kind="method")
    up = alice.promote("gov", m["id"], "L2", "the team confirmed it in the retro")
    assert up["tier"] == "L2" and up["expires_at"] is None  # the semantic tiers have no clock by default
    writer = limited(api, stack, tenants["alice"]["id"], ("memories:read", "memories:write"))
    code, body = status_of(lambda: writer.promote("gov", m["id"], "L3", "make it canonical"))
    assert code == 403 and "admin" in body["error"]
    canon = alice.promote("gov", m["id"], "L3", "policy of the company")
    assert canon["tier"] == "L3" and canon["expires_at"] is None  # L3 has no TTL by default
    assert status_of(lambda: alice.promote("gov", m["id"], "L2", "back down"))[0] == 422
    assert status_of(lambda: clients["bob"].promote("gov", m["id"], "L2", "not mine"))[0] == 404
    events = alice.history("gov", m["id"])["events"]
    promoted = [e for e in events if e["event"] == "promoted"]
    assert [e["reason"] for e in promoted] == [
        "L1 -> L2: the team confirmed it in the retro",
        "L2 -> L3: policy of the company",
    ]
    assert all(e["actor"].startswith("key:") for e in promoted)


def test_a_sure_newer_fact_supersedes_the_old_one_and_history_shows_the_chain(clients: dict[str, Client]) -> None:
    bob = clients["bob"]
    old = bob.add_memory("stack", "The project uses Python 3.9.")
    new = bob.add_memory("stack", "The project uses Python 3.11.", confidence=0.95)
    assert bob.get_memory("stack", old["id"])["superseded_by"] == new["id"]
    hits = bob.recall("stack", "which Python version does the project use?", k=10)["memories"]
    assert [h["id"] for h in hits] == [new["id"]]
    chain = bob.history("stack", old["id"])
    assert [v["id"] for v in chain["versions"]] == [old["id"], new["id"]]
    assert [v["current"] for v in chain["versions"]] == [False, True]
    assert any(e["event"] == "superseded" and e["memory_id"] == old["id"] for e in chain["events"])
    assert status_of(lambda: clients["charlie"].history("stack", old["id"]))[0] == 404


def test_an_unsure_contradiction_goes_to_review_and_is_resolved_by_a_call(clients: dict[str, Client]) -> None:
    charlie = clients["charlie"]
    older = charlie.add_memory("crm", "The customer prefers email.")
    newer = charlie.add_memory("crm", "The customer prefers phone.", confidence=0.6)
    (item,) = charlie.reviews("crm")
    assert item["older"]["id"] == older["id"] and item["newer"]["id"] == newer["id"]
    assert item["older"]["text"] == "The customer prefers email." and "swap" in item["reason"]
    assert status_of(lambda: clients["alice"].reviews("crm"))[0] == 404  # another tenant
    assert status_of(lambda: charlie.resolve_review("crm", item["id"], "neither"))[0] == 422
    out = charlie.resolve_review("crm", item["id"], newer["id"], "confirmed on the phone")
    assert out["superseded"] == older["id"]
    assert charlie.reviews("crm") == [] and charlie.reviews("crm", status="resolved")[0]["status"] == "resolved"
    assert status_of(lambda: charlie.resolve_review("crm", item["id"], "both"))[0] == 422  # already resolved
    assert [h["id"] for h in charlie.recall("crm", "how does the customer want to be contacted", k=5)["memories"]] == [
        newer["id"]
    ]


def test_retention_merges_near_duplicates_and_the_merged_id_still_answers(clients: dict[str, Client]) -> None:
    alice = clients["alice"]
    a = alice.add_memory("dups", "The on-call rotation changes every Monday morning.", salience=0.3)
    b = alice.add_memory("dups", "The on-call rotation changes every monday morning!", salience=0.9)
    report = alice.run_retention("dups")
    assert report["status"] == "done" and report["merged"] == 1
    survivor = alice.get_memory("dups", b["id"])
    assert survivor["id"] == a["id"] and survivor["salience"] == 0.9  # the older one survives, the higher salience
    assert alice.history("dups", b["id"])["memory_id"] == a["id"]
    runs = alice.retention_runs("dups")
    assert runs[0]["merged"] == 1 and runs[0]["trigger"] == "api" and runs[0]["status"] == "done"
    assert status_of(lambda: clients["bob"].retention_runs("dups"))[0] == 404
    assert status_of(lambda: clients["bob"].run_retention("dups"))[0] == 404


def test_forget_needs_the_erase_scope_and_returns_a_receipt(
    api: str, stack: dict[str, Any], clients: dict[str, Client], tenants: dict[str, Any]
) -> None:
    bob = clients["bob"]
    m1 = bob.add_memory("pii", "The customer's card ends in 4242.", session_id="call-7")
    m2 = bob.add_memory("pii", "The customer's dog is called Rex.", session_id="call-7")
    keep = bob.add_memory("pii", "Support hours are 9 to 5.", session_id="call-8")
    no_erase = limited(api, stack, tenants["bob"]["id"], ("memories:read", "memories:write", "admin"))
    assert status_of(lambda: no_erase.forget("pii", session_id="call-7"))[0] == 403
    assert status_of(lambda: bob.forget("pii", session_id="call-7", provenance="api"))[0] == 422
    assert status_of(lambda: bob.forget("pii"))[0] == 422
    assert status_of(lambda: clients["alice"].forget("pii", session_id="call-7"))[0] == 404
    receipt = bob.forget("pii", session_id="call-7")
    assert sorted(receipt["memories"]["ids"]) == sorted([m1["id"], m2["id"]]) and receipt["embeddings"] == 2
    assert receipt["terms"] > 0 and receipt["request"] == "session_id=call-7"
    for q in ("card number", "dog name Rex", "customer"):
        assert all(h["id"] == keep["id"] for h in bob.recall("pii", q, k=10)["memories"])
    assert status_of(lambda: bob.get_memory("pii", m1["id"]))[0] == 404


def test_policy_is_validated_by_field_and_layered(
    api: str, stack: dict[str, Any], clients: dict[str, Client], tenants: dict[str, Any]
) -> None:
    charlie = clients["charlie"]
    assert charlie.policy()["effective"]["decay_days"] == 30.0
    code, body = status_of(lambda: charlie.set_policy({"decay_days": -3}, agent_id="tuned"))
    assert code == 422 and "decay_days" in body["error"]
    code, body = status_of(lambda: charlie.set_policy({"max_episodic": "lots"}))
    assert code == 422 and "max_episodic" in body["error"]
    code, body = status_of(lambda: charlie.set_policy({"no_such_rule": 1}))
    assert code == 422 and "no_such_rule" in body["error"]
    assert charlie.policy()["overrides"] == {}  # a refused PUT changed nothing
    charlie.set_policy({"ttl_l1_hours": 48, "max_episodic": 500})
    out = charlie.set_policy({"max_episodic": 50, "unused_days": None}, agent_id="tuned")
    assert out["overrides"] == {"max_episodic": 50, "unused_days": None}
    eff = out["effective"]
    assert (eff["ttl_l1_hours"], eff["max_episodic"], eff["unused_days"]) == (48.0, 50, None)
    assert charlie.policy("tuned")["tenant_overrides"] == {"ttl_l1_hours": 48, "max_episodic": 500}
    reader = limited(api, stack, tenants["charlie"]["id"], ("memories:read", "memories:write"))
    assert status_of(lambda: reader.set_policy({"max_episodic": 10}, agent_id="tuned"))[0] == 403
    assert reader.policy("tuned")["effective"]["max_episodic"] == 50
    assert status_of(lambda: clients["alice"].policy("tuned"))[0] == 404
    assert clients["alice"].policy()["effective"]["ttl_l1_hours"] is None  # charlie's defaults stay charlie's
    m = charlie.add_memory("tuned", "A memory under the tenant's 48 hour TTL.")
    hours = (_ts(m["expires_at"]) - _ts(m["created_at"])) / 3600
    assert hours == pytest.approx(48, abs=0.01)
    charlie.set_policy({})  # back to the defaults


def _ts(s: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(s).timestamp()
