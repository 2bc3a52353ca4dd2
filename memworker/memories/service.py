"""The memories capability's use cases: direct writes (recallable when the call returns),
reads, pages, changes and deletes of an owner's memories (an agent's, or a pool's by its
owner id). The caller checks scopes and owns the transaction."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np

from memworker import errors, schemas
from memworker.domain import memories, redact
from memworker.lifecycle import governance
from memworker.memories import copies, writer
from memworker.models.embeddings import Embedder
from memworker.schemas import MemoryIn, MemoryOut, MemoryPatch
from memworker.settings import Settings
from memworker.storage import core_db, store
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy


def check_text(text: str) -> None:
    """Raises InvalidInput for a blank text or one over the 280-character limit."""
    problem = memories.text_problem(text)
    if problem:
        raise errors.InvalidInput(problem)


def check_metadata(settings: Settings, value: dict[str, Any] | None, what: str = "metadata") -> None:
    """InvalidInput for a free-form JSON object over the process's depth or size limit."""
    schemas.check_metadata(
        value, max_depth=settings.max_metadata_depth, max_bytes=settings.max_metadata_bytes, what=what
    )


def memory_out(m: memories.Memory, pool: str | None = None) -> MemoryOut:
    """A memory as reads and writes answer it; a pool's names its pool."""
    out = MemoryOut(
        id=m.id,
        agent_id=m.agent_id,
        text=m.text,
        kind=m.kind,
        tier=m.tier,
        salience=round(m.salience, 4),
        confidence=round(m.confidence, 4),
        access_count=m.access_count,
        metadata=m.metadata,
        created_at=m.created_at.isoformat(),
        provenance=m.provenance,
        session_id=m.session_id,
        entities=m.entities,
        topics=m.topics,
        expires_at=m.expires_at.isoformat() if m.expires_at else None,
        superseded_by=m.superseded_by,
        flags=m.flags,
        trust=m.trust,
        subject=m.subject,
    )
    if pool is not None:
        out["pool"] = pool
    return out


def source_key(owner: str, subject: str | None, idempotency_key: str | None) -> str:
    """The source key of a direct write. Source keys are unique per tenant, so the key names the
    owner (a pool by its owner id, 'pool~<name>') and the subject: one agent's or subject's
    idempotency key never answers (or blocks) another's write. No two (owner, subject, key)
    spell one source key: a subject's write is tagged 'api-subject:' and a general one 'api:',
    and '/' is in neither the agent-id nor the subject alphabet, so the first '/'s end the
    owner and the subject whatever the key holds. Without an idempotency key: a random one,
    never seen again."""
    if idempotency_key is None:
        return f"api:{os.urandom(12).hex()}"
    if subject is None:
        return f"api:{owner}/{idempotency_key}"
    return f"api-subject:{owner}/{subject}/{idempotency_key}"


@dataclass(frozen=True)
class Batch:
    """Direct writes checked and embedded, before their transaction (no pooled connection
    waits on the model)."""

    bodies: tuple[MemoryIn, ...]
    vectors: tuple[np.ndarray, ...]


def checked(bodies: Sequence[MemoryIn], *, settings: Settings, embedder: Embedder) -> Batch:
    """The bodies checked (PayloadTooLarge over the batch limit; InvalidInput for a text or
    metadata out of bounds) and embedded."""
    if len(bodies) > settings.max_batch:
        raise errors.PayloadTooLarge(f"at most {settings.max_batch} memories per batch")
    for b in bodies:
        check_text(b.text)
        check_metadata(settings, b.metadata)
    return Batch(tuple(bodies), tuple(embedder.embed([b.text for b in bodies])))


def write(conn: Conn, *, tenant_id: UUID, owner: str, batch: Batch, embedder: Embedder) -> list[memories.Memory]:
    """Direct writes to an agent (created on first use) or a pool (its owner id; created on
    first use): redacted like an episode when the owner's policy says so (a text that changed
    embedded again), idempotent per (owner, subject, idempotency key), governed (a fact a new
    memory changes is superseded, or the contradiction queued for review). Answers each
    memory as stored (the first write's, for an idempotency key seen before)."""
    if memories.pool_of(owner) is None:
        tenancy.ensure_agent(conn, tenant_id=tenant_id, agent_id=owner)
    else:
        core_db.ensure_agent(conn, tenant_id=tenant_id, agent_id=owner)
    policy = tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=owner)
    entries = [
        writer.Entry(
            memories.Draft(
                text=b.text,
                kind=b.kind,
                tier=b.tier,
                salience=b.salience,
                confidence=b.confidence,
                metadata=b.metadata,
                provenance=("api",),
                flags=memories.flags_for(b.text),
                trust="api",
                expires_at=b.expires_at or store.expiry(conn, policy, b.tier),
                subject=b.subject,
            ),
            vec,
            source_key(owner, b.subject, b.idempotency_key),
            b.session_id,
        )
        for b, vec in zip(batch.bodies, batch.vectors, strict=True)
    ]
    written = writer.write(
        conn,
        tenant_id=tenant_id,
        owner=owner,
        entries=entries,
        policy=policy,
        actor="api",
        redact_pii=True,
        embed=lambda texts: list(embedder.embed(texts)),
    )
    return [store.get_memory(conn, tenant_id=tenant_id, agent_id=owner, memory_id=w.id) for w in written]


