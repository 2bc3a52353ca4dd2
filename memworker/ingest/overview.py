"""The operator's overviews: read-only counts the console draws (memories and episodes per agent,
the last hour's minutes, the LLM use of ingest and of sleep's passes) and the fleet's memory
estimates for the metrics. Each runs in the caller's transaction; agent_ids: the agents a key
limited to some may see (None: all)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from memworker.domain import memories
from memworker.storage import console_db, core_db
from memworker.storage.db import Conn

MemoryCount = console_db.MemoryCount
EpisodeCount = console_db.EpisodeCount
EpisodeMinute = console_db.EpisodeMinute
SleepUsage = console_db.ConsolidationUsage
IngestUsage = core_db.Usage
MemoryEstimate = console_db.MemoryEstimate


def memory_counts(conn: Conn, *, tenant_id: UUID, agent_ids: list[str] | None) -> list[MemoryCount]:
    """Live memories per agent, tier and kind."""
    return console_db.memory_counts(conn, tenant_id=tenant_id, agent_ids=agent_ids)


def agent_memories(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    tier: str | None,
    kind: str | None,
    flag: str | None,
    include_inactive: bool,
    limit: int,
    subject: str | None,
) -> list[memories.Memory]:
    """An agent's memories newest first, filtered as the console's list is (None: any);
    include_inactive: superseded and expired ones too."""
    return console_db.agent_memories(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        tier=tier,
        kind=kind,
        flag=flag,
        include_inactive=include_inactive,
        limit=limit,
        subject=subject,
    )


def episode_counts(conn: Conn, *, tenant_id: UUID, agent_ids: list[str] | None) -> list[EpisodeCount]:
    """Episodes per agent and status."""
    return console_db.episode_counts(conn, tenant_id=tenant_id, agent_ids=agent_ids)


def episode_minutes(
    conn: Conn, *, tenant_id: UUID, agent_ids: list[str] | None, since: datetime
) -> list[EpisodeMinute]:
    """Episodes accepted and stored per minute since `since` (only the minutes with some)."""
    return console_db.episode_minutes(conn, tenant_id=tenant_id, agent_ids=agent_ids, since=since)


def open_episodes(conn: Conn, *, tenant_id: UUID, agent_ids: list[str] | None) -> int:
    """Episodes waiting now: queued, processing or failed (to be retried)."""
    return console_db.open_episodes(conn, tenant_id=tenant_id, agent_ids=agent_ids)


def ingest_usage(conn: Conn, *, tenant_id: UUID, agent_ids: list[str] | None) -> list[IngestUsage]:
    """Each agent's episodes and the LLM use their reflection spent."""
    return core_db.usage(conn, tenant_id=tenant_id, agent_id=None, agent_ids=agent_ids)


def sleep_usage(conn: Conn, *, tenant_id: UUID, agent_ids: list[str] | None) -> list[SleepUsage]:
    """Each agent's consolidation passes and the LLM use they spent."""
    return console_db.consolidation_usage(conn, tenant_id=tenant_id, agent_ids=agent_ids)


def memory_estimates(conn: Conn) -> list[MemoryEstimate]:
    """Across tenants (a system transaction): the planner's estimate of live memories per tier
    and per kind, cheap enough for every metrics scrape."""
    return console_db.memory_estimates(conn)
