"""Typed queries of queries/portability.sql: an agent's (or a subject's) data read in keyset
pages for an export, and the restore's bulk writes (docs/export.md). The caller owns the
transaction and binds the tenant (db.tenant_tx). A `rows` parameter is a jsonb array of the
export's objects (wrap it with `rows()`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from memworker.storage import _sql


def rows(items: list[dict[str, Any]]) -> Jsonb:
    """A list of JSON objects as one jsonb parameter (a plain list would be a Postgres array)."""
    return Jsonb(items)


@dataclass(frozen=True, slots=True)
class Memory:  # a memories row, every column an export keeps (embedding: only when asked)
    id: UUID
    agent_id: str
    text: str
    kind: str
    tier: str
    salience: float
    confidence: float
    access_count: int
    last_access_at: datetime | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    valid_from: datetime
    valid_to: datetime | None
    superseded_by: UUID | None
    consolidated_at: datetime | None
    session_id: str | None
    entities: list[str]
    topics: list[str]
    provenance: list[str]
    metadata: dict[str, Any]
    source_key: str
    trust: str
    flags: list[str]
    confirmations: int
    confirmed_at: datetime | None
    decayed_at: datetime | None
    subject: str | None
    carried_by: UUID | None
    parts: int
    doc_len: int
    embedding: Any  # pgvector's Vector (None when not asked for)


@dataclass(frozen=True, slots=True)
class MemoryTerms:  # one memory's memory_terms rows, as two arrays
    memory_id: UUID
    terms: list[str]
    tfs: list[int]


@dataclass(frozen=True, slots=True)
class MemoryEvent:  # a memory_events row
    memory_id: UUID
    event: str
    reason: str
    actor: str
    related_ids: list[UUID]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryConnection:  # a memory_connections row
    id: int
    from_id: UUID
    to_id: UUID
    relationship: str
    insight_id: UUID | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryAlias:  # a memory_aliases row: a merged-away id and its survivor
    alias_id: UUID
    memory_id: UUID
    created_at: datetime


@dataclass(frozen=True, slots=True)
class MemoryReview:  # a memory_reviews row
    id: UUID
    memory_id: UUID
    other_id: UUID
    reason: str
    status: str
    resolution: str | None
    resolved_by: str | None
    resolved_at: datetime | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Episode:  # an episodes row, without the worker's bookkeeping (leases, token counts)
    id: UUID
    agent_id: str
    session_id: str | None
    idempotency_key: str | None
    content: str
    messages: Any
    metadata: dict[str, Any]
    occurred_at: datetime
    created_at: datetime
    status: str
    attempts: int
    last_error: str | None
    stored_at: datetime | None
    memory_ids: list[UUID]
    reflection: Any
    reflector: str | None
    subject: str | None


@dataclass(frozen=True, slots=True)
class SessionItem:  # a session_items row: one raw item of a session's log
    agent_id: str
    session_id: str
    position: int
    item: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Session:  # a sessions row: working memory, plan, context use
    agent_id: str
    id: str
    status: str
    metadata: dict[str, Any]
    working: dict[str, Any]
    plan: dict[str, Any] | None
    revision: int
    window_tokens: int | None
    log_tokens: int
    last_context_tokens: int
    reported_used: float | None
    flush_armed: bool
    flush_count: int
    flushed_at: datetime | None
    flushed_revision: int
    last_flush_episode_id: UUID | None
    archive_count: int
    created_at: datetime
    updated_at: datetime
    archived_at: datetime | None
    restored_at: datetime | None
    subject: str | None


@dataclass(frozen=True, slots=True)
class AgentProfile:  # an agent_profiles row
    version: int
    document: dict[str, Any]
    created_at: datetime


export_memories = _sql.Rows("export_memories", Memory, subject=None, after_created=None, after_id=None)
export_terms = _sql.Rows("export_terms", MemoryTerms)
export_events = _sql.Rows("export_events", MemoryEvent)
export_connections = _sql.Rows("export_connections", MemoryConnection)
export_aliases = _sql.Rows("export_aliases", MemoryAlias)
export_reviews = _sql.Rows("export_reviews", MemoryReview)
export_episodes = _sql.Rows("export_episodes", Episode, subject=None, after_created=None, after_id=None)
export_sessions = _sql.Rows("export_sessions", Session, subject=None, after_id=None)
# after (session, position): ("", -1) before the first
export_session_items = _sql.Rows("export_session_items", SessionItem, subject=None)
export_profiles = _sql.Rows("export_profiles", AgentProfile)
agent_policy = _sql.Row[dict[str, Any]]("agent_policy", _sql.first)
subject_agents = _sql.Rows[str]("subject_agents", _sql.first)

restore_memories = _sql.Rows[UUID]("restore_memories", _sql.first)
restore_terms = _sql.Run("restore_terms")
restore_events = _sql.Run("restore_events")
restore_supersedes = _sql.Run("restore_supersedes")
restore_connections = _sql.Run("restore_connections")
restore_aliases = _sql.Run("restore_aliases")
restore_reviews = _sql.Run("restore_reviews")
restore_episodes = _sql.Rows[UUID]("restore_episodes", _sql.first)
restore_sessions = _sql.Rows[str]("restore_sessions", _sql.first)
restore_session_items = _sql.Rows[int]("restore_session_items", _sql.first)
restore_profiles = _sql.Rows[int]("restore_profiles", _sql.first)
merge_agent_policy = _sql.Run("merge_agent_policy")
