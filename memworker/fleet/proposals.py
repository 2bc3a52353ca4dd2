"""Proposals to a shared pool, decided by a person: with an agent's policy pools_propose =
'review', a sleep pass that finds a general fact, method or lesson another agent of the tenant
learnt independently (in its own words: memworker/fleet/matches.py judges "the same fact")
queues it for each pool the agent writes (memworker/fleet/pools.py) instead of sharing it.
Nothing reaches the pool before approval.

- one proposal per pool and fact: the next pass, or another agent's, adds its memory to the
  open proposal's sources, also when it says the fact in other words; a decided fact is not
  proposed again in any words (nor shared automatically once rejected);
- approving shares the proposing agent's memory (or, when that one is gone, the first live
  source's) into the pool as a share does (redacted by the pool's policy, deduplicated
  against it) and names every other live source in the pool memory's provenance; approving
  again answers the same pool memory; a rejected proposal cannot be approved;
- erasing any source memory deletes its proposals, decided ones included (pools.forget_proposals).

A key limited to some agents reaches a pool's proposals when its list names the pool
('pool~<name>'), and only those proposed by agents it also names: a proposal shows the
agent's own memory."""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

import numpy as np

from memworker import errors
from memworker.domain.policy import Policy
from memworker.fleet import pools
from memworker.fleet.statuses import ProposalStatus
from memworker.memories.service import memory_out
from memworker.schemas import MemoryOut, ProposalDecided, ProposalOut
from memworker.storage import core_db, db, proposals_db, store
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy

STATUSES = tuple(ProposalStatus)


class Proposal(ProposalOut):
    """A proposal as the API answers it: ProposalOut's fields and its decision's."""

    live: bool
    sources: list[str]
    pool_memory_id: str | None
    reason: str | None
    decided_by: str | None
    decided_at: str | None
    created_at: str
    updated_at: str


def to_json(p: proposals_db.Proposal) -> Proposal:
    return Proposal(
        id=str(p.id),
        pool=p.pool[len(pools.PREFIX) :],
        agent_id=p.agent_id,
        memory_id=str(p.memory_id),
        text=p.text,
        kind=p.kind,
        live=p.live,
        sources=list(p.sources),
        status=p.status,
        pool_memory_id=str(p.pool_memory_id) if p.pool_memory_id else None,
        reason=p.reason,
        decided_by=p.decided_by,
        decided_at=p.decided_at.isoformat() if p.decided_at else None,
        created_at=p.created_at.isoformat(),
        updated_at=p.updated_at.isoformat(),
    )


def listing(
    conn: Conn, *, tenant_id: UUID, pool: str, status: str | None, agent_ids: list[str] | None, limit: int
) -> list[proposals_db.Proposal]:
    """The pool's proposals (status None: all), oldest first. Raises NotFound for a pool
    nothing was ever written or proposed to."""
    target = pools.require(conn, tenant_id=tenant_id, name=pool)
    return proposals_db.find(conn, tenant_id=tenant_id, pool=target, status=status, agent_ids=agent_ids, limit=limit)


def _locked(
    conn: Conn, tenant_id: UUID, pool: str, proposal_id: UUID, agent_ids: list[str] | None
) -> proposals_db.Proposal:
    found = proposals_db.lock_for_decision(conn, tenant_id=tenant_id, pool=pools.owner(pool), proposal_id=proposal_id)
    if found is None or (agent_ids is not None and found.agent_id not in agent_ids):
        raise errors.NotFound("proposal not found")
    return found


def _parsed(source: str) -> tuple[str, UUID] | None:
    """(agent, memory id) of a 'memory:<agent>/<id>' source, None for anything else."""
    agent, _, mid = source.removeprefix("memory:").rpartition("/")
    try:
        return (agent, UUID(mid)) if source.startswith("memory:") and agent else None
    except ValueError:
        return None


