"""Typed queries of queries/console.sql: the operator's console's overviews (agents and their
memory counts, episodes by status and by minute, consolidation LLM use). One function per
`-- name:` block, named like it; rows come back as frozen dataclasses, memories as
memworker.memories.Memory.

The caller owns the transaction and binds the tenant (db.tenant_tx). agent_ids: the agents a
key limited to some may see; None for all the tenant's agents."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from memworker import memories
from memworker.storage import _sql
from memworker.storage.db import Conn


@dataclass(frozen=True, slots=True)
class Agent:
    agent_id: str
    created_at: datetime
    last_episode_at: datetime | None
    last_consolidated_at: datetime | None


@dataclass(frozen=True, slots=True)
class MemoryCount:
    agent_id: str
    tier: str
    kind: str
    n: int


@dataclass(frozen=True, slots=True)
class EpisodeCount:
    agent_id: str
    status: str
    n: int


@dataclass(frozen=True, slots=True)
class EpisodeSource:
    id: UUID
    agent_id: str
    session_id: str | None
    status: str
    content: str
    messages: Any
    created_at: datetime


@dataclass(frozen=True, slots=True)
class EpisodeMinute:
    """Episodes accepted (and of those, not dead now) and stored in one minute."""

    minute: datetime
    accepted: int
    accepted_kept: int
    stored: int


@dataclass(frozen=True, slots=True)
class ConsolidationUsage:
    agent_id: str
    runs: int
    llm_calls: int
    tokens_in: int
    tokens_out: int


def console_agents(conn: Conn, *, tenant_id: UUID, agent_ids: list[str] | None) -> list[Agent]:
    return [Agent(**r) for r in _sql.all_(conn, "console_agents", tenant_id=tenant_id, agent_ids=agent_ids)]


def console_memory_counts(conn: Conn, *, tenant_id: UUID, agent_ids: list[str] | None) -> list[MemoryCount]:
    rows = _sql.all_(conn, "console_memory_counts", tenant_id=tenant_id, agent_ids=agent_ids)
    return [MemoryCount(**r) for r in rows]


def console_memories(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    tier: str | None,
    kind: str | None,
    flag: str | None,
    include_inactive: bool,
    limit: int,
    subject: str | None = None,
) -> list[memories.Memory]:
    """Newest first; subject: only that subject's."""
    rows = _sql.all_(
        conn,
        "console_memories",
        tenant_id=tenant_id,
        agent_id=agent_id,
        tier=tier,
        kind=kind,
        flag=flag,
        include_inactive=include_inactive,
        limit=limit,
        subject=subject,
    )
    return [memories.Memory.from_row(r) for r in rows]


def console_episode_counts(conn: Conn, *, tenant_id: UUID, agent_ids: list[str] | None) -> list[EpisodeCount]:
    rows = _sql.all_(conn, "console_episode_counts", tenant_id=tenant_id, agent_ids=agent_ids)
    return [EpisodeCount(**r) for r in rows]


def console_episode_source(conn: Conn, *, tenant_id: UUID, agent_id: str, episode_id: UUID) -> EpisodeSource | None:
    row = _sql.one(conn, "console_episode_source", tenant_id=tenant_id, agent_id=agent_id, episode_id=episode_id)
    return EpisodeSource(**row) if row else None


def console_episode_minutes(
    conn: Conn, *, tenant_id: UUID, agent_ids: list[str] | None, since: datetime
) -> list[EpisodeMinute]:
    """Only the minutes with something in them, oldest first."""
    rows = _sql.all_(conn, "console_episode_minutes", tenant_id=tenant_id, agent_ids=agent_ids, since=since)
    return [EpisodeMinute(**r) for r in rows]


def console_open_episodes(conn: Conn, *, tenant_id: UUID, agent_ids: list[str] | None) -> int:
    row = _sql.one(conn, "console_open_episodes", tenant_id=tenant_id, agent_ids=agent_ids)
    return int(row["n"]) if row else 0


def console_consolidation_usage(
    conn: Conn, *, tenant_id: UUID, agent_ids: list[str] | None
) -> list[ConsolidationUsage]:
    rows = _sql.all_(conn, "console_consolidation_usage", tenant_id=tenant_id, agent_ids=agent_ids)
    return [ConsolidationUsage(**r) for r in rows]
