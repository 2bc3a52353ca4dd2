"""Typed queries of queries/sleep.sql: consolidation runs, the agents' gates, passes, profiles."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.rows import tuple_row

from memworker.storage import _sql, core_db


@dataclass(frozen=True, slots=True)
class Run:
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
class WindowMemory(core_db.PoolSource):  # a memory as a pass reads it
    created_at: datetime
    access_count: int
    last_access_at: datetime | None


claim_due_agents = _sql.Rows[tuple[UUID, str, UUID, str]]("claim_due_agents", tuple_row)  # tenant, agent, run, trigger
flagged_count = _sql.One[int]("flagged_count", _sql.first)
superseded_sources = _sql.Rows[str]("superseded_sources", _sql.first)
run_insert = _sql.Row[UUID]("run_insert", _sql.first)  # None: run_key was used before
run_by_key = _sql.Row[UUID]("run_by_key", _sql.first)
run_start = _sql.Row[UUID]("run_start", _sql.first)  # None: finished already
run_requeue = _sql.Run("run_requeue")
run_get = _sql.Row("run_get", Run)
run_finish = _sql.Run("run_finish")
runs_supersede = _sql.Run("runs_supersede")
runs_list = _sql.Rows("runs_list", Run)
agent_gates = _sql.Row("agent_gates", AgentGates)
gates = _sql.Rows("gates", AgentGates, agent_ids=None)
pass_done = _sql.Run("pass_done")
pass_failed = _sql.Row[int]("pass_failed", _sql.first)  # failures in a row now; None: no such agent
request_pass = _sql.Run("request_pass")
session_ended = _sql.Run("session_ended")
# value: a Jsonb (None removes the field); the new overrides; None: no such agent or tenant.
set_agent_policy_field = _sql.Row[dict[str, Any]]("set_agent_policy_field", _sql.first)
set_tenant_policy_field = _sql.Row[dict[str, Any]]("set_tenant_policy_field", _sql.first)
pass_window = _sql.Rows("pass_window", WindowMemory)
distil_carry = _sql.Run("distil_carry")
waiting = _sql.One[int]("waiting", _sql.first)  # counted up to limit
set_metadata = _sql.Run("set_metadata")  # rows: a Jsonb list of {"id", "entities", "topics"}
# The new ones: (from_id, to_id, relationship).
insert_connections = _sql.Rows[tuple[UUID, UUID, str]]("insert_connections", tuple_row)
rerate = _sql.Rows[UUID]("rerate", _sql.first)  # the ids whose salience went up
mark_consolidated = _sql.Run("mark_consolidated")
profile = _sql.Row[dict[str, Any]]("profile", _sql.first, version=None)
profile_insert = _sql.Run("profile_insert")
profile_prune_versions = _sql.Run("profile_prune_versions")
profile_sources = _sql.Rows("profile_sources", WindowMemory)


@dataclass(frozen=True, slots=True)
class Derived:
    """A live memory sleep built from another (queries/sleep.sql: derived_of)."""

    id: UUID
    kind: str  # insight | conclusion | summary
    evidence: list[str]  # an insight's or conclusion's evidence ids (a summary: empty)


derived_of = _sql.Rows("derived_of", Derived)  # locked, oldest first
derived_retire = _sql.Rows[UUID]("derived_retire", _sql.first)
derived_mark = _sql.Rows[UUID]("derived_mark", _sql.first)  # mark: a Jsonb list of one entry
derived_requeue = _sql.Rows[UUID]("derived_requeue", _sql.first)
profile_live = _sql.Rows[UUID]("profile_live", _sql.first)
