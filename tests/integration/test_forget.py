"""The right to be forgotten against the real database: by provenance, memory ids,
session and time; derived insights, raw episodes, postings, links and profiles go; the
receipt says exactly what went; other tenants and agents keep everything."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg.types.json import Jsonb

from memworker import errors
from memworker.domain import memories
from memworker.domain.policy import Policy
from memworker.erase import forget
from memworker.ingest import intake
from memworker.lifecycle import governance
from memworker.models.embeddings import CachedQueryEmbedder
from memworker.recall import hybrid as recall
from memworker.sessions import session
from memworker.storage import db, store
from memworker.tenancy import service as tenancy
from memworker.testing import FakeEmbedder
from tests.pg_only import stack  # noqa: F401  (Postgres only: no Redis database)

EMB = FakeEmbedder()


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Iterator[Any]:
    p = db.open_pool(stack["app_url"], max_size=4)
    yield p
    p.close()


def episode(
    pool: Any, tenant: UUID, agent: str, content: str, session: str | None = None, subject: str | None = None
) -> UUID:
    with db.tenant_tx(pool, tenant) as conn:
        ((eid, _),) = intake.accept(
            conn,
            tenant_id=tenant,
            agent_id=agent,
            episodes=[intake.NewEpisode(content, session_id=session, subject=subject)],
        )
    return eid


def memory(
    pool: Any,
    tenant: UUID,
    agent: str,
    text: str,
    *,
    sources: tuple[str, ...] = ("api",),
    kind: str = "fact",
    session: str | None = None,
    subject: str | None = None,
) -> UUID:
    with db.tenant_tx(pool, tenant) as conn:
        tenancy.ensure_agent(conn, tenant_id=tenant, agent_id=agent)
        mid, _ = store.write_memory(
            conn,
            tenant_id=tenant,
            agent_id=agent,
            embedding=EMB.embed([text])[0],
            draft=memories.Draft(text=text, kind=kind, provenance=sources, subject=subject),
            source_key=f"f:{agent}:{text}",
            session_id=session,
        )
    assert mid is not None
    return mid


def do_forget(pool: Any, tenant: UUID, agent: str, **selector: Any) -> dict[str, Any]:
    with db.tenant_tx(pool, tenant) as conn:
        return forget.forget(conn, tenant_id=tenant, agent_id=agent, request=forget.Request(**selector), actor="test")


def texts_recalled(pool: Any, tenant: UUID, agent: str, query: str) -> list[str]:
    with db.tenant_tx(pool, tenant) as conn:
        hits = recall.recall(
            conn,
            CachedQueryEmbedder(EMB).embed_one(query),
            tenant_id=tenant,
            agent_id=agent,
            query=recall.Query(query, k=50),
            policy=Policy(),
        )
    return [h["text"] for h in hits]


def count(stack: dict[str, Any], sql: str, *args: Any) -> int:
    with psycopg.connect(stack["owner_url"]) as conn:
        row = conn.execute(sql, args).fetchone()
    assert row is not None
    return int(row[0])


def test_forget_by_provenance_takes_the_episode_its_memories_and_what_was_derived(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any]
) -> None:
    alice = tenants["alice"]["id"]
    a = "rtbf"
    ep = episode(pool, alice, a, "My home address is 12 Elm Street. I prefer tea.")
    keep_ep = episode(pool, alice, a, "The team uses Grafana for dashboards.")
    addr = memory(pool, alice, a, "The user lives at 12 Elm Street.", sources=(f"episode:{ep}#m0",))
    tea = memory(pool, alice, a, "The user prefers tea.", sources=(f"episode:{ep}",))
    grafana = memory(pool, alice, a, "The team uses Grafana for dashboards.", sources=(f"episode:{keep_ep}",))
    other = memory(pool, alice, a, "Dashboards are reviewed on Fridays.")
    insight = memory(
        pool,
        alice,
        a,
        "The user's habits and the team's tooling are stable.",
        kind="insight",
        sources=("consolidation:run-1",),
    )
    unrelated_insight = memory(
        pool, alice, a, "Dashboards matter to the team.", kind="insight", sources=("consolidation:run-2",)
    )
    with psycopg.connect(stack["owner_url"]) as conn:
        conn.execute(
            "INSERT INTO memworker.memory_connections (tenant_id, agent_id, from_id, to_id, relationship, "
            "insight_id) VALUES (%s, %s, %s, %s, 'context', %s), (%s, %s, %s, %s, 'context', %s)",
            (alice, a, tea, grafana, insight, alice, a, grafana, other, unrelated_insight),
        )
        conn.execute("UPDATE memworker.memories SET consolidated_at = now() WHERE agent_id = %s", (a,))
        conn.execute(
            "INSERT INTO memworker.agent_profiles (tenant_id, agent_id, version, document) VALUES "
            "(%s, %s, 1, %s), (%s, %s, 2, %s)",
            (
                alice,
                a,
                Jsonb({"preferences": [{"text": "The user prefers tea.", "source": str(tea)}]}),
                alice,
                a,
                Jsonb({"preferences": [], "project": [{"text": "Grafana", "source": str(grafana)}]}),
            ),
        )
    terms_before = count(
        stack, "SELECT count(*) FROM memworker.memory_terms WHERE memory_id = ANY(%s)", [addr, tea, insight]
    )
    receipt = do_forget(pool, alice, a, provenance=f"episode:{ep}")
    assert set(receipt["memories"]["ids"]) == {str(addr), str(tea)} and receipt["memories"]["count"] == 2
    assert receipt["derived"]["ids"] == [str(insight)]
    assert receipt["episodes"]["ids"] == [str(ep)]
    assert receipt["terms"] == terms_before and receipt["connections"] == 1 and receipt["embeddings"] == 3
    assert receipt["profile_versions"] == 1 and receipt["derived"]["requeued_evidence"] == 1
    for gone in ("Elm Street", "tea", "habits"):
        assert not any(gone in t for t in texts_recalled(pool, alice, a, f"{gone} user street tea habits"))
    assert count(stack, "SELECT count(*) FROM memworker.memories WHERE id = ANY(%s)", [addr, tea, insight]) == 0
    assert (
        count(stack, "SELECT count(*) FROM memworker.memory_terms WHERE memory_id = ANY(%s)", [addr, tea, insight]) == 0
    )
    assert count(stack, "SELECT count(*) FROM memworker.episodes WHERE id = %s", ep) == 0
    assert count(stack, "SELECT count(*) FROM memworker.episodes WHERE id = %s", keep_ep) == 1
    assert (
        count(
            stack,
            "SELECT count(*) FROM memworker.memories WHERE id = ANY(%s)",
            [grafana, other, unrelated_insight],
        )
        == 3
    )
    # grafana lost its insight: back in consolidation's window; 'other' keeps its own
    assert (
        count(stack, "SELECT count(*) FROM memworker.memories WHERE id = %s AND consolidated_at IS NULL", grafana) == 1
    )
    assert count(stack, "SELECT count(*) FROM memworker.agent_profiles WHERE agent_id = %s", a) == 1
    with psycopg.connect(stack["owner_url"]) as conn:  # the audit trail has ids and reasons, never text
        rows = conn.execute(
            "SELECT memory_id, reason, actor FROM memworker.memory_events WHERE agent_id = %s AND event = 'forgotten'",
            (a,),
        ).fetchall()
    assert {r[0] for r in rows} >= {addr, tea, insight} and all(r[2] == "test" for r in rows)
    assert not any("Elm" in r[1] or "tea" in r[1] for r in rows)
    again = do_forget(pool, alice, a, provenance=f"episode:{ep}")  # idempotent: nothing left
    assert again["memories"]["count"] == 0 and again["episodes"]["count"] == 0


def test_forget_by_ids_resolves_merged_ids_and_reports_unknown_ones(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any]
) -> None:
    bob = tenants["bob"]["id"]
    a = "rtbf-ids"
    survivor = memory(pool, bob, a, "The VPN endpoint is vpn.example.com.")
    away = memory(pool, bob, a, "The VPN endpoint is vpn.example.com!")
    with db.tenant_tx(pool, bob) as conn:
        assert governance.merge(
            conn,
            tenant_id=bob,
            agent_id=a,
            survivor_id=survivor,
            other_id=away,
            reason="test",
            actor="test",
            now=governance.clock(conn),
        )
    ghost = UUID(int=12345)
    receipt = do_forget(pool, bob, a, memory_ids=(away, ghost))
    assert receipt["memories"]["ids"] == [str(survivor)] and receipt["aliases"] == 1
    assert receipt["not_found"] == [str(ghost)]
    assert count(stack, "SELECT count(*) FROM memworker.memory_aliases WHERE memory_id = %s", survivor) == 0


def test_forget_by_session_and_by_time(pool: Any, tenants: dict[str, Any], stack: dict[str, Any]) -> None:
    charlie = tenants["charlie"]["id"]
    a = "rtbf-s"
    ep = episode(pool, charlie, a, "Session chatter about the secret project Nightjar.", session="s-1")
    in_session = memory(pool, charlie, a, "The secret project is called Nightjar.", sources=(f"episode:{ep}",))
    tagged = memory(pool, charlie, a, "Nightjar ships in March.", session="s-1")
    elsewhere = memory(pool, charlie, a, "The cafeteria closes at three.", session="s-2")
    receipt = do_forget(pool, charlie, a, session_id="s-1")
    assert set(receipt["memories"]["ids"]) == {str(in_session), str(tagged)}
    assert receipt["episodes"]["ids"] == [str(ep)]
    assert count(stack, "SELECT count(*) FROM memworker.memories WHERE id = %s", elsewhere) == 1

    with db.tenant_tx(pool, charlie) as conn:
        cutoff: datetime = governance.clock(conn) + timedelta(microseconds=1)
    later = memory(pool, charlie, a, "Written after the cutoff, and kept.")
    receipt = do_forget(pool, charlie, a, before=cutoff)
    assert receipt["memories"]["ids"] == [str(elsewhere)]
    assert count(stack, "SELECT count(*) FROM memworker.memories WHERE agent_id = %s", a) == 1
    assert count(stack, "SELECT count(*) FROM memworker.memories WHERE id = %s", later) == 1


def test_a_forget_request_needs_exactly_one_selector_and_stays_in_its_tenant(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any]
) -> None:
    alice, bob = tenants["alice"]["id"], tenants["bob"]["id"]
    for bad in (
        {},
        {"provenance": "api", "session_id": "x"},
        {"provenance": "  "},
        {"memory_ids": ()},
        {"before": datetime(2020, 1, 1)},
        {"subject": "not a subject!"},
        {"subject": "cust-1", "session_id": "s-1"},
    ):
        with pytest.raises(errors.InvalidInput):
            do_forget(pool, alice, "rtbf", **bad)
    mine = memory(pool, bob, "shared-name", "Bob's agent remembers the blue door.")
    memory(pool, alice, "shared-name", "Alice's agent remembers the red door.")
    receipt = do_forget(pool, alice, "shared-name", memory_ids=(mine,))  # bob's id, alice's call
    assert receipt["memories"]["count"] == 0 and receipt["not_found"] == [str(mine)]
    receipt = do_forget(pool, alice, "shared-name", provenance="api")
    assert receipt["memories"]["count"] == 1
    assert count(stack, "SELECT count(*) FROM memworker.memories WHERE id = %s", mine) == 1
    with pytest.raises(errors.NotFound):
        do_forget(pool, alice, "no-such-agent", provenance="api")


def test_forget_by_subject_takes_its_memories_episodes_and_sessions(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any]
) -> None:
    charlie = tenants["charlie"]["id"]
    a = "rtbf-subj"
    ep_one = episode(pool, charlie, a, "Customer one works nights at the depot.", subject="cust-1")
    ep_two = episode(pool, charlie, a, "Customer two works days at the port.", subject="cust-2")
    one = memory(pool, charlie, a, "Customer one works nights.", sources=(f"episode:{ep_one}",), subject="cust-1")
    two = memory(pool, charlie, a, "Customer two works days.", sources=(f"episode:{ep_two}",), subject="cust-2")
    general = memory(pool, charlie, a, "The depot opens at eight.")
    with db.tenant_tx(pool, charlie) as conn:
        for sid, subject in (("s-one", "cust-1"), ("s-two", "cust-2")):
            session.create(
                conn,
                tenant_id=charlie,
                agent_id=a,
                session_id=sid,
                goal=f"Talk to {subject}",
                window_tokens=None,
                metadata={},
                subject=subject,
            )
    in_session = memory(pool, charlie, a, "Asked about the night bus.", session="s-one")  # the subject's session
    receipt = do_forget(pool, charlie, a, subject="cust-1")
    assert set(receipt["memories"]["ids"]) == {str(one), str(in_session)}
    assert receipt["episodes"]["ids"] == [str(ep_one)]
    assert receipt["sessions"]["ids"] == ["s-one"] and receipt["sessions"]["count"] == 1
    assert count(stack, "SELECT count(*) FROM memworker.memories WHERE id = ANY(%s)", [two, general]) == 2
    assert count(stack, "SELECT count(*) FROM memworker.episodes WHERE id = %s", ep_two) == 1
    assert count(stack, "SELECT count(*) FROM memworker.sessions WHERE agent_id = %s", a) == 1


def test_the_turns_of_an_erased_episode_go_unless_the_caller_keeps_them(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any]
) -> None:
    bob = tenants["bob"]["id"]
    for agent, keep in (("rtbf-turns", False), ("rtbf-keep", True)):
        ep = episode(pool, bob, agent, "I moved to Porto last spring.")
        turn = memory(
            pool,
            bob,
            agent,
            "user (1 May 2025): I moved to Porto last spring.",
            sources=(f"episode:{ep}#m0",),
            kind="turn",
        )
        item = memory(pool, bob, agent, "The user lives in Porto.", sources=(f"episode:{ep}#m0",))
        receipt = do_forget(pool, bob, agent, memory_ids=(item,), keep_turns=keep)
        assert receipt["memories"]["ids"] == [str(item)] and receipt["episodes"]["ids"] == [str(ep)]
        assert receipt["turns"]["ids"] == ([] if keep else [str(turn)])
        assert count(stack, "SELECT count(*) FROM memworker.memories WHERE id = %s", turn) == (1 if keep else 0)
