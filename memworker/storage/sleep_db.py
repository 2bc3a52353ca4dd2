"""Typed queries of queries/sleep.sql: consolidation runs, the agents' consolidation gates,
the pass's reads and writes, profiles. One function per `-- name:` block, named like it;
rows come back as frozen dataclasses.

The caller owns the transaction and binds the tenant (db.tenant_tx); the cross-tenant ones
(claim_due_agents, consolidation_flagged_count) go through SECURITY DEFINER functions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from memworker.storage import _sql
from memworker.storage.db import Conn


@dataclass(frozen=True, slots=True)
class DueAgent:
    tenant_id: UUID
    agent_id: str
    run_id: UUID
    trigger: str


@dataclass(frozen=True, slots=True)
class Run:
    """A consolidation_runs row."""

    id: UUID
    tenant_id: UUID
    agent_id: str
    run_key: str
    trigger: str
    status: str
    started_at: datetime
    finished_at: datetime | None
    items_reviewed: int
    connections_made: int
    insights_written: int
    conclusions_written: int
    salience_rerated: int
    skipped_reason: str | None
    error: str | None
    llm_calls: int
    tokens_in: int
    tokens_out: int
    duration_ms: int | None
    report: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class RunListing:
    """A run as listed (no tenant_id)."""

    id: UUID
    agent_id: str
    run_key: str
    trigger: str
    status: str
    created_at: datetime
    started_at: datetime
    finished_at: datetime | None
    items_reviewed: int
    connections_made: int
    insights_written: int
    conclusions_written: int
    salience_rerated: int
    skipped_reason: str | None
    error: str | None
    llm_calls: int
    tokens_in: int
    tokens_out: int
    duration_ms: int | None
    report: dict[str, Any]


@dataclass(frozen=True, slots=True)
class AgentGates:
    """An agent's policy overrides and consolidation gates."""

    agent_id: str
    policy: dict[str, Any]
    created_at: datetime
    last_episode_at: datetime | None
    last_consolidated_at: datetime | None
    last_pass_at: datetime | None
    sessions_since_pass: int
    consolidation_requested: bool
    consolidation_failures: int
    consolidation_last_error: str | None
    next_consolidation_at: datetime | None


@dataclass(frozen=True, slots=True)
class WindowMemory:
    """A memory of a pass's window."""

    id: UUID
    text: str
    kind: str
    tier: str
    salience: float
    confidence: float
    created_at: datetime
    access_count: int
    last_access_at: datetime | None
    entities: list[str]
    topics: list[str]
    flags: list[str]
    embedding: Any  # pgvector: a numpy array or a Vector
    provenance: list[str]
    metadata: dict[str, Any]
    subject: str | None = None


@dataclass(frozen=True, slots=True)
class MadeConnection:
    from_id: UUID
    to_id: UUID
    relationship: str


@dataclass(frozen=True, slots=True)
class ProfileVersion:
    version: int
    document: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SourceEmbedding:
    id: UUID
    embedding: Any  # pgvector: a numpy array or a Vector


# --- the sweep and runs --------------------------------------------------------------------------


def claim_due_agents(
    conn: Conn, *, window: datetime, defaults: dict[str, Any], lease_s: int, limit: int
) -> list[DueAgent]:
    """Across tenants: claim the agents due for a pass in this window (one queued run each)."""
    rows = _sql.all_(conn, "claim_due_agents", window=window, defaults=Jsonb(defaults), lease_s=lease_s, limit=limit)
    return [DueAgent(**r) for r in rows]


def consolidation_flagged_count(conn: Conn, *, threshold: int) -> int:
    """Across tenants: agents whose passes failed `threshold` times or more in a row."""
    row = _sql.one(conn, "consolidation_flagged_count", threshold=threshold)
    return int(row["n"]) if row else 0


def consolidation_run_insert(conn: Conn, *, tenant_id: UUID, agent_id: str, run_key: str, trigger: str) -> UUID | None:
    """The new run's id; None when run_key was used before."""
    row = _sql.one(
        conn, "consolidation_run_insert", tenant_id=tenant_id, agent_id=agent_id, run_key=run_key, trigger=trigger
    )
    return row["id"] if row else None


def consolidation_run_by_key(conn: Conn, *, tenant_id: UUID, agent_id: str, run_key: str) -> UUID | None:
    row = _sql.one(conn, "consolidation_run_by_key", tenant_id=tenant_id, agent_id=agent_id, run_key=run_key)
    return row["id"] if row else None


