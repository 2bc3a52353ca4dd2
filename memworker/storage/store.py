"""The operations built on several core queries (write_memory with its postings and event,
update, delete, find_duplicate, ...): the row steps under memworker/memories/writer.py. Single
queries are the typed functions of memworker.storage.<area>_db, one per `-- name:` block of
queries/<area>.sql. The caller owns the transaction and binds the tenant (db.tenant_tx); every
function still takes tenant_id explicitly."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np

from memworker import errors
from memworker.domain import memories, rules, tokens
from memworker.domain.policy import Policy
from memworker.storage import core_db, db
from memworker.storage.db import Conn

# Write-time candidate searches (a duplicate here, merge and contradiction pairs in
# lifecycle/governance.py) read at most this many postings per probed term, and count a
# term's document frequency only up to DF_CAP (enough to tell rare terms from common ones):
# their cost per new memory stays flat however large the agent and small its vocabulary.
CANDIDATE_POSTINGS = 200
DF_CAP = 256
DUPLICATE_PROBE_TERMS = 3

# --- memories ---------------------------------------------------------------------------


def expiry(conn: Conn, policy: Policy, tier: str) -> datetime | None:
    hours = policy.ttl_hours(tier)
    if hours is None:
        return None
    row = conn.execute("SELECT now() + make_interval(secs => %s) AS t", (hours * 3600,)).fetchone()
    return row["t"] if row else None


def write_memory(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    draft: memories.Draft,
    embedding: np.ndarray,
    source_key: str,
    session_id: str | None = None,
    actor: str = "system",
    reason: str = "",
) -> tuple[UUID, bool]:
    """A memory's row, its BM25 postings and a 'created' event: what memworker/memories/writer.py
    (the one writer of memories, where redaction and governance are decided) stores for each
    memory. Returns (id, written): a source_key already stored (a retried write, the same
    idempotency key) changes nothing and returns that memory's id with written False."""
    tf, doc_len = tokens.term_frequencies(draft.text if draft.index_text is None else draft.index_text)
    memory_id = core_db.insert_memory(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        text=draft.text,
        kind=draft.kind,
        tier=draft.tier,
        salience=draft.salience,
        confidence=draft.confidence,
        expires_at=draft.expires_at,
        session_id=session_id,
        entities=list(draft.entities),
        topics=list(draft.topics),
        provenance=list(draft.provenance),
        metadata=draft.metadata,
        source_key=source_key,
        content_hash=memories.content_hash(draft.text),
        trust=draft.trust,
        flags=list(draft.flags),
        doc_len=doc_len,
        embedding=embedding,
        subject=draft.subject,
        parts=draft.parts,
    )
    if memory_id is None:
        existing = core_db.memory_by_source_key(conn, tenant_id=tenant_id, source_key=source_key)
        assert existing is not None  # the insert conflicted on this key, in this tenant
        return existing, False
    _write_terms(conn, tenant_id, agent_id, memory_id, tf, doc_len)
    event(
        conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id, event="created", reason=reason, actor=actor
    )
    return memory_id, True


def _write_terms(conn: Conn, tenant_id: UUID, agent_id: str, memory_id: UUID, tf: dict[str, int], doc_len: int) -> None:
    if tf:
        core_db.insert_terms(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            memory_id=memory_id,
            terms=list(tf),
            tfs=list(tf.values()),
            doc_len=doc_len,
        )


def event(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    memory_id: UUID | None,
    event: str,
    reason: str = "",
    actor: str = "system",
    related_ids: list[UUID] | None = None,
) -> None:
    """An audit row: ids and reasons, never memory text."""
    core_db.insert_event(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        event=event,
        reason=reason,
        actor=actor,
        related_ids=related_ids or [],
    )


def find_duplicate(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    text: str,
    embedding: np.ndarray,
    threshold: float,
    subject: str | None = None,
    restated: float | None = None,
) -> UUID | None:
    """The live memory that says the same thing: the same normalised text, or cosine >=
    threshold with the same numbers and most words shared, or (with `restated`) cosine >=
    restated with the same content words said otherwise (rules.confirms).

    Takes the agent's dedup lock first (db.dedup_lock, one per agent whatever the subject),
    held until the caller's transaction ends: the check and the insert that follows it are
    then atomic per agent (and so per subject), so two writers storing one sentence at once
    leave one memory (the second waits, then sees the first's)."""
    db.dedup_lock(conn, tenant_id, agent_id)
    dup = core_db.find_duplicate(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        content_hash=memories.content_hash(text),
        embedding=embedding,
        terms=sorted(set(tokens.tokenize(text))),
        probe_terms=DUPLICATE_PROBE_TERMS,
        per_term=CANDIDATE_POSTINGS,
        df_cap=DF_CAP,
        subject=subject,
    )
    # only the same subject's memories are candidates (None: the general ones); a text that
    # says the opposite (a knowledge update: roles swapped, negated, a value changed) is never
    # a confirmation, however close its words and vector: it is written, and governance
    # supersedes or reviews the old one; nor is a statement of what was, of what is
    if dup and rules.confirms(dup.text, text, dup.similarity, similarity=threshold, restated=restated):
        return dup.id
    return None


def get_memory(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID) -> memories.Memory:
    """Raises NotFound (also for another tenant's or agent's id)."""
    memory = core_db.get_memory(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    if memory is None:
        raise errors.NotFound("memory not found")
    return memory


def update_memory(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    memory_id: UUID,
    changes: dict[str, Any],
    embedding: np.ndarray | None,
) -> memories.Memory:
    """Apply a PATCH; a new text gets new postings and embedding. Raises NotFound."""
    text = changes.get("text")
    tf, doc_len = tokens.term_frequencies(text) if text is not None else ({}, None)
    memory = core_db.update_memory(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        text=text,
        kind=changes.get("kind"),
        tier=changes.get("tier"),
        salience=changes.get("salience"),
        confidence=changes.get("confidence"),
        metadata=changes.get("metadata"),
        set_expires="expires_at" in changes,
        expires_at=changes.get("expires_at"),
        content_hash=memories.content_hash(text) if text is not None else None,
        doc_len=doc_len,
        embedding=embedding,
        flags=changes.get("flags"),
    )
    if memory is None:
        raise errors.NotFound("memory not found")
    if text is not None:
        core_db.delete_terms(conn, memory_id=memory_id)
        _write_terms(conn, tenant_id, agent_id, memory_id, tf, doc_len or 0)
    event(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        event="updated",
        reason=",".join(sorted(changes)),
        actor="api",
    )
    return memory


def delete_memory(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID) -> None:
    """Delete a memory, its postings and connections (cascade). Raises NotFound."""
    if core_db.delete_memory(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id) is None:
        raise errors.NotFound("memory not found")
    event(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        event="forgotten",
        reason="deleted by api",
        actor="api",
    )


def list_memories(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    tier: str | None,
    kind: str | None,
    session_id: str | None,
    limit: int,
    after: tuple[datetime, UUID] | None,
    include_inactive: bool = False,
    metadata: dict[str, Any] | None = None,
    subject: str | None = None,
) -> list[memories.Memory]:
    return core_db.list_memories(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        tier=tier,
        kind=kind,
        session_id=session_id,
        metadata=metadata,
        limit=limit,
        include_inactive=include_inactive,
        after_created=after[0] if after else None,
        after_id=after[1] if after else None,
        subject=subject,
    )
