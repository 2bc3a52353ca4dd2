"""Read time and sleep serve what is true now, on the real stack: a superseded memory is out of
recall (every path) and /context and back only for an audit (include_superseded); of two live
memories in an open review the newer ranks first and both say so, /context says "previously";
what sleep built from a memory that is then superseded is no longer served as current, and
sleep takes the newer of a conflict as its evidence; the history chain shows old -> new.

Supersedes and reviews are made by governance's calls and the review route, never by the
detection rules, so these tests do not depend on them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

import psycopg
import pytest

from memworker import reflection
from memworker.domain import memories
from memworker.domain.policy import Policy
from memworker.lifecycle import governance
from memworker.models.embeddings import CachedQueryEmbedder
from memworker.recall import hybrid as recall
from memworker.sdk import ApiError, Client
from memworker.sleep import consolidation
from memworker.storage import db, store
from memworker.tenancy import service as tenancy

OLD_STANDUP = "The platform team's standup meets at 09:30 in the Alder room."
NEW_STANDUP = "The platform team's standup meets at 10:15 in the Birch room."


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Iterator[Any]:
    p = db.open_pool(stack["app_url"], max_size=4)
    yield p
    p.close()


@pytest.fixture(scope="module")
def clients(api: str, tenants: dict[str, Any]) -> dict[str, Client]:
    return {name: Client(api, t["key"]) for name, t in tenants.items()}


def _seed(pool: Any, embedder: Any, tenant: UUID, agent: str, texts: list[str], kind: str = "fact") -> list[UUID]:
    """Memories written as ingest writes them (no contradiction check: the tests decide)."""
    ids = []
    with db.tenant_tx(pool, tenant) as conn:
        tenancy.ensure_agent(conn, tenant_id=tenant, agent_id=agent)
        for text, vec in zip(texts, embedder.embed(texts), strict=True):
            draft = memories.Draft(
                text=text, kind=kind, entities=reflection.entities_of(text), topics=reflection.topics_of(text)
            )
            mid, _ = store.write_memory(
                conn, tenant_id=tenant, agent_id=agent, draft=draft, embedding=vec, source_key=f"t:{agent}:{text}"
            )
            ids.append(mid)
    return ids


def _supersede(pool: Any, tenant: UUID, agent: str, older: UUID, newer: UUID) -> None:
    with db.tenant_tx(pool, tenant) as conn:
        assert governance.supersede(
            conn,
            tenant_id=tenant,
            agent_id=agent,
            older_id=older,
            newer_id=newer,
            reason="the test says so",
            actor="test",
            policy=Policy(),
            now=governance.clock(conn),
        )


def _review(pool: Any, tenant: UUID, agent: str, older: UUID, newer: UUID) -> None:
    with db.tenant_tx(pool, tenant) as conn:
        assert governance.add_review(
            conn,
            tenant_id=tenant,
            agent_id=agent,
            newer_id=newer,
            older_id=older,
            reason="the test says so",
            now=governance.clock(conn),
        )


def _owner(stack: dict[str, Any], sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(stack["owner_url"]) as conn:
        return conn.execute(sql, args).fetchall()


def _memory_lines(context: str) -> list[str]:
    return [line for line in context.splitlines() if line.startswith("[")]


def test_a_superseded_fact_is_out_of_recall_and_context_and_back_only_for_an_audit(
    pool: Any, embedder: Any, clients: dict[str, Client], tenants: dict[str, Any]
) -> None:
    alice, agent = tenants["alice"]["id"], "office"
    old, new = _seed(pool, embedder, alice, agent, [OLD_STANDUP, NEW_STANDUP])
    _supersede(pool, alice, agent, old, new)
    c = clients["alice"]
    question = "when and where does the platform team standup meet?"
    hits = c.recall(agent, question, k=10)["memories"]
    assert [h["id"] for h in hits] == [str(new)]
    assert "valid_to" not in hits[0] and "conflicts_with" not in hits[0]
    # the bounded (large-agent) statement and the one over several agents serve live rows only too
    qvec = CachedQueryEmbedder(embedder).embed_one(question)
    with db.tenant_tx(pool, alice) as conn:
        for path in ("exact", "bounded"):
            found = recall.recall(
                conn,
                qvec,
                tenant_id=alice,
                agent_id=agent,
                query=recall.Query(question, k=10),
                policy=Policy(),
                path=path,
            )
            assert [h["id"] for h in found] == [str(new)], path
    assert [h["id"] for h in c.recall_agents([agent], question, k=10)["memories"]] == [str(new)]
    audit = c.recall(agent, question, k=10, include_superseded=True)["memories"]
    by_id = {h["id"]: h for h in audit}
    assert set(by_id) == {str(old), str(new)}
    assert by_id[str(old)]["superseded_by"] == str(new) and by_id[str(old)]["valid_to"]
    assert "valid_to" not in by_id[str(new)]
    across = c.recall_agents([agent], question, k=10, include_superseded=True)["memories"]
    assert {h["id"] for h in across} == {str(old), str(new)}
    # /context: the current value, saying what it replaced; never the old one as a fact
    lines = _memory_lines(c.context(agent, question)["context"])
    assert any(NEW_STANDUP in line and "previously" in line and "Alder" in line for line in lines)
    assert not any(line.split(") ", 1)[1].startswith(f'"{OLD_STANDUP}') for line in lines)
    # another tenant sees none of it
    with pytest.raises(ApiError) as err:
        clients["bob"].recall(agent, question, include_superseded=True)
    assert err.value.status == 404


def test_of_two_live_memories_under_review_the_newer_ranks_first_and_both_say_so(
    pool: Any, embedder: Any, clients: dict[str, Client], tenants: dict[str, Any]
) -> None:
    alice, agent = tenants["alice"]["id"], "crm"
    # the older one matches the question better: only the review puts the newer first
    older, newer = _seed(
        pool,
        embedder,
        alice,
        agent,
        ["Customer Dana prefers to be contacted by email about invoices.", "Dana now wants phone calls instead."],
    )
    _review(pool, alice, agent, older, newer)
    c = clients["alice"]
    question = "how does customer Dana prefer to be contacted about invoices?"
    plain = c.recall(agent, question, k=5)["memories"]
    ids = [h["id"] for h in plain]
    assert ids.index(str(newer)) + 1 == ids.index(str(older))  # directly above
    by_id = {h["id"]: h for h in plain}
    assert by_id[str(newer)]["conflicts_with"] == [str(older)]
    assert by_id[str(older)]["conflicts_with"] == [str(newer)]
    assert by_id[str(newer)]["valid_from"] >= by_id[str(older)]["valid_from"]
    lines = _memory_lines(c.context(agent, question)["context"])
    assert any("phone calls" in line and "previously" in line and "email" in line for line in lines)
    assert not any(line.split(") ", 1)[1].startswith('"Customer Dana prefers') for line in lines)
    # settled through the review route: the older is superseded, out of recall, and the chain shows it
    (item,) = c.reviews(agent)
    assert c.resolve_review(agent, item["id"], str(newer), "Dana called")["superseded"] == str(older)
    after = c.recall(agent, question, k=5)["memories"]
    assert str(older) not in [h["id"] for h in after]
    assert all("conflicts_with" not in h for h in after)
    chain = c.history(agent, str(older))
    assert [v["id"] for v in chain["versions"]] == [str(older), str(newer)]
    assert [v["current"] for v in chain["versions"]] == [False, True]
    with pytest.raises(ApiError) as err:
        clients["charlie"].history(agent, str(older))
    assert err.value.status == 404


INVOICES = [f"The invoice export for customer {c} timed out again." for c in ("Acme", "Globex", "Initech", "Umbrella")]


def test_a_conclusion_built_from_a_fact_that_is_then_superseded_is_no_longer_served(
    pool: Any, embedder: Any, stack: dict[str, Any], clients: dict[str, Client], tenants: dict[str, Any]
) -> None:
    bob, agent = tenants["bob"]["id"], "billing"
    _seed(pool, embedder, bob, agent, INVOICES)
    report = _pass(pool, embedder, stack, bob, agent)
    assert report.status == "done" and report.conclusion_ids
    conclusion = report.conclusion_ids[0]
    with db.tenant_tx(pool, bob) as conn:
        evidence = store.get_memory(conn, tenant_id=bob, agent_id=agent, memory_id=UUID(conclusion)).metadata[
            "evidence"
        ]
    changed = UUID(evidence[0])
    (fixed,) = _seed(pool, embedder, bob, agent, ["The invoice export for customer Acme no longer times out."])
    _supersede(pool, bob, agent, changed, fixed)
    c = clients["bob"]
    hits = c.recall(agent, "invoice export timed out", k=20)["memories"]
    assert conclusion not in [h["id"] for h in hits] and str(changed) not in [h["id"] for h in hits]
    audit = {h["id"]: h for h in c.recall(agent, "invoice export timed out", k=20, include_superseded=True)["memories"]}
    assert audit[conclusion]["valid_to"] and audit[conclusion]["superseded_by"] is None
    # the event on the conclusion names the evidence that changed and what replaced it
    events = [e for e in c.history(agent, conclusion)["events"] if e["event"] == "superseded"]
    assert [e["related_ids"] for e in events] == [[str(changed), str(fixed)]]
    assert f"memory:{changed}" in events[0]["reason"]
    # its other evidence is back in sleep's window and a pass is asked for
    requeued = _owner(
        stack,
        "SELECT id FROM memworker.memories WHERE tenant_id = %s AND id = ANY(%s) AND consolidated_at IS NULL",
        bob,
        [UUID(e) for e in evidence if UUID(e) != changed],
    )
    assert len(requeued) == len(evidence) - 1
    assert _owner(
        stack, "SELECT consolidation_requested FROM memworker.agents WHERE tenant_id = %s AND id = %s", bob, agent
    ) == [(True,)]
    # the next pass builds from what holds now: never from the superseded fact
    again = _pass(pool, embedder, stack, bob, agent)
    assert again.status == "done"
    with db.tenant_tx(pool, bob) as conn:
        for cid in again.conclusion_ids:
            rebuilt = store.get_memory(conn, tenant_id=bob, agent_id=agent, memory_id=UUID(cid))
            assert str(changed) not in rebuilt.metadata["evidence"]
    with pytest.raises(ApiError) as err:
        clients["alice"].history(agent, conclusion)
    assert err.value.status == 404


def test_sleep_takes_the_newer_of_a_conflict_as_evidence(
    pool: Any, embedder: Any, stack: dict[str, Any], tenants: dict[str, Any]
) -> None:
    charlie, agent = tenants["charlie"]["id"], "billing"
    texts = [*INVOICES[1:], "The invoice export for customer Acme timed out at 02:00."]
    ids = _seed(pool, embedder, charlie, agent, texts)
    (newer,) = _seed(pool, embedder, charlie, agent, ["The invoice export for customer Acme timed out at 04:00."])
    _review(pool, charlie, agent, ids[-1], newer)
    report = _pass(pool, embedder, stack, charlie, agent)
    assert report.status == "done" and report.steps["current"].startswith("1 outdated")
    with db.tenant_tx(pool, charlie) as conn:
        used = {e for cid in report.conclusion_ids for e in _evidence(conn, charlie, agent, cid)}
        # the conflict is still there for a person to settle: neither side was merged away
        for mid in (ids[-1], newer):
            assert store.get_memory(conn, tenant_id=charlie, agent_id=agent, memory_id=mid).valid_to is None
    assert str(ids[-1]) not in used
    if report.insight_id:
        with db.tenant_tx(pool, charlie) as conn:
            assert str(ids[-1]) not in _evidence(conn, charlie, agent, report.insight_id)


def _evidence(conn: db.Conn, tenant: UUID, agent: str, memory_id: str) -> list[str]:
    return list(
        store.get_memory(conn, tenant_id=tenant, agent_id=agent, memory_id=UUID(memory_id)).metadata["evidence"]
    )


def _pass(pool: Any, embedder: Any, stack: dict[str, Any], tenant: UUID, agent: str) -> consolidation.Report:
    with db.tenant_tx(pool, tenant) as conn:
        run_id = consolidation.request_run(conn, tenant_id=tenant, agent_id=agent, trigger="test")
    return consolidation.run_pass(
        pool, embedder, None, stack["settings"], tenant_id=tenant, agent_id=agent, run_id=run_id, force=True
    )