def get(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID) -> memories.Memory:
    """The memory; a merged-away id answers its survivor. Raises NotFound."""
    memory_id = governance.resolve(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    return store.get_memory(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)


@dataclass(frozen=True)
class Filters:
    """Which of an owner's memories a page lists (None: any)."""

    subject: str | None = None
    tier: str | None = None
    kind: str | None = None
    session_id: str | None = None
    metadata: dict[str, Any] | None = None  # only memories whose metadata contains it (jsonb @>)


@dataclass(frozen=True)
class Page:
    """One page of memories, newest first; after: where the next page starts, None when this
    page is not full (no page follows)."""

    items: list[memories.Memory]
    after: tuple[datetime, str] | None


def page(
    conn: Conn,
    *,
    tenant_id: UUID,
    owner: str,
    limit: int,
    after: tuple[datetime, UUID] | None,
    filters: Filters = Filters(),
) -> Page:
    """One page of an owner's (an agent's or a pool's) memories, newest first."""
    items = store.list_memories(
        conn,
        tenant_id=tenant_id,
        agent_id=owner,
        tier=filters.tier,
        kind=filters.kind,
        session_id=filters.session_id,
        metadata=filters.metadata,
        limit=limit,
        after=after,
        subject=filters.subject,
    )
    return Page(items, (items[-1].created_at, items[-1].id) if len(items) == limit else None)


def agent_page(
    conn: Conn, *, tenant_id: UUID, agent_id: str, limit: int, after: tuple[datetime, UUID] | None, filters: Filters
) -> Page:
    """page() of an agent's memories. Raises NotFound for an agent that does not exist."""
    tenancy.require_agent(conn, tenant_id=tenant_id, agent_id=agent_id)
    return page(conn, tenant_id=tenant_id, owner=agent_id, limit=limit, after=after, filters=filters)


@dataclass(frozen=True)
class Change:
    """A PATCH checked and its new text embedded, before its transaction."""

    changes: dict[str, Any]  # null clears expires_at; every other field present is set
    embedding: np.ndarray | None


def change(body: MemoryPatch, *, settings: Settings, embedder: Embedder) -> Change:
    """The patch's changes (null means "no change" but for expires_at, which it clears),
    checked: InvalidInput for nothing to change, a text or metadata out of bounds."""
    changes = {k: v for k, v in body.model_dump(exclude_unset=True).items() if v is not None or k == "expires_at"}
    if not changes:
        raise errors.InvalidInput("nothing to change")
    check_metadata(settings, changes.get("metadata"))
    vec = None
    if "text" in changes:
        check_text(changes["text"])
        vec = embedder.embed([changes["text"]])[0]
    return Change(changes, vec)


def update(
    conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID, change: Change, embedder: Embedder
) -> memories.Memory:
    """Apply a checked PATCH, redacted like a write when the agent's policy says so (a text
    that changed embedded again); a new text gets its flags. Raises NotFound."""
    changes, vec = dict(change.changes), change.embedding
    if tenancy.policy_for(conn, tenant_id=tenant_id, agent_id=agent_id).redact_pii:
        raw = changes.get("text")
        changes.update({k: redact.redact_value(changes[k]) for k in ("text", "metadata") if k in changes})
        if raw is not None and changes["text"] != raw:
            vec = embedder.embed([changes["text"]])[0]
    if "text" in changes:
        changes["flags"] = list(memories.flags_for(changes["text"]))
    return store.update_memory(
        conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id, changes=changes, embedding=vec
    )


def delete(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID) -> None:
    """Delete the agent's memory and its copies in shared pools (and the proposals naming it).
    Raises NotFound."""
    store.delete_memory(conn, tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    copies.forget_copies(conn, tenant_id=tenant_id, agent_id=agent_id, memory_ids=[memory_id])
    copies.forget_proposals(conn, tenant_id=tenant_id, agent_id=agent_id, memory_ids=[memory_id])