def consolidation_run_start(conn: Conn, *, tenant_id: UUID, agent_id: str, run_id: UUID) -> UUID | None:
    """None when the run is finished already (or not this tenant's and agent's)."""
    row = _sql.one(conn, "consolidation_run_start", tenant_id=tenant_id, agent_id=agent_id, run_id=run_id)
    return row["id"] if row else None


def consolidation_run_requeue(conn: Conn, *, tenant_id: UUID, run_id: UUID) -> int:
    return _sql.run(conn, "consolidation_run_requeue", tenant_id=tenant_id, run_id=run_id)


def consolidation_run_get(conn: Conn, *, tenant_id: UUID, agent_id: str, run_id: UUID) -> Run | None:
    row = _sql.one(conn, "consolidation_run_get", tenant_id=tenant_id, agent_id=agent_id, run_id=run_id)
    return Run(**row) if row else None


def consolidation_run_finish(
    conn: Conn,
    *,
    tenant_id: UUID,
    run_id: UUID,
    status: str,
    items_reviewed: int,
    connections_made: int,
    insights_written: int,
    conclusions_written: int,
    salience_rerated: int,
    skipped_reason: str | None,
    error: str | None,
    llm_calls: int,
    tokens_in: int,
    tokens_out: int,
    duration_ms: int,
    report: dict[str, Any],
) -> int:
    return _sql.run(
        conn,
        "consolidation_run_finish",
        tenant_id=tenant_id,
        run_id=run_id,
        status=status,
        items_reviewed=items_reviewed,
        connections_made=connections_made,
        insights_written=insights_written,
        conclusions_written=conclusions_written,
        salience_rerated=salience_rerated,
        skipped_reason=skipped_reason,
        error=error,
        llm_calls=llm_calls,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        duration_ms=duration_ms,
        report=Jsonb(report),
    )


def consolidation_runs_supersede(conn: Conn, *, tenant_id: UUID, agent_id: str, run_id: UUID) -> int:
    return _sql.run(conn, "consolidation_runs_supersede", tenant_id=tenant_id, agent_id=agent_id, run_id=run_id)


def consolidation_runs_list(conn: Conn, *, tenant_id: UUID, agent_id: str, limit: int) -> list[RunListing]:
    """Newest first."""
    rows = _sql.all_(conn, "consolidation_runs_list", tenant_id=tenant_id, agent_id=agent_id, limit=limit)
    return [RunListing(**r) for r in rows]


# --- the agents' gates ---------------------------------------------------------------------------


def consolidation_agent(conn: Conn, *, tenant_id: UUID, agent_id: str) -> AgentGates | None:
    row = _sql.one(conn, "consolidation_agent", tenant_id=tenant_id, agent_id=agent_id)
    return AgentGates(**row) if row else None


def consolidation_agents(conn: Conn, *, tenant_id: UUID) -> list[AgentGates]:
    return [AgentGates(**r) for r in _sql.all_(conn, "consolidation_agents", tenant_id=tenant_id)]


def consolidation_agent_done(conn: Conn, *, tenant_id: UUID, agent_id: str, consolidated: bool, requested: bool) -> int:
    return _sql.run(
        conn,
        "consolidation_agent_done",
        tenant_id=tenant_id,
        agent_id=agent_id,
        consolidated=consolidated,
        requested=requested,
    )


def consolidation_agent_failed(
    conn: Conn, *, tenant_id: UUID, agent_id: str, error: str | None, backoff_s: float
) -> int | None:
    """The agent's failures in a row now; None when there is no such agent."""
    row = _sql.one(
        conn, "consolidation_agent_failed", tenant_id=tenant_id, agent_id=agent_id, error=error, backoff_s=backoff_s
    )
    return int(row["consolidation_failures"]) if row else None


def consolidation_request(conn: Conn, *, tenant_id: UUID, agent_id: str) -> int:
    return _sql.run(conn, "consolidation_request", tenant_id=tenant_id, agent_id=agent_id)


def session_ended(conn: Conn, *, tenant_id: UUID, agent_id: str) -> int:
    return _sql.run(conn, "session_ended", tenant_id=tenant_id, agent_id=agent_id)


def set_agent_policy_field(
    conn: Conn, *, tenant_id: UUID, agent_id: str, field: str, value: Any
) -> dict[str, Any] | None:
    """Set one field of the agent's policy overrides to a JSON value (None removes it); the
    new overrides, None when there is no such agent."""
    row = _sql.one(
        conn,
        "set_agent_policy_field",
        tenant_id=tenant_id,
        agent_id=agent_id,
        field=field,
        value=None if value is None else Jsonb(value),
    )
    return row["policy"] if row else None


