"""The exact recall statement's text is the one whose generic plan the server may cache: it
carries no candidate-id conditions, it scores as the bounded statement does (one shared
text), and the plan the server makes once for any agent answers exactly as one made for each
call's values."""

from __future__ import annotations

import random
from typing import Any

import pytest

from memworker.domain import memories
from memworker.domain.policy import Policy
from memworker.models.embeddings import CachedQueryEmbedder
from memworker.recall import hybrid as recall
from memworker.storage import _sql, db, store
from memworker.tenancy import service as tenancy
from memworker.testing import FakeEmbedder

WORDS = "deploy window thursday kafka lag budget review garden paris coffee launch incident rollback".split()


def test_the_exact_text_shares_its_scoring_with_the_bounded_one() -> None:
    # BM25, fusion, priors, collapse and the final select: one text, so scores agree
    scoring = _sql.Q["recall"][_sql.Q["recall"].index("\nbm25 AS MATERIALIZED (") :]
    assert _sql.Q["recall_bounded"].endswith(scoring)


@pytest.fixture(scope="module")
def pool(stack: dict[str, Any]) -> Any:
    p = db.open_pool(stack["app_url"], max_size=2)
    yield p
    p.close()


def _ranked(conn: Any, tenant: Any, agent: str, text: str, mode: str) -> list[tuple[str, float]]:
    conn.execute("SELECT set_config('plan_cache_mode', %s, true)", (mode,))
    q = recall.Query(text, k=10, explain=True)
    hits = recall.recall(
        conn,
        CachedQueryEmbedder(FakeEmbedder()).embed_one(text),
        tenant_id=tenant,
        agent_id=agent,
        query=q,
        policy=Policy(),
        path="exact",
    )
    return [(h["id"], h["score"]) for h in hits]


def test_the_cached_generic_plan_ranks_as_a_plan_per_call(pool: Any, tenants: dict[str, Any]) -> None:
    rng = random.Random(5)
    tenant, agent = tenants["charlie"]["id"], "plan-cache"
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(3, 9))) for _ in range(80)]
    embedder = FakeEmbedder()
    with db.tenant_tx(pool, tenant) as conn:
        tenancy.ensure_agent(conn, tenant_id=tenant, agent_id=agent)
        for i, (text, vec) in enumerate(zip(texts, embedder.embed(texts), strict=True)):
            store.write_memory(
                conn,
                tenant_id=tenant,
                agent_id=agent,
                draft=memories.Draft(text=text),
                embedding=vec,
                source_key=f"plan:{i}",
            )
    queries = ["deploy window", "kafka lag review", "coffee in paris", "budget rollback incident launch"]
    with db.tenant_tx(pool, tenant) as conn:
        want = {q: _ranked(conn, tenant, agent, q, "force_custom_plan") for q in queries}
        assert all(len(hits) == 10 for hits in want.values())
        # past psycopg's prepare threshold, so the server runs its one generic plan of the text
        for _ in range(7):
            for q in queries:
                assert _ranked(conn, tenant, agent, q, "force_generic_plan") == want[q]
                assert _ranked(conn, tenant, agent, q, "auto") == want[q]
