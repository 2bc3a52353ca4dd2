"""The fleet's use cases over shared pools: listing pools, a pool's memories, sharing an
agent's memory into a pool, and deciding pool proposals. Writes into a pool are the memories
capability's (memworker/memories/service.py, the pool by its owner id). The caller checks
scopes (a pool by its owner id, pools.owner) and owns the transaction."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from uuid import UUID

import numpy as np

from memworker.fleet import pools, proposals
from memworker.memories import service as memories
from memworker.schemas import PoolList, PoolOut, ProposalDecided, ProposalList, Shared
from memworker.storage import core_db, store
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy

Embed = Callable[[str], np.ndarray]


def pool_list(conn: Conn, *, tenant_id: UUID, agent_ids: frozenset[str] | None) -> PoolList:
    """The tenant's pools with their live memory counts: those a key limited to some agents
    names ('pool~<name>'), every one for a key that is not."""
    found = [
        PoolOut(pool=r.owner[len(pools.PREFIX) :], created_at=r.created_at.isoformat(), memories=r.memories)
        for r in core_db.pool_list(conn, tenant_id=tenant_id)
    ]
    return PoolList(pools=[x for x in found if agent_ids is None or pools.owner(x["pool"]) in agent_ids])


def pool_page(
    conn: Conn, *, tenant_id: UUID, pool: str, limit: int, after: tuple[datetime, UUID] | None, subject: str | None
) -> memories.Page:
    """One page of the pool's memories, newest first. Raises NotFound for a pool nothing was
    ever written to."""
    owner = pools.require(conn, tenant_id=tenant_id, name=pool)
    return memories.page(
        conn, tenant_id=tenant_id, owner=owner, limit=limit, after=after, filters=memories.Filters(subject=subject)
    )


def delete_pool_memory(conn: Conn, *, tenant_id: UUID, pool: str, memory_id: UUID) -> None:
    """Delete a memory of the pool. Raises NotFound."""
    store.delete_memory(conn, tenant_id=tenant_id, agent_id=pools.owner(pool), memory_id=memory_id)


def share(
    conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID, pool: str, actor: str, embed: Embed
) -> Shared:
    """Promote the agent's memory into a pool its policy names in pools_write (pools.share):
    the pool's memory and whether it is a new copy or one more source. Raises NotFound (the
    agent, the memory), Forbidden."""
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id, must_exist=True)
    mid, how = pools.share(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        pool=pool,
        policy=policy,
        actor=actor,
        embed=embed,
    )
    copy = store.get_memory(conn, tenant_id=tenant_id, agent_id=pools.owner(pool), memory_id=mid)
    return Shared(pool=pool, outcome=how, memory=memories.memory_out(copy, pool))


def proposal_list(
    conn: Conn, *, tenant_id: UUID, pool: str, status: str | None, agent_ids: list[str] | None, limit: int
) -> ProposalList:
    """The pool's proposals (status None: all), oldest first, each with its sources."""
    found = proposals.listing(conn, tenant_id=tenant_id, pool=pool, status=status, agent_ids=agent_ids, limit=limit)
    return ProposalList(proposals=[proposals.to_json(x) for x in found])


def _reason(conn: Conn, tenant_id: UUID, pool: str, reason: str) -> str:
    """The reason as the audit trail keeps it: redacted when the pool's policy redacts."""
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=pools.owner(pool))
    return policy.redacted(reason)


def approve(
    conn: Conn,
    *,
    tenant_id: UUID,
    pool: str,
    proposal_id: UUID,
    agent_ids: list[str] | None,
    reason: str,
    actor: str,
    embed: Embed,
) -> ProposalDecided:
    """proposals.approve, its reason kept as the pool's policy says."""
    return proposals.approve(
        conn,
        tenant_id=tenant_id,
        pool=pool,
        proposal_id=proposal_id,
        agent_ids=agent_ids,
        reason=_reason(conn, tenant_id, pool, reason),
        actor=actor,
        embed=embed,
    )


def reject(
    conn: Conn, *, tenant_id: UUID, pool: str, proposal_id: UUID, agent_ids: list[str] | None, reason: str, actor: str
) -> ProposalDecided:
    """proposals.reject, its reason kept as the pool's policy says."""
    return proposals.reject(
        conn,
        tenant_id=tenant_id,
        pool=pool,
        proposal_id=proposal_id,
        agent_ids=agent_ids,
        reason=_reason(conn, tenant_id, pool, reason),
        actor=actor,
    )
