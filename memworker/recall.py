"""Hybrid recall: one SQL statement (storage/queries/core.sql: recall) per call, over the
query vector the caller embedded (models/embeddings.CachedQueryEmbedder). The plan is an exact
per-agent scan for both BM25 and cosine, so every agent gets its own true top-k and never
another agent's rows; see docs/recall.md."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
import psycopg_pool

from memworker import errors, tokens
from memworker.memories import KINDS, SUBJECT, TIERS
from memworker.policy import Policy
from memworker.storage import bumps, core_db, db, replicas

MAX_K = 100


@dataclass(frozen=True)
class Query:
    text: str
    k: int = 5
    tiers: tuple[str, ...] | None = None
    kinds: tuple[str, ...] | None = None
    since: datetime | None = None
    until: datetime | None = None
    metadata: dict[str, Any] | None = None
    explain: bool = False
    # whom the recall is for: that subject's memories and the agent's general ones, never
    # another subject's; None: the general ones only
    subject: str | None = None

    def validate(self) -> None:
        if not self.text.strip():
            raise errors.InvalidInput("query must not be empty")
        if not 1 <= self.k <= MAX_K:
            raise errors.InvalidInput(f"k must be between 1 and {MAX_K}")
        if self.tiers is not None and any(t not in TIERS for t in self.tiers):
            raise errors.InvalidInput(f"tiers must be among {list(TIERS)}")
        if self.kinds is not None and any(k not in KINDS for k in self.kinds):
            raise errors.InvalidInput(f"kinds must be among {list(KINDS)}")
        if self.subject is not None and not SUBJECT.match(self.subject):
            raise errors.InvalidInput("subject must be 1-128 characters of letters, digits and . _ : @ -")


def recall(
    conn: Any,
    qvec: np.ndarray,
    *,
    tenant_id: UUID,
    agent_id: str,
    query: Query,
    policy: Policy,
    bump: bool = True,
) -> list[dict[str, Any]]:
    """The agent's top-k live memories for the query, best first, with their signals, inside
    the caller's transaction. qvec is the query's embedding (the caller embeds it before it
    takes a connection, so no pooled connection waits on the model). Without the bump the
    statement is read-only, so a replica can run it."""
    rows = core_db.recall(conn, **_params(qvec, tenant_id, agent_id, query, policy, bump), read_only=not bump)
    return _hits(rows, query.explain)


def serve(
    pool: psycopg_pool.ConnectionPool,
    qvec: np.ndarray,
    *,
    tenant_id: UUID,
    agent_id: str,
    query: Query,
    policy: Policy,
    reads: replicas.Reads | None = None,
    client_lsn: int = 0,
) -> list[dict[str, Any]]:
    """recall() as the API serves it: its own transaction, whose commit does not wait for the
    WAL flush (the only write is the access bump, which a server crash may lose). With
    replicas (reads), on one that has replayed the caller's last write (client_lsn, or the
    one Redis remembers), else on the primary; either way the hits' access bumps are queued
    for the primary (storage/bumps.py)."""
    if reads is None:
        with db.tenant_tx(pool, tenant_id, durable=False) as conn:
            return recall(conn, qvec, tenant_id=tenant_id, agent_id=agent_id, query=query, policy=policy)
    params = _params(qvec, tenant_id, agent_id, query, policy, False)
    rows = reads.read(
        tenant_id, lambda conn: core_db.recall(conn, **params, read_only=True), agent_id=agent_id, client_lsn=client_lsn
    )
    # what the primary's statement bumps: the hits and the memories collapsed into them
    bumps.queue(reads.client, tenant_id, [i for r in rows for i in [r.id, *(r.collapsed or [])]])
    return _hits(rows, query.explain)


def serve_agents(
    pool: psycopg_pool.ConnectionPool,
    qvec: np.ndarray,
    *,
    tenant_id: UUID,
    agent_ids: list[str],
    query: Query,
    policy: Policy,
) -> list[dict[str, Any]]:
    """One ranked list over several agents' memories, each hit naming its agent_id. BM25's
    statistics are those of the union of the agents' live memories (one corpus), and the
    weights and thresholds are `policy`'s (the tenant's), so scores compare across agents.
    A read only: no access counts are bumped."""
    params = _params(qvec, tenant_id, agent_ids[0], query, policy, False)
    for unused in ("agent_id", "pool", "collapse", "bump"):
        params.pop(unused)
    with db.tenant_tx(pool, tenant_id, durable=False) as conn:
        rows = core_db.recall_agents(conn, agent_ids=agent_ids, **params)
    return [{"agent_id": r.agent_id, **hit} for r, hit in zip(rows, _hits(list(rows), query.explain), strict=True)]


def _params(
    qvec: np.ndarray, tenant_id: UUID, agent_id: str, query: Query, policy: Policy, bump: bool
) -> dict[str, Any]:
    query.validate()
    return dict(
        tenant_id=tenant_id,
        agent_id=agent_id,
        terms=sorted(set(tokens.tokenize(query.text))),
        qvec=qvec,
        tiers=list(query.tiers or policy.recall_tiers),
        kinds=list(query.kinds) if query.kinds else None,
        since=query.since,
        until=query.until,
        metadata=query.metadata or None,
        hide_flagged=policy.hold_back_flagged,
        candidates=max(policy.recall_candidates, query.k),
        vector_floor=policy.recall_vector_floor,
        w_bm25=policy.recall_bm25_weight,
        w_vector=policy.recall_vector_weight,
        w_prior=policy.recall_prior_weight,
        k=query.k,
        # room for hits that collapse into better-ranked ones (an item and its turns)
        pool=query.k * 3 if policy.recall_collapse else query.k,
        collapse=policy.recall_collapse,
        bump=bump,
        subject=query.subject,
    )


def _hits(rows: list[core_db.RecallRow], explain: bool) -> list[dict[str, Any]]:
    hits = []
    for r in rows:
        hit: dict[str, Any] = {
            "id": str(r.id),
            "text": r.text,
            "kind": r.kind,
            "tier": r.tier,
            "score": round(float(r.score), 6),
            "metadata": r.metadata,
            "created_at": r.created_at.isoformat(),
            "provenance": r.provenance,
            "flags": r.flags,
            "trust": r.trust,
            "subject": r.subject,
        }
        if explain:
            hit["signals"] = {
                "bm25": float(r.bm25),
                "vector": float(r.vector),
                "fused": float(r.fused),
                "salience": float(r.salience),
                "access": int(r.access_count),
                "freshness": float(r.freshness),
                "prior": float(r.prior),
            }
            # memories whose source messages this hit (or a better one) already names: they
            # gave up their slot (policy.recall_collapse)
            hit["collapsed"] = [str(c) for c in r.collapsed or []]
        hits.append(hit)
    return hits
