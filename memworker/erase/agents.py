"""An agent's erase (DELETE /v1/agents/{agent_id}): everything the agent holds goes, with a
receipt counting each place, in one transaction.

Within the agent nothing is searched: every row of it goes, so no copy of its text can stay
in it. What it left elsewhere goes too, as forget takes it (memworker/erase/forget.py): the
pool memories copied from (or confirmed by) any of its memories, the proposals to a pool
naming one, and its webhook deliveries. Its audit trail goes as well (a reason may quote
what it held): the receipt, which names no text, is the record.

In-flight work: the agent's advisory lock (a consolidation or retention pass finishes
first; Unavailable after forget.LOCK_WAIT_S), then its episodes in id order (an ingest
storing one commits first, or finds it gone and stores nothing), then its row (every
writer of a row of the agent checks that row first: one in flight commits before the erase
counts, one after it fails). Keys naming the agent keep their lists: an agent created again
under the same id starts empty."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, TypedDict, cast
from uuid import UUID

from memworker import errors
from memworker.erase import forget
from memworker.fleet import pools
from memworker.fleet import queries as admin_db
from memworker.lifecycle import governance
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy


class AgentReceipt(TypedDict):
    """An agent's erase: its rows per table, the ids of pool copies and proposals it reached
    elsewhere, its webhook deliveries and audit events; no text."""

    agent_id: str
    at: str
    memories: int
    turns: int
    terms: int
    connections: int
    reviews: int
    aliases: int
    episodes: int
    sessions: int
    context_calls: int
    archives: int
    session_items: int
    profile_versions: int
    consolidation_runs: int
    retention_runs: int
    proposals_made: int
    pool_copies: forget.Ids
    pool_proposals: forget.Ids
    webhook_deliveries: int
    audit_events: int


def erase_agent(conn: Conn, *, tenant_id: UUID, agent_id: str, now: datetime | None = None) -> AgentReceipt:
    """Erase the agent and everything of it; the receipt. NotFound for an unknown agent (or a
    pool: pools are not agents here)."""
    if pools.name_of(agent_id) is not None:
        raise errors.NotFound("agent not found")
    base: dict[str, Any] = dict(tenant_id=tenant_id, agent_id=agent_id)
    tenancy.require_agent(conn, **base)
    forget.lock_agent(conn, tenant_id, agent_id)
    now = now or governance.clock(conn)
    admin_db.hold_episodes(conn, **base)
    if admin_db.hold_agent(conn, **base) is None:  # erased meanwhile by another call
        raise errors.NotFound("agent not found")
    counts = admin_db.agent_counts(conn, **base)
    ids = sorted(admin_db.agent_memory_ids(conn, **base))
    pooled = pools.forget_copies(conn, tenant_id=tenant_id, agent_id=agent_id, memory_ids=ids)
    proposed = pools.forget_proposals(conn, tenant_id=tenant_id, agent_id=agent_id, memory_ids=ids)
    deliveries = admin_db.delete_webhook_deliveries(conn, **base)
    events = admin_db.delete_events(conn, **base)
    admin_db.delete_agent(conn, **base)
    return cast(
        AgentReceipt,
        {
            "agent_id": agent_id,
            "at": now.isoformat(),
            **dataclasses.asdict(counts),
            "pool_copies": forget.Ids(count=len(pooled), ids=sorted(str(i) for i in pooled)),
            "pool_proposals": forget.Ids(count=len(proposed), ids=sorted(str(i) for i in proposed)),
            "webhook_deliveries": deliveries,
            "audit_events": events,
        },
    )
