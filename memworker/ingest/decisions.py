"""The LLM reflector's decisions about known memories, applied in the transaction that stores
the episode (processing._store_items): "same" confirms the named memory and writes no row,
"update" supersedes it by the item's new memory, "contradiction" puts the pair on the review
list, "new" writes the item. The old text is never edited: an update is a new memory, and the
superseded one stays for history (its 'superseded' event names the newer and the episode).

A decision is applied only when its memory is still live and of the item's subject when the
episode is stored (the LLM saw it earlier, outside this transaction): otherwise it is dropped
and the offline rules decide for the item, as for an item the LLM did not decide."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from uuid import UUID

from memworker import errors, metrics, reflection
from memworker.domain.policy import Policy
from memworker.lifecycle import governance
from memworker.storage import store
from memworker.storage.db import Conn

ACTOR = "ingest"


def usable(
    conn: Conn, tenant_id: UUID, agent_id: str, item: reflection.Item, subject: str | None, now: datetime
) -> str | None:
    """The item's relation when it can be applied now, else None (the rules decide)."""
    if item.relation is None or item.relation == "new":
        return item.relation
    if item.memory is None:
        return None
    try:
        known = store.get_memory(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=item.memory)
    except errors.NotFound:  # forgotten or merged away since the LLM saw it
        return None
    live = known.valid_to is None and (known.expires_at is None or known.expires_at > now)
    return item.relation if live and known.subject == subject else None


def confirm(conn: Conn, tenant_id: UUID, agent_id: str, item: reflection.Item, source: str, policy: Policy) -> UUID:
    """A "same" decision: the named memory confirmed by the item, as a duplicate is."""
    assert item.memory is not None
    governance.confirm(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=item.memory,
        confidence=item.confidence,
        source=source,
        policy=policy,
    )
    return item.memory


def apply(
    conn: Conn,
    tenant_id: UUID,
    agent_id: str,
    relation: str,
    item: reflection.Item,
    newer: UUID,
    source: str,
    policy: Policy,
    now: datetime,
) -> None:
    """An "update" or "contradiction" decision, once the item's memory (newer) is written."""
    if item.memory is None or relation not in ("update", "contradiction"):
        return
    why = f"llm reflector: {relation} by {source.split('#')[0]}"
    if relation == "update":
        governance.supersede(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            older_id=item.memory,
            newer_id=newer,
            reason=why,
            actor=ACTOR,
            policy=policy,
            now=now,
        )
    else:
        governance.add_review(
            conn, tenant_id=tenant_id, agent_id=agent_id, newer_id=newer, older_id=item.memory, reason=why, now=now
        )


def count(decisions: Counter[str]) -> None:
    """The decisions of a stored episode on /metrics (called after its transaction commits)."""
    for relation, n in decisions.items():
        if n:
            metrics.LLM_UPDATE_DECISIONS.labels(relation).inc(n)
