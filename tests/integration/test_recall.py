"""Recall against the real database: BM25 equals a reference implementation, vector
search is each agent's exact top-k, and the ranking rules hold."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator
from typing import Any
from uuid import UUID

import numpy as np
import psycopg
import pytest
import redis

from memworker.domain import memories, tokens
from memworker.domain.policy import Policy
from memworker.models.embeddings import CachedQueryEmbedder
from memworker.recall import hybrid as recall
from memworker.storage import bumps, db, store
from memworker.tenancy import service as tenancy
from memworker.testing import FakeEmbedder

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "kafka",
    "postgres",
    "redis",
    "celery",
    "vector",
    "index",
    "coffee",
    "tea",
    "garden",
    "berlin",
    "paris",
    "deploy",
    "rollback",
    "incident",
    "outage",
    "budget",
    "launch",
    "design",
    "review",
    "python",
    "rust",
    "memory",
    "agent",
    "sleep",
    "insight",
]
BM25_ONLY = Policy(recall_bm25_weight=1.0, recall_vector_weight=0.0, recall_prior_weight=0.0, recall_vector_floor=1.0)
VECTOR_ONLY = Policy(
    recall_bm25_weight=0.0,
    recall_vector_weight=1.0,
    recall_prior_weight=0.0,
    recall_vector_floor=0.0,
    recall_candidates=100,
)


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Iterator[Any]:
    p = db.open_pool(stack["app_url"], max_size=4)
    yield p
    p.close()


class _Vectors:
    """A query embedder that returns preset vectors (the vector test needs exact control)."""

    dim = 384

    def __init__(self) -> None:
        self.by_text: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.by_text.get(t, FakeEmbedder().embed([t])[0]) for t in texts])


def _write(conn: Any, tenant: UUID, agent: str, text: str, vec: np.ndarray, key: str) -> UUID:
    tenancy.ensure_agent(conn, tenant_id=tenant, agent_id=agent)
    mid, _ = store.write_memory(
        conn, tenant_id=tenant, agent_id=agent, draft=memories.Draft(text=text), embedding=vec, source_key=key
    )
    assert mid is not None
    return mid


def _reference_bm25(docs: dict[UUID, str], query: str) -> dict[UUID, float]:
    tfs = {i: Counter(tokens.tokenize(t)) for i, t in docs.items()}
    n = sum(1 for c in tfs.values() if c)  # a document is a memory with a term: one without has no postings
    avgdl = sum(sum(c.values()) for c in tfs.values()) / n
    scores: dict[UUID, float] = {}
    for term in set(tokens.tokenize(query)):
        df = sum(1 for c in tfs.values() if term in c)
        if not df:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, c in tfs.items():
            if term in c:
                dl = sum(c.values())
                scores[i] = scores.get(i, 0.0) + idf * c[term] * 2.2 / (c[term] + 1.2 * (0.25 + 0.75 * dl / avgdl))
    return scores


def _bm25_hits(conn: Any, tenant: UUID, agent: str, query: str, k: int = 100) -> dict[UUID, float]:
    q = recall.Query(query, k=k, explain=True)
    hits = recall.recall(
        conn,
        CachedQueryEmbedder(FakeEmbedder()).embed_one(q.text),
        tenant_id=tenant,
        agent_id=agent,
        query=q,
        policy=BM25_ONLY,
    )
    return {UUID(h["id"]): h["signals"]["bm25"] for h in hits}


def _compare(conn: Any, tenant: UUID, agent: str, docs: dict[UUID, str], queries: list[str]) -> int:
    checked = 0
    for query in queries:
        got = _bm25_hits(conn, tenant, agent, query)
        want = _reference_bm25(docs, query)
        top = sorted(want.values(), reverse=True)[:100]
        assert len(got) == len(top)
        for mid, score in got.items():  # each hit's score, and (ties aside) the same top set
            assert score == pytest.approx(want[mid], abs=1e-6)
            checked += 1
        assert sorted(got.values(), reverse=True) == pytest.approx(top, abs=1e-6)
    return checked


def test_bm25_matches_the_reference_as_memories_change(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any]
) -> None:
    rng = random.Random(7)
    tenant = tenants["alice"]["id"]
    emb = FakeEmbedder()
    docs: dict[UUID, str] = {}
    with db.tenant_tx(pool, tenant) as conn:
        for i in range(300):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 25)))
            docs[_write(conn, tenant, "bm25", text, emb.embed([text])[0], f"t:{i}")] = text
        for i, text in enumerate(["The and of it is.", "...", "it is the one"]):  # no term: not documents
            docs[_write(conn, tenant, "bm25", text, emb.embed([text])[0], f"none:{i}")] = text
    queries = [
        "postgres vector index",
        "coffee",
        "incident outage rollback deploy",
        "sleep insight memory",
        "berlin paris",
        "alpha alpha beta",
    ]
    with db.tenant_tx(pool, tenant) as conn:
        assert _compare(conn, tenant, "bm25", docs, queries) > 300

    ids = list(docs)
    with db.tenant_tx(pool, tenant) as conn:
        for mid in ids[:20]:  # changed
            text = "coffee garden " + docs[mid]
            store.update_memory(
                conn,
                tenant_id=tenant,
                agent_id="bm25",
                memory_id=mid,
                changes={"text": text},
                embedding=emb.embed([text])[0],
            )
            docs[mid] = text
        for mid in ids[20:40]:  # deleted
            store.delete_memory(conn, tenant_id=tenant, agent_id="bm25", memory_id=mid)
            del docs[mid]
    with psycopg.connect(stack["owner_url"]) as conn:  # expired (the clock moved past them)
        conn.execute(
            "UPDATE memworker.memories SET expires_at = now() - interval '1 s' WHERE id = ANY(%s)", (ids[40:60],)
        )
    for mid in ids[40:60]:
        del docs[mid]
    with db.tenant_tx(pool, tenant) as conn:
        _compare(conn, tenant, "bm25", docs, queries)


def test_chinese_memories_are_found_by_chinese_queries(pool: Any, tenants: dict[str, Any]) -> None:
    tenant = tenants["bob"]["id"]
    emb = FakeEmbedder()
    texts = ["我们决定使用 Python 3.11 部署服务", "用户喜欢喝绿茶", "上周的数据库故障是因为磁盘满了"]
    with db.tenant_tx(pool, tenant) as conn:
        for i, t in enumerate(texts):
            _write(conn, tenant, "zh", t, emb.embed([t])[0], f"zh:{i}")
        hits = recall.recall(
            conn,
            CachedQueryEmbedder(emb).embed_one("数据库为什么故障"),
            tenant_id=tenant,
            agent_id="zh",
            query=recall.Query("数据库为什么故障", k=1),
            policy=Policy(),
        )
    assert hits[0]["text"] == texts[2]


def test_each_of_50_agents_gets_its_exact_vector_top_k(pool: Any, tenants: dict[str, Any]) -> None:
    rng = np.random.default_rng(3)
    tenant = tenants["charlie"]["id"]
    vectors: dict[str, dict[UUID, np.ndarray]] = {}
    with db.tenant_tx(pool, tenant) as conn:
        for a in range(50):
            agent = f"agent-{a}"
            vectors[agent] = {}
            for i in range(int(rng.integers(3, 60))):
                v = rng.random(384).astype(np.float32)
                v /= np.linalg.norm(v)
                vectors[agent][_write(conn, tenant, agent, f"note {a} {i}", v, f"v:{a}:{i}")] = v
    qe = _Vectors()
    k = 10
    with db.tenant_tx(pool, tenant) as conn:
        for agent, mine in vectors.items():
            q = rng.random(384).astype(np.float32)
            q /= np.linalg.norm(q)
            qe.by_text[agent] = q
            hits = recall.recall(
                conn,
                CachedQueryEmbedder(qe).embed_one(agent),
                tenant_id=tenant,
                agent_id=agent,
                query=recall.Query(agent, k=k, explain=True),
                policy=VECTOR_ONLY,
            )
            exact = sorted(mine, key=lambda m: -float(mine[m] @ q))[:k]
            assert len(hits) == min(k, len(mine))
            assert [UUID(h["id"]) for h in hits] == exact
            assert all(UUID(h["id"]) in mine for h in hits)


def test_irrelevant_expired_and_superseded_never_come_back(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any]
) -> None:
    tenant = tenants["alice"]["id"]
    emb = FakeEmbedder()
    with db.tenant_tx(pool, tenant) as conn:
        live = _write(conn, tenant, "rules", "the rollout uses canary deploys", emb.embed(["canary deploys"])[0], "r1")
        old = _write(conn, tenant, "rules", "the rollout uses blue green deploys", emb.embed(["blue green"])[0], "r2")
        gone = _write(conn, tenant, "rules", "the rollout uses big bang deploys", emb.embed(["big bang"])[0], "r3")
    with psycopg.connect(stack["owner_url"]) as conn:
        conn.execute("UPDATE memworker.memories SET valid_to = now(), superseded_by = %s WHERE id = %s", (live, old))
        conn.execute("UPDATE memworker.memories SET expires_at = now() - interval '1 s' WHERE id = %s", (gone,))
    with db.tenant_tx(pool, tenant) as conn:
        hits = recall.recall(
            conn,
            CachedQueryEmbedder(emb).embed_one("rollout deploys"),
            tenant_id=tenant,
            agent_id="rules",
            query=recall.Query("rollout deploys", k=10),
            policy=Policy(),
        )
        assert [UUID(h["id"]) for h in hits] == [live]
        assert (
            recall.recall(
                conn,
                CachedQueryEmbedder(emb).embed_one("zebra xylophone"),
                tenant_id=tenant,
                agent_id="rules",
                query=recall.Query("zebra xylophone", k=10),
                policy=Policy(),
            )
            == []
        )


def test_priors_reorder_near_ties_and_hits_are_counted(
    pool: Any, tenants: dict[str, Any], stack: dict[str, Any]
) -> None:
    tenant = tenants["bob"]["id"]
    emb = FakeEmbedder()
    with db.tenant_tx(pool, tenant) as conn:
        a = _write(conn, tenant, "ties", "standup is at nine", emb.embed(["standup is at nine"])[0], "a")
        b = _write(conn, tenant, "ties", "standup is at nine", emb.embed(["standup is at nine"])[0], "b")
        conn.execute("UPDATE memworker.memories SET salience = 1.0 WHERE id = %s", (b,))
    client = redis.Redis.from_url(stack["redis_url"])
    buffer = bumps.Buffer(client, every_s=3600)  # sent when closed
    try:
        bumps.drain(pool, client)  # whatever earlier tests queued
        hits = recall.serve(
            pool,
            CachedQueryEmbedder(emb).embed_one("standup"),
            tenant_id=tenant,
            agent_id="ties",
            query=recall.Query("standup", k=2),
            policy=Policy(),
            access=buffer,
        )
        assert [UUID(h["id"]) for h in hits] == [b, a]

        def counts() -> dict[UUID, int]:
            with db.tenant_tx(pool, tenant) as conn:
                rows = conn.execute("SELECT id, access_count FROM memworker.memories WHERE id = ANY(%s)", ([a, b],))
                return {r["id"]: r["access_count"] for r in rows.fetchall()}

        assert counts() == {a: 0, b: 0}  # the statement only reads: the accesses wait in the buffer
        buffer.close()
        assert bumps.drain(pool, client) >= 2
        assert counts() == {a: 1, b: 1}
    finally:
        buffer.close()
        client.close()
