"""Typed queries of queries/console.sql: the console's overviews, the fleet's memory estimates."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memworker.domain import memories
from memworker.storage import _sql, core_db


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
class EpisodeMinute:  # episodes accepted (and of those, not dead now) and stored in one minute
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


@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    attribute: str  # tier or kind
    value: str
    estimate: float


memory_counts = _sql.Rows("memory_counts", MemoryCount)
agent_memories = _sql.Rows("agent_memories", _sql.via(memories.Memory.from_row), subject=None)  # newest first
episode_counts = _sql.Rows("episode_counts", EpisodeCount)
episode_source = _sql.Row("episode_source", core_db.ClaimedEpisode)
episode_minutes = _sql.Rows("episode_minutes", EpisodeMinute)  # the minutes with something in them
open_episodes = _sql.One[int]("open_episodes", _sql.first)
consolidation_usage = _sql.Rows("consolidation_usage", ConsolidationUsage)
memory_estimates = _sql.Rows("memory_estimates", MemoryEstimate)
