"""Shared pools: tenant-level memories that a fleet's agents read beside their own.

A pool is stored as an agent row whose id is 'pool~<name>' ('~' is in no agent id, so no
agent route can reach a pool and no agent can be named like one): its memories are ordinary
memories, with the one write path (BM25 postings, dedup, supersede and review within the
pool) and the one recall statement. An agent reads the pools its policy names in
pools_read (recall and context: one ranked list over its memories and theirs) and shares
its memories into those named in pools_write. A key limited to some agents reaches a pool
directly (its routes, a recall across agents) only when its agent list names 'pool~<name>'
(`memworker key create --pools`); through an agent it reads what that agent is granted.

A copy's provenance names its source ('memory:<agent>/<id>', then the source's own
provenance): forgetting or deleting the source deletes the copies. A fact another agent
already shared confirms the pool's memory (one more source) instead of a second copy.

Sleep finds what several agents learnt independently, in their own words
(memworker/fleet/matches.py), and, by the agent's policy pools_propose, shares it at once or
queues a proposal a person decides (memworker/fleet/proposals.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from uuid import UUID

import numpy as np

from memworker import errors
from memworker.domain import memories
from memworker.domain.policy import Policy
from memworker.fleet import matches
from memworker.fleet.statuses import ProposalStatus
from memworker.lifecycle import governance
from memworker.memories import copies, writer
from memworker.storage import core_db, db, proposals_db, store
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy

PREFIX = memories.POOL_PREFIX
# a forgotten memory's pool copies and proposals go with it (memworker/memories/copies.py)
forget_copies = copies.forget_copies
forget_proposals = copies.forget_proposals


def owner(name: str) -> str:
    """The agents row of pool `name`. Raises InvalidInput for a bad name."""
    found = memories.pool_owner(name)
    if found is None:
        raise errors.InvalidInput("a pool name must be 1-128 characters of letters, digits and . _ : @ -")
    return found


def name_of(agent_id: str) -> str | None:
    """The pool an agents row is, or None for an agent."""
    return memories.pool_of(agent_id)


def readable(policy: Policy) -> list[str]:
    """The owner ids of the pools an agent with this policy reads."""
    return [owner(n) for n in policy.pools_read]


def ensure(conn: Conn, *, tenant_id: UUID, name: str) -> str:
    """Create the pool on first use; its owner id."""
    pool = owner(name)
    core_db.ensure_agent(conn, tenant_id=tenant_id, agent_id=pool)
    return pool


def require(conn: Conn, *, tenant_id: UUID, name: str) -> str:
    """The pool's owner id; NotFound when nothing was ever written to it."""
    pool = owner(name)
    if not core_db.agent_exists(conn, tenant_id=tenant_id, agent_id=pool):
        raise errors.NotFound("pool not found")
    return pool


def share(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    memory_id: UUID,
    pool: str,
    policy: Policy,
    actor: str,
    embed: Callable[[str], np.ndarray] | None = None,
) -> tuple[UUID, str]:
    """Promote an agent's live memory into a pool its policy may write: (the pool memory's
    id, 'copied' | 'confirmed' | 'already shared'). Raises NotFound, Forbidden.

    With the pool's redact_pii (the tenant's policy) the copy is redacted like a direct write
    to the pool, whatever the sharing agent's own policy; a text that changed is embedded
    again with `embed` when given (else the source's vector stays)."""
    if pool not in policy.pools_write:
        raise errors.Forbidden(f"this agent's policy does not let it write to pool {pool!r} (pools_write)")
    src = core_db.pool_source(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    if src is None:
        raise errors.NotFound("memory not found (or no longer live)")
    target = ensure(conn, tenant_id=tenant_id, name=pool)
    source = f"memory:{agent_id}/{memory_id}"
    pool_policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=target)
    entry = _copy_of(agent_id, memory_id, target, src)
    if pool_policy.redact_pii:
        entry = writer.redacted([entry], None if embed is None else lambda texts: [embed(t) for t in texts])[0]
        # who shared it is named as it is
        entry = dataclasses.replace(
            entry, draft=dataclasses.replace(entry.draft, metadata={**entry.draft.metadata, "shared_by": agent_id})
        )
    dup = store.find_duplicate(
        conn,
        tenant_id=tenant_id,
        agent_id=target,
        text=entry.draft.text,
        embedding=entry.embedding,
        threshold=pool_policy.dedup_similarity,
        subject=src.subject,
    )
    if dup is not None:  # learnt independently by another agent: one more source
        already = source in store.get_memory(conn, tenant_id=tenant_id, agent_id=target, memory_id=dup).provenance
        if not already:
            governance.confirm(
                conn,
                tenant_id=tenant_id,
                agent_id=target,
                memory_id=dup,
                confidence=float(src.confidence),
                source=source,
                policy=pool_policy,
            )
        return dup, "already shared" if already else "confirmed"
    written = writer.write(
        conn, tenant_id=tenant_id, owner=target, entries=[entry], policy=pool_policy, actor=actor, reason=source
    )[0]
    return written.id, "copied" if written.new else "already shared"


