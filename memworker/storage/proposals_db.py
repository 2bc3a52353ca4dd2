"""Typed queries of queries/proposals.sql: sleep's proposals to a tenant's shared pools,
waiting for review (memworker/fleet/proposals.py). One function per `-- name:` block, named
like it; rows come back as frozen dataclasses.

The caller owns the transaction and binds the tenant (db.tenant_tx). pool: the pool's
agents row, 'pool~<name>'."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

import numpy as np

from memworker.storage import _sql
from memworker.storage.db import Conn


@dataclass(frozen=True, slots=True)
class Proposal:
    id: UUID
    pool: str
    agent_id: str  # the agent whose pass proposed it first
    memory_id: UUID  # its memory: the text a copy takes
    sources: list[str]  # 'memory:<agent>/<id>' of each agent that learnt it
    status: str  # open | approved | rejected
    pool_memory_id: UUID | None
    reason: str | None
    decided_by: str | None
    decided_at: datetime | None
    created_at: datetime
    updated_at: datetime
    text: str | None  # None once the proposing memory is gone
    kind: str | None
    live: bool


def proposal_upsert(
    conn: Conn,
    *,
    tenant_id: UUID,
    pool: str,
    agent_id: str,
    memory_id: UUID,
    content_hash: str,
    sources: list[str],
) -> bool | None:
    """True: proposed; False: sources added to the open proposal; None: nothing changed."""
    row = _sql.one(
        conn,
        "proposal_upsert",
        tenant_id=tenant_id,
        pool=pool,
        agent_id=agent_id,
        memory_id=memory_id,
        content_hash=content_hash,
        sources=sources,
    )
    return None if row is None else bool(row["created"])


def proposal_list(
    conn: Conn, *, tenant_id: UUID, pool: str, status: str | None, agent_ids: list[str] | None, limit: int
) -> list[Proposal]:
    rows = _sql.all_(
        conn, "proposal_list", tenant_id=tenant_id, pool=pool, status=status, agent_ids=agent_ids, limit=limit
    )
    return [Proposal(**r) for r in rows]


def proposal_lock(conn: Conn, *, tenant_id: UUID, pool: str, proposal_id: UUID) -> Proposal | None:
    row = _sql.one(conn, "proposal_lock", tenant_id=tenant_id, pool=pool, proposal_id=proposal_id)
    return Proposal(**row) if row else None


def proposal_decide(
    conn: Conn,
    *,
    tenant_id: UUID,
    proposal_id: UUID,
    status: str,
    pool_memory_id: UUID | None,
    reason: str | None,
    actor: str,
) -> int:
    return _sql.run(
        conn,
        "proposal_decide",
        tenant_id=tenant_id,
        proposal_id=proposal_id,
        status=status,
        pool_memory_id=pool_memory_id,
        reason=reason,
        actor=actor,
    )


@dataclass(frozen=True, slots=True)
class Match:
    """A proposal of the pool that may hold a fact already."""

    id: UUID
    status: str
    text: str | None  # its proposing memory's, None once that is gone
    similarity: float
    linked: bool  # it names one of the fact's memories, or has its hash: no words to confirm


def proposal_match(
    conn: Conn,
    *,
    tenant_id: UUID,
    pool: str,
    sources: list[str],
    content_hash: str,
    embedding: np.ndarray,
    min_similarity: float,
    near: int,
) -> list[Match]:
    rows = _sql.all_(
        conn,
        "proposal_match",
        tenant_id=tenant_id,
        pool=pool,
        sources=sources,
        content_hash=content_hash,
        embedding=embedding,
        min_similarity=min_similarity,
        near=near,
    )
    return [Match(**r) for r in rows]


def proposal_add_sources(conn: Conn, *, tenant_id: UUID, proposal_id: UUID, sources: list[str]) -> bool:
    """True when a source was added (the proposal open, not already naming them all)."""
    row = _sql.one(conn, "proposal_add_sources", tenant_id=tenant_id, proposal_id=proposal_id, sources=sources)
    return row is not None


def proposal_forget(conn: Conn, *, tenant_id: UUID, sources: list[str]) -> list[UUID]:
    """The ids of the proposals deleted because they name one of sources."""
    return [r["id"] for r in _sql.all_(conn, "proposal_forget", tenant_id=tenant_id, sources=sources)]