def approve(
    conn: Conn,
    *,
    tenant_id: UUID,
    pool: str,
    proposal_id: UUID,
    agent_ids: list[str] | None,
    reason: str,
    actor: str,
    embed: Callable[[str], np.ndarray] | None = None,
) -> ProposalDecided:
    """Share the proposal into the pool: {"proposal", "outcome", "memory"}. Raises NotFound,
    Conflict (rejected; or no source left live), Forbidden (the sharing agent's policy no
    longer names the pool in pools_write). embed: as for pools.share (a redacted text's vector)."""
    target = pools.owner(pool)
    # the pool's dedup lock before the proposal's row, in the order a sleep pass queueing a
    # proposal takes them: the reverse order deadlocks against it
    db.dedup_lock(conn, tenant_id, target)
    row = _locked(conn, tenant_id, pool, proposal_id, agent_ids)
    if row.status == ProposalStatus.REJECTED:
        raise errors.Conflict("this proposal was rejected; a rejected proposal cannot be approved")
    if row.status == ProposalStatus.APPROVED:
        return ProposalDecided(
            proposal=to_json(row), outcome="already approved", memory=_pool_memory(conn, tenant_id, row)
        )
    agent, mid, others, policy = _sharer(conn, tenant_id, pool, row, agent_ids)
    pool_mid, how = pools.share_from(
        conn,
        tenant_id=tenant_id,
        agent_id=agent,
        memory_id=mid,
        pool=pool,
        policy=policy,
        others=others,
        actor=actor,
        embed=embed,
    )
    proposals_db.decide(
        conn,
        tenant_id=tenant_id,
        proposal_id=proposal_id,
        status=ProposalStatus.APPROVED,
        pool_memory_id=pool_mid,
        reason=reason or None,
        actor=actor,
    )
    store.event(
        conn,
        tenant_id=tenant_id,
        agent_id=target,
        memory_id=pool_mid,
        event="shared",
        reason=f"proposal {proposal_id} approved",
        actor=actor,
    )
    done = _locked(conn, tenant_id, pool, proposal_id, None)
    return ProposalDecided(proposal=to_json(done), outcome=how, memory=_pool_memory(conn, tenant_id, done))


def _sharer(
    conn: Conn, tenant_id: UUID, pool: str, row: proposals_db.Proposal, agent_ids: list[str] | None
) -> tuple[str, UUID, list[str], Policy]:
    """Which live source the copy is shared from (the proposing agent's memory first, and an
    agent whose policy still names the pool before one whose does not; for a key limited to
    some agents, one of theirs: the copy and the answer show its text), the other live
    sources, and the sharing agent's policy. Raises Conflict when no source it may share from
    is live."""
    live = [
        (agent, mid)
        for agent, mid in filter(None, map(_parsed, row.sources))
        if core_db.pool_source(conn, tenant_id=tenant_id, agent_id=agent, memory_id=mid) is not None
    ]
    if not any(agent_ids is None or a in agent_ids for a, _ in live):
        raise errors.Conflict(
            "none of this proposal's source memories (of the agents this key names) is live: reject it instead"
        )
    policies = {a: tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=a) for a, _ in live}
    # stable: the proposing agent's first otherwise
    live.sort(key=lambda s: (agent_ids is not None and s[0] not in agent_ids, pool not in policies[s[0]].pools_write))
    (agent, mid), rest = live[0], live[1:]
    return agent, mid, [f"memory:{a}/{m}" for a, m in rest], policies[agent]


def _pool_memory(conn: Conn, tenant_id: UUID, row: proposals_db.Proposal) -> MemoryOut | None:
    """The pool memory an approval wrote or confirmed, None once it was deleted."""
    if row.pool_memory_id is None:
        return None
    name = row.pool[len(pools.PREFIX) :]
    try:
        found = store.get_memory(conn, tenant_id=tenant_id, agent_id=row.pool, memory_id=row.pool_memory_id)
    except errors.NotFound:
        return None
    return memory_out(found, name)


def reject(
    conn: Conn,
    *,
    tenant_id: UUID,
    pool: str,
    proposal_id: UUID,
    agent_ids: list[str] | None,
    reason: str,
    actor: str,
) -> ProposalDecided:
    """Settle the proposal as rejected (again: the same answer): {"proposal"}. Raises
    NotFound, Conflict (already approved: delete the pool memory to take it back)."""
    row = _locked(conn, tenant_id, pool, proposal_id, agent_ids)
    if row.status == ProposalStatus.APPROVED:
        raise errors.Conflict("this proposal was approved; delete the pool memory to take it back")
    if row.status == ProposalStatus.OPEN:
        proposals_db.decide(
            conn,
            tenant_id=tenant_id,
            proposal_id=proposal_id,
            status=ProposalStatus.REJECTED,
            pool_memory_id=None,
            reason=reason or None,
            actor=actor,
        )
        row = _locked(conn, tenant_id, pool, proposal_id, None)
    return ProposalDecided(proposal=to_json(row))