def _copy_of(agent_id: str, memory_id: UUID, target: str, src: core_db.PoolSource) -> writer.Entry:
    """The source as a new memory of the pool (target) naming it first in its provenance."""
    source = f"memory:{agent_id}/{memory_id}"
    draft = memories.Draft(
        text=src.text,
        kind=memories.Kind(src.kind),
        confidence=float(src.confidence),
        salience=float(src.salience),
        # L3 in a pool only by its own promote
        tier=memories.Tier.L1 if src.tier in (memories.Tier.L0, memories.Tier.L3) else memories.Tier(src.tier),
        entities=tuple(src.entities),
        topics=tuple(src.topics),
        provenance=(source, *src.provenance),
        metadata={**src.metadata, "shared_by": agent_id},
        flags=tuple(src.flags),
        trust="pool",
        subject=src.subject,
        parts=src.parts,
    )
    return writer.Entry(draft, src.embedding, f"share:{target}:{agent_id}/{memory_id}")


def propose(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[UUID], policy: Policy) -> int:
    """Sleep's share: of these memories of the agent (a pass's window and what it derived),
    the general ones another agent of the tenant learnt too, in its own words or the same
    (memworker/fleet/matches.py), go to every pool the agent may write, the other agents'
    memories named as sources. By the policy's pools_propose: 'review' queues a proposal for
    each (memworker/fleet/proposals.py decides it), 'auto' shares at once (a fact a person
    rejected for the pool, in any words, excepted), 'off' neither. Returns how many (memory,
    pool) pairs were proposed, or shared or confirmed."""
    if policy.pools_propose == "off" or not (policy.pools_write and ids):
        return 0
    found = matches.findings(conn, tenant_id=tenant_id, agent_id=agent_id, ids=ids, policy=policy)
    if not found:
        return 0
    if policy.pools_propose == "review":
        return _queue(conn, tenant_id, found, sorted(policy.pools_write), policy)
    done = 0
    # pools in name order: share() takes each pool's dedup lock until the pass commits, and
    # two agents whose policies list the same pools in other orders must not wait on each other
    for pool in sorted(policy.pools_write):
        db.dedup_lock(conn, tenant_id, owner(pool))
        for finding in found:
            held = matches.proposal(conn, tenant_id=tenant_id, pool=owner(pool), finding=finding, policy=policy)
            if held is not None and held.status == ProposalStatus.REJECTED:
                continue
            share_from(
                conn,
                tenant_id=tenant_id,
                agent_id=agent_id,
                memory_id=finding.memory.id,
                pool=pool,
                policy=policy,
                others=list(finding.others),
                actor="sleep",
            )
            done += 1
    return done


def share_from(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    memory_id: UUID,
    pool: str,
    policy: Policy,
    others: list[str],
    actor: str,
    embed: Callable[[str], np.ndarray] | None = None,
) -> tuple[UUID, str]:
    """share() the agent's memory into the pool, then name each of others (more agents'
    memories of the same fact) among the pool memory's sources: (its id, share's outcome)."""
    mid, how = share(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        pool=pool,
        policy=policy,
        actor=actor,
        embed=embed,
    )
    target = owner(pool)
    pool_policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=target)
    for other in others:
        if other not in store.get_memory(conn, tenant_id=tenant_id, agent_id=target, memory_id=mid).provenance:
            governance.confirm(
                conn,
                tenant_id=tenant_id,
                agent_id=target,
                memory_id=mid,
                confidence=0.0,  # evidence of the same fact: the pool memory's confidence only grows
                source=other,
                policy=pool_policy,
            )
    return mid, how


def _queue(conn: Conn, tenant_id: UUID, found: list[matches.Finding], names: list[str], policy: Policy) -> int:
    """Review mode: each finding becomes an open proposal to each pool (created empty on
    first use, so that it lists), or adds its sources to the pool's open proposal of the same
    fact; a decided fact is left as it was. Returns how many proposals were made or gained a
    source."""
    done = 0
    for name in names:
        target = ensure(conn, tenant_id=tenant_id, name=name)
        # one pass at a time matches and opens a pool's proposals (pools in name order, as
        # above): two agents proposing one fact in two wordings at once make one proposal
        db.dedup_lock(conn, tenant_id, target)
        for finding in found:
            held = matches.proposal(conn, tenant_id=tenant_id, pool=target, finding=finding, policy=policy)
            if held is None:
                made = proposals_db.upsert(
                    conn,
                    tenant_id=tenant_id,
                    pool=target,
                    agent_id=finding.agent_id,
                    memory_id=finding.memory.id,
                    content_hash=finding.memory.content_hash,  # the first wording keys the fact
                    sources=finding.sources,
                )
                done += made is not None
            elif held.status == ProposalStatus.OPEN:
                done += proposals_db.add_sources(
                    conn, tenant_id=tenant_id, proposal_id=held.id, sources=finding.sources
                )
    return done