def set_tenant_policy_field(conn: Conn, *, tenant_id: UUID, field: str, value: Any) -> dict[str, Any] | None:
    """Like set_agent_policy_field, for the tenant's overrides."""
    row = _sql.one(
        conn, "set_tenant_policy_field", tenant_id=tenant_id, field=field, value=None if value is None else Jsonb(value)
    )
    return row["policy"] if row else None


# --- a pass's reads and writes -------------------------------------------------------------------


def consolidation_window(conn: Conn, *, tenant_id: UUID, agent_id: str, limit: int) -> list[WindowMemory]:
    rows = _sql.all_(conn, "consolidation_window", tenant_id=tenant_id, agent_id=agent_id, limit=limit)
    return [WindowMemory(**r) for r in rows]


def distil_carry(conn: Conn, *, tenant_id: UUID, agent_id: str, turn_ids: list[str], summary_ids: list[str]) -> int:
    """Point each turn at the summary that carries it; how many turns were marked."""
    return _sql.run(
        conn, "distil_carry", tenant_id=tenant_id, agent_id=agent_id, turn_ids=turn_ids, summary_ids=summary_ids
    )


def consolidation_waiting(conn: Conn, *, tenant_id: UUID, agent_id: str, limit: int) -> int:
    """Unconsolidated live memories, counted up to limit."""
    row = _sql.one(conn, "consolidation_waiting", tenant_id=tenant_id, agent_id=agent_id, limit=limit)
    return int(row["n"]) if row else 0


def consolidation_set_metadata(conn: Conn, *, tenant_id: UUID, agent_id: str, rows: list[dict[str, Any]]) -> int:
    """rows: {"id", "entities", "topics"} each."""
    return _sql.run(conn, "consolidation_set_metadata", tenant_id=tenant_id, agent_id=agent_id, rows=Jsonb(rows))


def consolidation_insert_connections(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    insight_id: UUID | None,
    from_ids: list[str],
    to_ids: list[str],
    relationships: list[str],
) -> list[MadeConnection]:
    """The connections that were new."""
    rows = _sql.all_(
        conn,
        "consolidation_insert_connections",
        tenant_id=tenant_id,
        agent_id=agent_id,
        insight_id=insight_id,
        from_ids=from_ids,
        to_ids=to_ids,
        relationships=relationships,
    )
    return [MadeConnection(**r) for r in rows]


def consolidation_rerate(
    conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[str], bumps: list[float]
) -> list[UUID]:
    """The ids whose salience went up."""
    rows = _sql.all_(conn, "consolidation_rerate", tenant_id=tenant_id, agent_id=agent_id, ids=ids, bumps=bumps)
    return [r["id"] for r in rows]


def consolidation_mark(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[str]) -> int:
    return _sql.run(conn, "consolidation_mark", tenant_id=tenant_id, agent_id=agent_id, ids=ids)


# --- profiles --------------------------------------------------------------------------------------


def profile_latest(conn: Conn, *, tenant_id: UUID, agent_id: str) -> ProfileVersion | None:
    row = _sql.one(conn, "profile_latest", tenant_id=tenant_id, agent_id=agent_id)
    return ProfileVersion(**row) if row else None


def profile_version(conn: Conn, *, tenant_id: UUID, agent_id: str, version: int) -> ProfileVersion | None:
    row = _sql.one(conn, "profile_version", tenant_id=tenant_id, agent_id=agent_id, version=version)
    return ProfileVersion(**row) if row else None


def profile_insert(
    conn: Conn, *, tenant_id: UUID, agent_id: str, version: int, document: dict[str, Any], run_id: UUID | None
) -> int:
    return _sql.run(
        conn,
        "profile_insert",
        tenant_id=tenant_id,
        agent_id=agent_id,
        version=version,
        document=Jsonb(document),
        run_id=run_id,
    )


def profile_prune_versions(conn: Conn, *, tenant_id: UUID, agent_id: str, below: int) -> int:
    return _sql.run(conn, "profile_prune_versions", tenant_id=tenant_id, agent_id=agent_id, below=below)


def profile_sources(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[str]) -> list[SourceEmbedding]:
    rows = _sql.all_(conn, "profile_sources", tenant_id=tenant_id, agent_id=agent_id, ids=ids)
    return [SourceEmbedding(**r) for r in rows]
