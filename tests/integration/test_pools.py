"""Shared pools: tenant-level memories that agents read by policy (pools_read), written
directly or by sharing an agent's memory (pools_write); forgetting the source reaches the
copies; keys limited to agents reach a pool only through a granted agent or by naming it;
pools never cross tenants. Real API, Postgres and Redis."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import psycopg
import pytest

from memworker import keys
from memworker.domain.policy import Policy
from memworker.fleet import pools
from memworker.sdk import ApiError, Client
from memworker.sleep import consolidation
from memworker.storage import db

REFUNDS = "Refunds are processed within 5 business days of approval."


def _key(stack: dict[str, Any], tenant_id: Any, **kw: Any) -> str:
    with db.connect(stack["owner_url"]) as conn:
        db.bind_tenant(conn, tenant_id)
        key, _ = keys.create(conn, tenant_id=tenant_id, **kw)
    return key


@pytest.fixture(scope="module")
def clients(api: str, tenants: dict[str, Any]) -> dict[str, Client]:
    return {name: Client(api, t["key"]) for name, t in tenants.items()}


@pytest.fixture(scope="module")
def fleet(clients: dict[str, Client]) -> dict[str, Any]:
    c = clients["alice"]
    c.set_policy({"pools_read": ["faq"], "pools_write": ["faq"]}, agent_id="bot-a")
    c.set_policy({"pools_read": ["faq"], "pools_write": ["faq"]}, agent_id="bot-c")
    c.set_policy({}, agent_id="bot-b")
    pooled = c.add_pool_memory("faq", REFUNDS, kind="fact")
    return {"pooled": pooled}


def test_agents_read_the_pools_their_policy_grants(clients: dict[str, Client], fleet: Any) -> None:
    c = clients["alice"]
    c.add_memory("bot-a", "The refund form lives in the billing portal.")
    hits = c.recall("bot-a", "how long do refunds take", k=5)["memories"]
    pooled = [h for h in hits if h.get("pool") == "faq"]
    assert [h["id"] for h in pooled] == [fleet["pooled"]["id"]]
    assert any("pool" not in h for h in hits)  # its own memories rank in the same list
    assert REFUNDS in c.context("bot-a", "how long do refunds take")["context"]
    assert all(h.get("pool") is None for h in c.recall("bot-b", "how long do refunds take", k=5)["memories"])
    assert REFUNDS not in c.context("bot-b", "how long do refunds take")["context"]
    assert [p["pool"] for p in c.pools()] == ["faq"]


def test_sharing_copies_once_and_confirms_what_another_agent_learnt(clients: dict[str, Client], fleet: Any) -> None:
    c = clients["alice"]
    fact = "Enterprise customers get a dedicated support channel."
    mine = c.add_memory("bot-a", fact)
    first = c.share_memory("bot-a", mine["id"], "faq")
    assert first["outcome"] == "copied" and first["memory"]["text"] == fact
    assert first["memory"]["provenance"][0] == f"memory:bot-a/{mine['id']}"
    assert c.share_memory("bot-a", mine["id"], "faq")["outcome"] == "already shared"
    theirs = c.add_memory("bot-c", fact)
    second = c.share_memory("bot-c", theirs["id"], "faq")
    assert second["outcome"] == "confirmed" and second["memory"]["id"] == first["memory"]["id"]
    assert f"memory:bot-c/{theirs['id']}" in second["memory"]["provenance"]
    other = c.add_memory("bot-b", "A fact bot-b may not share.")
    with pytest.raises(ApiError) as err:
        c.share_memory("bot-b", other["id"], "faq")
    assert err.value.status == 403


def test_forgetting_a_source_reaches_its_pool_copies(clients: dict[str, Client], fleet: Any) -> None:
    c = clients["alice"]
    a = c.add_memory("bot-a", "The VIP hotline number is 555-0100.")
    copy_a = c.share_memory("bot-a", a["id"], "faq")["memory"]
    b = c.add_memory("bot-a", "The VIP escalation email is vip@example.com.")
    copy_b = c.share_memory("bot-a", b["id"], "faq")["memory"]
    c.delete_memory("bot-a", a["id"])
    receipt = c.forget("bot-a", memory_ids=[b["id"]])
    assert receipt["pool_copies"]["ids"] == [copy_b["id"]]
    left = {m["id"] for m in c.pool_memories("faq", limit=500)}
    assert copy_a["id"] not in left and copy_b["id"] not in left and fleet["pooled"]["id"] in left
    hits = c.recall("bot-c", "VIP hotline escalation", k=10)["memories"]
    assert not [h for h in hits if "VIP" in h["text"]]


def test_keys_and_tenants_reach_pools_only_as_granted(
    api: str, stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client], fleet: Any
) -> None:
    alice = tenants["alice"]["id"]
    only_a = Client(api, _key(stack, alice, agent_ids=["bot-a"]))
    assert any(h.get("pool") == "faq" for h in only_a.recall("bot-a", "refunds", k=5)["memories"])  # via its agent
    assert only_a.pools() == []
    for call in (
        lambda: only_a.pool_memories("faq"),
        lambda: only_a.add_pool_memory("faq", "A write it may not make."),
        lambda: only_a.recall_agents(["bot-a"], "refunds", pools=["faq"]),
    ):
        with pytest.raises(ApiError) as err:
            call()
        assert err.value.status == 404
    # nor can it grant its agent a pool it does not reach (then read or write it through the agent)
    with pytest.raises(ApiError) as err:
        only_a.set_policy({"pools_read": ["faq", "vault"], "pools_write": ["faq"]}, agent_id="bot-a")
    assert err.value.status == 403
    only_a.set_policy({"pools_read": ["faq"], "pools_write": ["faq"]}, agent_id="bot-a")  # what it had stays
    with_vault = Client(api, _key(stack, alice, agent_ids=["bot-a", "pool~vault"]))
    assert with_vault.set_policy({"pools_read": ["faq", "vault"]}, agent_id="bot-a")["effective"]["pools_read"] == [
        "faq",
        "vault",
    ]
    clients["alice"].set_policy({"pools_read": ["faq"], "pools_write": ["faq"]}, agent_id="bot-a")
    pool_key = Client(api, _key(stack, alice, agent_ids=["pool~faq"]))
    assert REFUNDS in {m["text"] for m in pool_key.pool_memories("faq", limit=500)}
    mixed = clients["alice"].recall_agents(["bot-b"], "how long do refunds take", pools=["faq"], k=5)["memories"]
    assert mixed[0]["pool"] == "faq" and mixed[0]["id"] == fleet["pooled"]["id"]
    # a pool is no agent: the agent routes cannot name it
    r = httpx.get(f"{api}/v1/agents/pool~faq/memories", headers={"Authorization": f"Bearer {tenants['alice']['key']}"})
    assert r.status_code == 422
    bob = clients["bob"]
    bob.set_policy({"pools_read": ["faq"]}, agent_id="bot-a")
    bob.add_memory("bot-a", "Bob's tenant handles refunds by cheque.")
    assert all(h.get("pool") is None for h in bob.recall("bot-a", "how long do refunds take", k=10)["memories"])
    with pytest.raises(ApiError) as err:
        bob.pool_memories("faq")
    assert err.value.status == 404
    for bad in ("a/b", "", "-x", "faq\n"):  # not even a trailing newline (Python's '$' allows one)
        with pytest.raises(ApiError) as err:
            clients["alice"].set_policy({"pools_read": [bad]}, agent_id="bot-a")
        assert err.value.status == 422


def test_sleep_shares_what_two_agents_learnt_independently(
    stack: dict[str, Any], embedder: Any, tenants: dict[str, Any], clients: dict[str, Client]
) -> None:
    c, tenant = clients["charlie"], tenants["charlie"]["id"]
    c.set_policy({"pools_write": ["lessons"], "pools_propose": "auto"}, agent_id="night")
    lesson = "Restarting the billing worker clears the stuck invoice queue."
    c.add_memories(
        "night",
        [{"text": t, "kind": "method"} for t in (lesson, "Night shift starts at 22:00.", "The pager rotates weekly.")],
    )
    theirs = c.add_memory("day", lesson, kind="method")
    c.add_memory("day", "Day shift starts at 08:00.")
    pool = db.open_pool(stack["app_url"], max_size=2)
    try:
        with db.tenant_tx(pool, tenant) as conn:
            run_id = consolidation.request_run(conn, tenant_id=tenant, agent_id="night", trigger="test")
        report = consolidation.run_pass(
            pool, embedder, None, stack["settings"], tenant_id=tenant, agent_id="night", run_id=run_id
        )
    finally:
        pool.close()
    assert report.status == "done" and report.steps["pools"] == "1 shared", report.steps
    (shared,) = c.pool_memories("lessons")
    assert shared["text"] == lesson and f"memory:day/{theirs['id']}" in shared["provenance"]
    assert any(p.startswith("memory:night/") for p in shared["provenance"])
    assert c.pool_memories("lessons", subject="nobody") == []
    c.delete_memory("day", theirs["id"])  # forgetting either source reaches the pool copy
    assert c.pool_memories("lessons") == []


def test_a_share_is_redacted_by_the_pools_policy_not_only_the_agents(clients: dict[str, Client]) -> None:
    c = clients["charlie"]
    c.set_policy({"redact_pii": True})  # the tenant's: pools follow it
    c.set_policy({"redact_pii": False, "pools_write": ["desk"]}, agent_id="raw")
    mine = c.add_memory("raw", "Escalations go to ops.lead@example.com.", metadata={"owner": "ops.lead@example.com"})
    assert "ops.lead@example.com" in mine["text"]  # the agent's own policy keeps it raw
    shared = c.share_memory("raw", mine["id"], "desk")["memory"]
    assert shared["text"] == "Escalations go to [EMAIL]." and shared["metadata"]["owner"] == "[EMAIL]"
    assert "ops.lead@example.com" not in str(c.pool_memories("desk"))
    c.set_policy({})


def test_sleep_takes_pool_locks_in_name_order(
    stack: dict[str, Any], tenants: dict[str, Any], clients: dict[str, Client]
) -> None:
    """Two passes whose policies list the same pools in other orders must not deadlock: each
    takes the pools' dedup locks in name order, so a pass waiting for 'zeta' holds 'alpha'."""
    c, tenant = clients["charlie"], tenants["charlie"]["id"]
    lesson = "Rotating the gateway certificate needs a config reload."
    mine = c.add_memory("owl", lesson, kind="method")
    c.add_memory("lark", lesson, kind="method")
    policy = Policy(pools_write=("zeta", "alpha"), pools_propose="auto")
    pool = db.open_pool(stack["app_url"], max_size=3)
    failed: list[BaseException] = []

    def sleep_pass() -> None:
        try:
            with db.tenant_tx(pool, tenant) as conn:
                pools.propose(conn, tenant_id=tenant, agent_id="owl", ids=[UUID(mine["id"])], policy=policy)
        except BaseException as exc:  # surfaced below
            failed.append(exc)

    try:
        with db.tenant_tx(pool, tenant) as holder, db.connect(stack["owner_url"], autocommit=True) as probe:
            db.dedup_lock(holder, tenant, "pool~zeta")
            thread = threading.Thread(target=sleep_pass)
            thread.start()
            waiting = (
                "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            deadline = time.monotonic() + 60
            while probe.execute(waiting).fetchone()["n"] == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            free = probe.execute(
                "SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0)) AS ok",
                (f"memworker:dedup:{tenant}:pool~alpha",),
            ).fetchone()["ok"]
            assert free is False  # the waiting pass already holds the first pool by name
        thread.join(60)
    finally:
        pool.close()
    assert not thread.is_alive() and not failed, failed
    assert [m["text"] for m in c.pool_memories("alpha")] == [lesson]
    assert [m["text"] for m in c.pool_memories("zeta")] == [lesson]


def test_a_batch_write_to_a_pool_answers_each_memory_with_its_pool(clients: dict[str, Client]) -> None:
    c = clients["charlie"]
    texts = ["Invoices are issued on the first of the month.", "Late invoices carry no fee."]
    written = c.add_pool_memories("handbook", [{"text": t, "kind": "fact"} for t in texts])
    assert [(m["text"], m["pool"]) for m in written] == [(t, "handbook") for t in texts]
    assert sorted(m["id"] for m in c.pool_memories("handbook")) == sorted(m["id"] for m in written)
    with pytest.raises(ApiError) as bad:
        c.add_pool_memories("handbook", [])
    assert bad.value.status == 422
    assert len(c.pool_memories("handbook")) == 2  # the refused batch changed nothing


def _post(api: str, key: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{api}{path}", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def test_an_agent_named_pool_never_shares_a_pools_idempotency_keys(
    api: str, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    """An agent's idempotency keys are scoped by (agent, subject) and a pool's by the pool,
    whatever their names: a key that reaches only an agent named 'pool', writing about subject
    'kb', neither learns which keys pool 'kb' used nor makes the pool's own writes fail."""
    charlie = tenants["charlie"]
    admin = charlie["key"]
    agent_only = _key(stack, charlie["id"], agent_ids=["pool"])
    pooled = _post(
        api, admin, "/v1/pools/kb/memories", {"text": "The KB is reviewed monthly.", "idempotency_key": "k1"}
    )
    assert pooled.status_code == 201, pooled.text
    mine = {}
    for k in ("k1", "k2"):  # k1: the pool's key, k2 not yet
        r = _post(
            api,
            agent_only,
            "/v1/agents/pool/memories",
            {"text": f"Note {k} about kb.", "subject": "kb", "idempotency_key": k},
        )
        assert r.status_code == 201, r.text
        assert r.json()["id"] != pooled.json()["id"] and r.json()["subject"] == "kb"
        mine[k] = r.json()["id"]
    # the pool's own batch with the key the agent used writes the pool's memory
    batch = _post(
        api,
        admin,
        "/v1/pools/kb/memories/batch",
        {"memories": [{"text": "KB edits need a ticket.", "idempotency_key": "k2"}]},
    )
    assert batch.status_code == 201, batch.text
    assert batch.json()["memories"][0]["id"] not in mine.values()
    # and each side's retries still answer with its own first write
    again = _post(
        api,
        agent_only,
        "/v1/agents/pool/memories",
        {"text": "Note k1 about kb.", "subject": "kb", "idempotency_key": "k1"},
    )
    assert again.status_code == 201 and again.json()["id"] == mine["k1"]
    again = _post(api, admin, "/v1/pools/kb/memories", {"text": "The KB is reviewed monthly.", "idempotency_key": "k1"})
    assert again.status_code == 201 and again.json()["id"] == pooled.json()["id"]
    with Client(api, admin) as c:
        assert sorted(m["text"] for m in c.pool_memories("kb")) == [
            "KB edits need a ticket.",
            "The KB is reviewed monthly.",
        ]


def test_the_key_migration_keeps_earlier_subject_writes_idempotent(
    api: str, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    """Rows written with the earlier source key of a subject write ('api:<agent>~<subject>/<key>')
    are rewritten by sql/0022_api_source_keys.sql: a retry of that write still answers with it, and
    the pool whose id that key spelled gets a key of its own."""
    charlie = tenants["charlie"]
    key = charlie["key"]
    first = _post(
        api,
        key,
        "/v1/agents/pool/memories",
        {"text": "Old note about wiki.", "subject": "wiki", "idempotency_key": "old"},
    )
    assert first.status_code == 201, first.text
    with psycopg.connect(stack["owner_url"]) as conn:  # as the write stored it before the new keys
        conn.execute(
            "UPDATE memworker.memories SET source_key = 'api:pool~wiki/old' WHERE id = %s", (first.json()["id"],)
        )
        conn.commit()
    migration = (Path(__file__).resolve().parents[2] / "sql" / "0022_api_source_keys.sql").read_text()
    with psycopg.connect(stack["owner_url"]) as conn:
        conn.execute(migration)  # type: ignore[arg-type]
        conn.commit()
    retry = _post(
        api,
        key,
        "/v1/agents/pool/memories",
        {"text": "Old note about wiki.", "subject": "wiki", "idempotency_key": "old"},
    )
    assert retry.status_code == 201 and retry.json()["id"] == first.json()["id"], retry.text
    pool = _post(
        api, key, "/v1/pools/wiki/memories", {"text": "The wiki moved to Confluence.", "idempotency_key": "old"}
    )
    assert pool.status_code == 201 and pool.json()["id"] != first.json()["id"], pool.text
