"""The fleet's statements (queries.sql here), typed: the tenant's agents and what they hold, the holders of
a subject, and what an agent's erase removes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from memworker.storage import _sql


@dataclass(frozen=True, slots=True)
class AgentSummary:  # an agents row with its counts
    agent_id: str
    created_at: datetime
    memories: int  # live, turns aside
    turns: int  # live turns
    episodes: int
    sessions: int
    last_activity_at: datetime


@dataclass(frozen=True, slots=True)
class SubjectHeld:  # what one agent holds of one subject
    subject: str
    memories: int
    turns: int
    episodes: int
    sessions: int
    last_activity_at: datetime


@dataclass(frozen=True, slots=True)
class AgentCounts:  # the rows of one agent, per table
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


agent_page = _sql.Rows("agent_page", AgentSummary)
agent_subjects = _sql.Rows("agent_subjects", SubjectHeld)
subject_holders = _sql.Rows[str]("subject_holders", _sql.first)
hold_episodes = _sql.Rows[UUID]("hold_episodes", _sql.first)
hold_agent = _sql.Row[str]("hold_agent", _sql.first)
agent_memory_ids = _sql.Rows[UUID]("agent_memory_ids", _sql.first)
agent_counts = _sql.One("agent_counts", AgentCounts)
delete_webhook_deliveries = _sql.Run("delete_webhook_deliveries")
delete_events = _sql.Run("delete_events")
delete_agent = _sql.Run("delete_agent")
