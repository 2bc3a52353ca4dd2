"""The copies of an agent's memories in shared pools, and the pool proposals naming them: a
memory deleted or forgotten takes them with it (memworker/fleet/pools.py shares them)."""

from __future__ import annotations

from uuid import UUID

from memworker.storage import core_db, proposals_db, store
from memworker.storage.db import Conn


def forget_copies(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_ids: list[UUID]) -> list[UUID]:
    """Delete the pool memories copied from (or confirmed by) these memories of the agent:
    forgetting a memory reaches every pool it was shared into. Returns their ids."""
    if not memory_ids:
        return []
    owners = [r.owner for r in core_db.pool_list(conn, tenant_id=tenant_id)]
    if not owners:
        return []
    sources = [f"memory:{agent_id}/{m}" for m in memory_ids]
    gone = core_db.pool_forget_copies(conn, tenant_id=tenant_id, owners=owners, sources=sources)
    for mid in gone:
        store.event(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            memory_id=None,
            event="forgotten",
            reason=f"pool copy {mid} of a forgotten memory",
        )
    return gone


def forget_proposals(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_ids: list[UUID]) -> list[UUID]:
    """Delete the proposals (open or decided) naming any of these memories of the agent as a
    source: an erased memory leaves no proposal of its words. Returns their ids."""
    if not memory_ids:
        return []
    sources = [f"memory:{agent_id}/{m}" for m in memory_ids]
    gone = proposals_db.forget_sources(conn, tenant_id=tenant_id, sources=sources)
    if gone:
        store.event(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            memory_id=None,
            event="forgotten",
            reason=f"{len(gone)} pool proposal(s) naming a forgotten memory",
            related_ids=gone,
        )
    return gone
