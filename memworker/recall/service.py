"""Recall's use cases for the API: one agent's recall (with the pools its policy reads) and one
ranked list over several agents and pools. The request's input is checked at the edge
(schemas.RecallIn); the caller checks scopes. Each answers what the route sends, timed."""

from __future__ import annotations

import time
from collections.abc import Callable
from uuid import UUID

import numpy as np

from memworker import metrics
from memworker.domain.policy import Policy
from memworker.fleet import pools
from memworker.models.embeddings import CachedQueryEmbedder
from memworker.recall import hybrid
from memworker.recall.stats import Stats
from memworker.schemas import AgentsRecallIn, Recalled, RecallIn
from memworker.storage import bumps, db, replicas
from memworker.storage.db import Conn, Pool
from memworker.tenancy import service as tenancy


def query_of(body: RecallIn) -> hybrid.Query:
    """The body's recall query."""
    return hybrid.Query(
        body.query,
        body.k,
        tuple(body.tiers) if body.tiers else None,
        tuple(body.kinds) if body.kinds else None,
        body.since,
        body.until,
        body.metadata,
        body.explain,
        body.subject,
        include_superseded=body.include_superseded,
    )


def recall_agent(
    pool: Pool,
    embedder: CachedQueryEmbedder,
    *,
    tenant_id: UUID,
    agent_id: str,
    body: RecallIn,
    policy: Callable[[], Policy],
    access: bumps.Buffer,
    stats: Stats,
    reads: replicas.Reads | None = None,
    client_lsn: int = 0,
) -> Recalled:
    """The agent's recall (hybrid.serve): on a replica that has replayed the caller's last write
    when there are some, its hits counted as accessed. policy: the agent's effective policy
    (NotFound for an agent that does not exist), asked for once the query is embedded."""
    started = time.perf_counter()
    q = query_of(body)
    qvec = embedder.embed_one(q.text)  # before taking a connection: none waits on the model
    hits = hybrid.serve(
        pool,
        qvec,
        tenant_id=tenant_id,
        agent_id=agent_id,
        query=q,
        policy=policy(),
        access=access,
        reads=reads,
        client_lsn=client_lsn,
        stats=stats,
    )
    took = time.perf_counter() - started
    metrics.RECALL_SECONDS.observe(took)
    if not hits:
        metrics.RECALL_EMPTY.inc()
    return Recalled(memories=[*hits], took_ms=round(took * 1000, 3))


def recall_agents(pool: Pool, embedder: CachedQueryEmbedder, *, tenant_id: UUID, body: AgentsRecallIn) -> Recalled:
    """One ranked list over the named agents and pools (hybrid.serve_agents), by the tenant's
    policy; NotFound for an agent or a pool that does not exist."""
    agents = list(dict.fromkeys(body.agents))
    names = list(dict.fromkeys(body.pools))
    started = time.perf_counter()
    q = query_of(body)
    qvec = embedder.embed_one(q.text)  # before taking a connection: none waits on the model
    with db.tenant_tx(pool, tenant_id) as conn:
        for agent_id in agents:
            tenancy.require_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
        for name in names:
            pools.require(conn, tenant_id=tenant_id, name=name)
        policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=None)
    owners = [pools.owner(name) for name in names]
    hits = hybrid.serve_agents(pool, qvec, tenant_id=tenant_id, agent_ids=agents + owners, query=q, policy=policy)
    took = time.perf_counter() - started
    metrics.RECALL_SECONDS.observe(took)
    return Recalled(memories=[*hits], took_ms=round(took * 1000, 3))


def look(
    conn: Conn, qvec: np.ndarray, *, tenant_id: UUID, agent_id: str, query: hybrid.Query, stats: Stats
) -> list[hybrid.Hit]:
    """What the agent would recall, for an operator (the console): by the agent's policy
    (NotFound for an agent that does not exist), in the caller's transaction, and no access
    counted: an operator looking is not the agent recalling (access counts feed retention)."""
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id, must_exist=True)
    return hybrid.recall(conn, qvec, tenant_id=tenant_id, agent_id=agent_id, query=query, policy=policy, stats=stats)
