"""Lifecycle rules against the real database, with a clock the tests move: TTL purge,
age x never-recalled and long-unused (the episodic layer), the caps, decay, promotion, confirmation, merge,
supersede and review, and three tenants that never see each other's governance."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from memworker import errors
from memworker.domain import memories, rules
from memworker.domain.policy import Policy
from memworker.lifecycle import governance, retention
from memworker.lifecycle import queries as lifecycle_db
from memworker.models.embeddings import CachedQueryEmbedder
from memworker.recall import hybrid as recall
from memworker.storage import db, store
from memworker.tenancy import service as tenancy
from memworker.testing import FakeEmbedder
from tests.pg_only import stack  # noqa: F401  (Postgres only: no Redis database)

EMB = FakeEmbedder()
DAY = timedelta(days=1)


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Iterator[Any]:
    p = db.open_pool(stack["app_url"], max_size=4)
    yield p
    p.close()


@pytest.fixture(scope="module")
def t0(pool: Any, tenants: dict[str, Any]) -> datetime:
    """The database clock when the module starts; rules are judged at t0 + some days."""
    with db.tenant_tx(pool, tenants["alice"]["id"]) as conn:
        return governance.clock(conn)


def write(
    pool: Any,
    tenant: UUID,
    agent: str,
    text: str,
    *,
    kind: str = "fact",
    tier: str = "L1",
    confidence: float = 0.7,
    salience: float = 0.5,
    expires_at: datetime | None = None,
    provenance: tuple[str, ...] = ("api",),
    session_id: str | None = None,
    key: str | None = None,
) -> UUID:
    """A memory written straight to the store (no write-path hooks), by default never expiring."""
    with db.tenant_tx(pool, tenant) as conn:
        tenancy.ensure_agent(conn, tenant_id=tenant, agent_id=agent)
        mid, _ = store.write_memory(
            conn,
            tenant_id=tenant,
            agent_id=agent,
            embedding=EMB.embed([text])[0],
            draft=memories.Draft(
                text=text,
                kind=kind,
                tier=tier,
                confidence=confidence,
                salience=salience,
                expires_at=expires_at,
                provenance=provenance,
            ),
            source_key=key or f"t:{agent}:{text}:{kind}:{tier}",
            session_id=session_id,
        )
    assert mid is not None
    return mid


def owner(stack: dict[str, Any], sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(stack["owner_url"]) as conn:
        cur = conn.execute(sql, args)
        return cur.fetchall() if cur.description else []


def row(pool: Any, tenant: UUID, mid: UUID) -> dict[str, Any] | None:
    with db.tenant_tx(pool, tenant) as conn:
        return conn.execute("SELECT * FROM memories WHERE id = %s", (mid,)).fetchone()  # type: ignore[return-value]


def set_policy(pool: Any, tenant: UUID, agent: str, **overrides: Any) -> None:
    with db.tenant_tx(pool, tenant) as conn:
        governance.put_policy(conn, tenant_id=tenant, agent_id=agent, overrides=overrides)


def events(pool: Any, tenant: UUID, agent: str, mid: UUID) -> list[dict[str, Any]]:
    with db.tenant_tx(pool, tenant) as conn:
        return [asdict(e) for e in lifecycle_db.events(conn, tenant_id=tenant, agent_id=agent, ids=[mid], limit=100)]


def test_ttl_purge_happens_at_expiry_with_an_event(pool: Any, tenants: dict[str, Any], t0: datetime) -> None:
    alice = tenants["alice"]["id"]
    scratch = write(
        pool, alice, "ttl", "Scratch note about the current build.", tier="L0", expires_at=t0 + timedelta(hours=6)
    )
    keep = write(pool, alice, "ttl", "A durable fact with no expiry at all.", tier="L2")
    early = retention.sweep_agent(pool, tenant_id=alice, agent_id="ttl", now=t0 + timedelta(hours=5))
    assert early.status == "done" and early.expired == 0 and row(pool, alice, scratch)
    late = retention.sweep_agent(pool, tenant_id=alice, agent_id="ttl", now=t0 + timedelta(hours=7))
    assert late.expired == 1 and row(pool, alice, scratch) is None and row(pool, alice, keep)
    (ev,) = [e for e in events(pool, alice, "ttl", scratch) if e["event"] == "expired"]
    assert ev["reason"] == "ttl of L0" and ev["actor"] == "retention"
    with db.tenant_tx(pool, alice) as conn:
        assert not conn.execute("SELECT 1 FROM memory_terms WHERE memory_id = %s", (scratch,)).fetchall()


def test_old_never_recalled_episodic_items_are_forgotten_but_not_protected_ones(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any], t0: datetime
) -> None:
    alice = tenants["alice"]["id"]
    a = "aging"
    set_policy(pool, alice, a, unused_days=None)
    old = write(pool, alice, a, "The coffee machine on floor 3 is broken.", tier="L0")
    recalled = write(pool, alice, a, "The VPN needs a hardware token.", tier="L0")
    semantic = write(pool, alice, a, "The office dog is called Biscuit.")  # L1: no clock
    insight = write(pool, alice, a, "Infrastructure problems cluster around Mondays.", kind="insight")
    conclusion = write(pool, alice, a, "Most outages come from config drift.", kind="conclusion")
    canonical = write(pool, alice, a, "The company is called Acme.", tier="L3")
    durable = write(pool, alice, a, "The API is versioned under /v1.", tier="L2")
    owner(stack, "UPDATE memworker.memories SET access_count = 1 WHERE id = %s", recalled)
    assert retention.sweep_agent(pool, tenant_id=alice, agent_id=a, now=t0 + 29 * DAY).forgotten_age == 0
    report = retention.sweep_agent(pool, tenant_id=alice, agent_id=a, now=t0 + 31 * DAY)
    assert report.forgotten_age == 1 and row(pool, alice, old) is None
    for mid in (recalled, semantic, insight, conclusion, canonical, durable):
        assert row(pool, alice, mid) is not None
    (ev,) = [e for e in events(pool, alice, a, old) if e["event"] == "forgotten"]
    assert "never recalled" in ev["reason"] and "coffee" not in ev["reason"]


def test_long_unused_items_go_after_90_days_except_l3_and_insights(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any], t0: datetime
) -> None:
    bob = tenants["bob"]["id"]
    a = "unused"
    used_once = write(pool, bob, a, "The staging cluster runs in Frankfurt.", tier="L0")
    used_lately = write(pool, bob, a, "Backups run nightly at 02:00.", tier="L0")
    semantic = write(pool, bob, a, "The old staging cluster ran in Dublin.", tier="L2")  # never used: stays
    canonical = write(pool, bob, a, "Never deploy on Fridays.", tier="L3")
    insight = write(pool, bob, a, "Deploy pain comes from manual steps.", kind="insight", tier="L2")
    owner(stack, "UPDATE memworker.memories SET access_count = 4, last_access_at = %s WHERE id = %s", t0, used_once)
    owner(
        stack,
        "UPDATE memworker.memories SET access_count = 4, last_access_at = %s WHERE id = %s",
        t0 + 60 * DAY,
        used_lately,
    )
    report = retention.sweep_agent(pool, tenant_id=bob, agent_id=a, now=t0 + 91 * DAY)
    assert report.forgotten_unused == 1 and row(pool, bob, used_once) is None
    assert all(row(pool, bob, m) for m in (used_lately, semantic, canonical, insight))


def test_the_cap_keeps_the_most_recalled_and_freshest(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any], t0: datetime
) -> None:
    charlie = tenants["charlie"]["id"]
    a = "capped"
    set_policy(pool, charlie, a, max_episodic=3, max_semantic=2)
    ids = [write(pool, charlie, a, f"Runbook step number {i} for the pager.", tier="L0") for i in range(6)]
    for i, mid in enumerate(ids):  # created a day apart, oldest first
        owner(stack, "UPDATE memworker.memories SET created_at = %s WHERE id = %s", t0 - (10 - i) * DAY, mid)
    owner(stack, "UPDATE memworker.memories SET access_count = 2 WHERE id = %s", ids[0])  # under promotion
    insights = [write(pool, charlie, a, f"Insight {i} about paging.", kind="insight") for i in range(4)]
    report = retention.sweep_agent(pool, tenant_id=charlie, agent_id=a, now=t0)
    assert report.forgotten_cap == 3
    kept = {m for m in ids if row(pool, charlie, m)}
    assert kept == {ids[0], ids[4], ids[5]}  # the recalled one, then the two freshest
    assert all(row(pool, charlie, m) for m in insights)
    assert retention.sweep_agent(pool, tenant_id=charlie, agent_id=a, now=t0).forgotten_cap == 0
    # the semantic layer's cap ranks by value: evidence (recalls, confirmations), then confidence x salience
    facts = [
        write(pool, charlie, a, f"Pager rotation fact {i}.", confidence=c, salience=0.5)
        for i, c in enumerate((0.5, 0.9, 0.6, 0.4))
    ]
    owner(stack, "UPDATE memworker.memories SET access_count = 1 WHERE id = %s", facts[0])
    assert retention.sweep_agent(pool, tenant_id=charlie, agent_id=a, now=t0).forgotten_cap == 2
    assert {m for m in facts if row(pool, charlie, m)} == {facts[0], facts[1]}
    assert all(row(pool, charlie, m) for m in insights)


def test_the_cap_counts_a_split_message_once_and_its_parts_go_together(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any], t0: datetime
) -> None:
    charlie = tenants["charlie"]["id"]
    a = "capped-parts"
    set_policy(pool, charlie, a, max_episodic=4, unused_days=None)
    long = [write(pool, charlie, a, f"Part {i} of the long answer about failover.", tier="L0") for i in range(3)]
    short = [write(pool, charlie, a, f"Short message {i} about the pager.", tier="L0") for i in range(3)]
    for i, mid in enumerate(long + short):  # the long answer is the oldest
        owner(stack, "UPDATE memworker.memories SET created_at = %s WHERE id = %s", t0 - (10 - i) * DAY, mid)
    for i, mid in enumerate(long):  # one message in 3 parts: postings on its first part only
        owner(
            stack,
            "UPDATE memworker.memories SET kind = 'turn', parts = 3, doc_len = CASE WHEN %s THEN doc_len ELSE 0 END,"
            " provenance = ARRAY['episode:00000000-0000-0000-0000-000000000001#m1'] WHERE id = %s",
            i == 0,
            mid,
        )
    # 6 rows, 4 messages: within the cap
    assert retention.sweep_agent(pool, tenant_id=charlie, agent_id=a, now=t0).forgotten_cap == 0
    set_policy(pool, charlie, a, max_episodic=3, unused_days=None)
    assert retention.sweep_agent(pool, tenant_id=charlie, agent_id=a, now=t0).forgotten_cap == 3
    assert not any(row(pool, charlie, m) for m in long)  # the oldest message, every part of it
    assert all(row(pool, charlie, m) for m in short)


def test_salience_and_confidence_decay_slowly_and_once_per_clock(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any], t0: datetime
) -> None:
    alice = tenants["alice"]["id"]
    a = "decay"
    set_policy(pool, alice, a, decay_days=None, unused_days=None)
    quiet = write(pool, alice, a, "The printer lives next to the kitchen.", salience=0.8, confidence=0.8)
    used = write(pool, alice, a, "The wifi password rotates monthly.", salience=0.8, confidence=0.8)
    canonical = write(pool, alice, a, "Our mission is reliable memory.", tier="L3", salience=0.8, confidence=0.8)
    owner(stack, "UPDATE memworker.memories SET access_count = 2 WHERE id = %s", used)
    created = row(pool, alice, quiet)["created_at"]  # type: ignore[index]
    when = t0 + 37 * DAY
    r1 = retention.sweep_agent(pool, tenant_id=alice, agent_id=a, now=when)
    assert r1.decayed == 2
    q, u, c = (row(pool, alice, m) for m in (quiet, used, canonical))
    days = (when - created).total_seconds() / 86400
    assert q["salience"] == pytest.approx(rules.decayed(0.8, days - 7, 30), abs=1e-5)  # type: ignore[index]
    assert q["confidence"] == pytest.approx(rules.decayed(0.8, days, 180, 0.1), abs=1e-5)  # type: ignore[index]
    assert u["salience"] == pytest.approx(0.8) and u["confidence"] < 0.8  # type: ignore[index]  # recalled: no salience decay
    assert c["salience"] == pytest.approx(0.8) and c["confidence"] == pytest.approx(0.8)  # type: ignore[index]
    r2 = retention.sweep_agent(pool, tenant_id=alice, agent_id=a, now=when)
    assert r2.decayed == 0 and row(pool, alice, quiet)["salience"] == q["salience"]  # type: ignore[index]
    retention.sweep_agent(pool, tenant_id=alice, agent_id=a, now=when + 30 * DAY)  # composes
    assert row(pool, alice, quiet)["salience"] == pytest.approx(  # type: ignore[index]
        rules.decayed(0.8, days + 30 - 7, 30), abs=1e-5
    )


def test_promotion_by_recalls_connections_and_confirmations(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any], t0: datetime
) -> None:
    bob = tenants["bob"]["id"]
    a = "promo"
    # TTLs on the semantic tiers are off by default; an agent that sets them gets them renewed
    set_policy(pool, bob, a, ttl_l1_hours=7 * 24, ttl_l2_hours=30 * 24)
    recalled = write(pool, bob, a, "The on-call phone number changed.")
    linked1 = write(pool, bob, a, "Kafka lag alarms fire at night.")
    linked2 = write(pool, bob, a, "Night batch jobs saturate Kafka.")
    plain = write(pool, bob, a, "Someone mentioned a new logo.")
    owner(stack, "UPDATE memworker.memories SET access_count = 3 WHERE id = %s", recalled)
    owner(
        stack,
        "INSERT INTO memworker.memory_connections (tenant_id, agent_id, from_id, to_id, relationship) "
        "VALUES (%s, %s, %s, %s, 'causes')",
        bob,
        a,
        linked2,
        linked1,
    )
    report = retention.sweep_agent(pool, tenant_id=bob, agent_id=a, now=t0)
    assert report.promoted == 3
    for mid in (recalled, linked1, linked2):
        r = row(pool, bob, mid)
        assert r["tier"] == "L2" and r["expires_at"] == t0 + 30 * DAY  # type: ignore[index]
    assert row(pool, bob, plain)["tier"] == "L1"  # type: ignore[index]
    (ev,) = [e for e in events(pool, bob, a, recalled) if e["event"] == "promoted"]
    assert ev["reason"] == "L1 -> L2: recalled 3 times"

    confirmed = write(pool, bob, a, "The release train leaves every Tuesday.", expires_at=t0 + 7 * DAY)
    with db.tenant_tx(pool, bob) as conn:
        policy = tenancy.policy_for(conn, tenant_id=bob, agent_id=a)
        governance.confirm(
            conn,
            tenant_id=bob,
            agent_id=a,
            memory_id=confirmed,
            confidence=0.7,
            source="episode:00000000-0000-0000-0000-000000000001",
            policy=policy,
            now=t0 + DAY,
        )
    r = row(pool, bob, confirmed)
    assert r["tier"] == "L1" and r["confidence"] == pytest.approx(0.76)  # type: ignore[index]
    assert r["expires_at"] == t0 + 8 * DAY and r["confirmations"] == 1  # type: ignore[index]  # TTL starts again
    with db.tenant_tx(pool, bob) as conn:  # the same episode again is not new evidence
        governance.confirm(
            conn,
            tenant_id=bob,
            agent_id=a,
            memory_id=confirmed,
            confidence=0.7,
            source="episode:00000000-0000-0000-0000-000000000001#m2",
            policy=policy,
            now=t0 + DAY,
        )
        assert row(pool, bob, confirmed)["confirmations"] == 1  # type: ignore[index]
        governance.confirm(
            conn,
            tenant_id=bob,
            agent_id=a,
            memory_id=confirmed,
            confidence=0.7,
            source="episode:00000000-0000-0000-0000-000000000002",
            policy=policy,
            now=t0 + 2 * DAY,
        )
    r = row(pool, bob, confirmed)
    assert r["tier"] == "L2" and r["confidence"] == pytest.approx(0.808)  # type: ignore[index]
    assert r["expires_at"] == t0 + 32 * DAY  # type: ignore[index]


def test_near_duplicates_merge_and_the_merged_id_resolves(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any], t0: datetime
) -> None:
    charlie = tenants["charlie"]["id"]
    a = "merge"
    first = write(
        pool,
        charlie,
        a,
        "The build server is called hal9000 in the lab.",
        provenance=("episode:a",),
        salience=0.4,
        confidence=0.6,
    )
    second = write(
        pool,
        charlie,
        a,
        "The build server is called hal9000 in the lab!",
        provenance=("episode:b",),
        salience=0.9,
        confidence=0.8,
        key="second",
    )
    other = write(pool, charlie, a, "Lunch is served at noon in the lab.")
    owner(stack, "UPDATE memworker.memories SET access_count = 2 WHERE id = %s", first)
    owner(stack, "UPDATE memworker.memories SET access_count = 1 WHERE id = %s", second)
    owner(
        stack,
        "INSERT INTO memworker.memory_connections (tenant_id, agent_id, from_id, to_id, relationship) "
        "VALUES (%s, %s, %s, %s, 'near')",
        charlie,
        a,
        second,
        other,
    )
    report = retention.sweep_agent(pool, tenant_id=charlie, agent_id=a, now=t0)
    assert report.merged == 1 and row(pool, charlie, second) is None
    s = row(pool, charlie, first)
    assert s is not None and s["provenance"] == ["episode:a", "episode:b"]
    assert s["salience"] == pytest.approx(0.9) and s["confidence"] == pytest.approx(0.8)
    assert s["access_count"] == 3
    links = owner(stack, "SELECT from_id, to_id FROM memworker.memory_connections WHERE agent_id = %s", a)
    assert links == [(first, other)]
    with db.tenant_tx(pool, charlie) as conn:
        assert governance.resolve(conn, tenant_id=charlie, agent_id=a, memory_id=second) == first
    (ev,) = [e for e in events(pool, charlie, a, second) if e["event"] == "merged"]
    assert ev["related_ids"] == [first] and "cosine" in ev["reason"]
    # a second sweep finds nothing new to compare
    assert retention.sweep_agent(pool, tenant_id=charlie, agent_id=a, now=t0 + DAY).merged == 0


def test_a_sure_contradiction_supersedes_on_write_and_an_unsure_one_is_reviewed(
    pool: Any, tenants: dict[str, Any], t0: datetime
) -> None:
    alice = tenants["alice"]["id"]
    a = "versions"
    v39 = write(pool, alice, a, "The project uses Python 3.9.")

    def write_checked(text: str, confidence: float) -> tuple[UUID, list[rules.Verdict]]:
        mid = write(pool, alice, a, text, confidence=confidence)
        with db.tenant_tx(pool, alice) as conn:
            policy = tenancy.policy_for(conn, tenant_id=alice, agent_id=a)
            draft = memories.Draft(text=text, confidence=confidence)
            return mid, governance.check_new(
                conn, tenant_id=alice, agent_id=a, written=[(mid, draft)], policy=policy, actor="test"
            )

    v311, verdicts = write_checked("The project uses Python 3.11.", 0.95)
    assert [v.action for v in verdicts] == ["supersede"]
    old = row(pool, alice, v39)
    assert old["valid_to"] is not None and old["superseded_by"] == v311  # type: ignore[index]
    with db.tenant_tx(pool, alice) as conn:
        hits = recall.recall(
            conn,
            CachedQueryEmbedder(EMB).embed_one("python version project"),
            tenant_id=alice,
            agent_id=a,
            query=recall.Query("python version project", k=10),
            policy=Policy(),
        )
        assert [h["id"] for h in hits] == [str(v311)]
        chain = governance.history(conn, tenant_id=alice, agent_id=a, memory_id=v39)
    assert [v["id"] for v in chain["versions"]] == [v39, v311]
    assert chain["versions"][0]["current"] is False and chain["versions"][1]["depth"] == 1

    v312, verdicts = write_checked("The project uses Python 3.12.", 0.6)
    assert [v.action for v in verdicts] == ["review"]
    with db.tenant_tx(pool, alice) as conn:
        (item,) = governance.reviews(conn, tenant_id=alice, agent_id=a, status="open", limit=10)
        assert item["newer"]["id"] == v312 and item["older"]["id"] == v311
        policy = tenancy.policy_for(conn, tenant_id=alice, agent_id=a)
        out = governance.resolve_review(
            conn,
            tenant_id=alice,
            agent_id=a,
            review_id=item["id"],
            keep=str(v312),
            reason="upgraded last week",
            actor="test",
            may_change_l3=False,
            policy=policy,
        )
        assert out["superseded"] == str(v311)
        chain = governance.history(conn, tenant_id=alice, agent_id=a, memory_id=v312)
    assert [v["id"] for v in chain["versions"]] == [v39, v311, v312]
    assert {e["event"] for e in chain["events"]} >= {"created", "superseded"}


def test_the_sweep_repairs_contradictions_written_without_the_hook(
    pool: Any, tenants: dict[str, Any], t0: datetime
) -> None:
    bob = tenants["bob"]["id"]
    a = "repair"
    old = write(pool, bob, a, "Our office is in Berlin.")
    new = write(pool, bob, a, "Our office is in Lisbon.", confidence=0.92)
    canon = write(pool, bob, a, "The support hotline is 555-0100.", tier="L3")
    changed = write(pool, bob, a, "The support hotline is 555-0199.", confidence=0.99)
    report = retention.sweep_agent(pool, tenant_id=bob, agent_id=a, now=t0)
    assert report.superseded == 1 and report.reviews == 1
    assert row(pool, bob, old)["superseded_by"] == new  # type: ignore[index]
    assert row(pool, bob, canon)["valid_to"] is None  # L3 only changes by hand: reviewed instead
    with db.tenant_tx(pool, bob) as conn:
        (item,) = governance.reviews(conn, tenant_id=bob, agent_id=a, status="open", limit=10)
    assert (item["older"]["id"], item["newer"]["id"]) == (canon, changed) and "L3" in item["reason"]
    again = retention.sweep_agent(pool, tenant_id=bob, agent_id=a, now=t0 + DAY)
    assert again.reviews == 0 and again.superseded == 0  # nothing twice


def test_a_double_fired_window_and_a_busy_agent(pool: Any, tenants: dict[str, Any], t0: datetime) -> None:
    charlie = tenants["charlie"]["id"]
    write(pool, charlie, "busy", "Something worth keeping for a while.")
    first = retention.sweep_agent(pool, tenant_id=charlie, agent_id="busy", now=t0, run_key="beat:w1", trigger="beat")
    second = retention.sweep_agent(pool, tenant_id=charlie, agent_id="busy", now=t0, run_key="beat:w1", trigger="beat")
    assert first.status == "done" and second.status == "duplicate"
    with db.tenant_tx(pool, charlie) as conn:  # a consolidation pass holds the agent
        assert db.try_agent_lock(conn, charlie, "busy")
        blocked = retention.sweep_agent(pool, tenant_id=charlie, agent_id="busy", now=t0, lock_wait_s=0.2)
    assert blocked.status == "partial" and "locked" in (blocked.skipped_reason or "")
    set_policy(pool, charlie, "busy", retention_enabled=False)
    off = retention.sweep_agent(pool, tenant_id=charlie, agent_id="busy", now=t0 + 400 * DAY)
    assert off.status == "skipped" and off.changed == 0
    with db.tenant_tx(pool, charlie) as conn:
        runs = retention.runs(conn, tenant_id=charlie, agent_id="busy")
    assert [r["status"] for r in runs][:3] == ["skipped", "partial", "done"]


def test_due_agents_and_tenant_isolation(pool: Any, tenants: dict[str, Any], t0: datetime) -> None:
    alice, bob = tenants["alice"]["id"], tenants["bob"]["id"]
    write(pool, bob, "due-bot", "A memory so the agent exists.")
    due = retention.due(pool, before=t0 + 1000 * DAY)
    assert (bob, "due-bot") in due and all(isinstance(t, UUID) for t, _ in due)
    with db.tenant_tx(pool, alice) as conn:  # alice sees none of bob's runs, reviews or aliases
        for table in ("retention_runs", "memory_reviews", "memory_aliases"):
            assert not conn.execute(f"SELECT 1 FROM {table} WHERE tenant_id <> %s", (alice,)).fetchall()
        with pytest.raises(errors.NotFound):
            retention.runs(conn, tenant_id=alice, agent_id="due-bot")
    with pytest.raises(errors.NotFound):  # another tenant's agent cannot be swept either
        retention.sweep_agent(pool, tenant_id=alice, agent_id="due-bot", now=t0)
    with db.tenant_tx(pool, alice) as conn:
        bobs = conn.execute("SELECT count(*) AS n FROM retention_runs").fetchone()
        assert bobs is not None
    with db.tenant_tx(pool, bob) as conn:
        assert lifecycle_db.resolve_alias(conn, tenant_id=alice, agent_id="merge", memory_id=UUID(int=1)) is None


def test_the_lifecycle_tables_are_tenant_isolated(stack: dict[str, Any]) -> None:
    rows = dict(
        owner(
            stack,
            "SELECT c.relname, (c.relrowsecurity AND c.relforcerowsecurity) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'memworker' "
            "AND c.relname IN ('retention_runs', 'memory_reviews', 'memory_aliases')",
        )
    )
    assert rows == {"retention_runs": True, "memory_reviews": True, "memory_aliases": True}
