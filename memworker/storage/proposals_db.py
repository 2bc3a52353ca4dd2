"""Typed queries of queries/proposals.sql: sleep's proposals to shared pools, for review."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from memworker.storage import _sql


@dataclass(frozen=True, slots=True)
class Proposal:
    id: UUID
    pool: str
    agent_id: str  # the agent whose pass proposed it first
    memory_id: UUID  # its memory: the text a copy takes
    sources: list[str]  # 'memory:<agent>/<id>' of each agent that learnt it
    status: str  # open | approved | rejected
    pool_memory_id: UUID | None
    reason: str | None
    decided_by: str | None
    decided_at: datetime | None
    created_at: datetime
    updated_at: datetime
    text: str | None  # None once the proposing memory is gone
    kind: str | None
    live: bool


@dataclass(frozen=True, slots=True)
class Match:  # a proposal of the pool that may hold a fact already
    id: UUID
    status: str
    text: str | None  # its proposing memory's, None once that is gone
    similarity: float
    linked: bool  # it names one of the fact's memories, or has its hash: no words to confirm


# True: proposed; False: sources added to the open proposal; None: nothing changed.
upsert = _sql.Row[bool]("upsert", _sql.first)
find = _sql.Rows("find", Proposal)
lock_for_decision = _sql.Row("lock_for_decision", Proposal)
decide = _sql.Run("decide")
match = _sql.Rows("match", Match)
add_sources = _sql.Run("add_sources")  # 1 when a source was added
forget_sources = _sql.Rows[UUID]("forget_sources", _sql.first)  # the deleted proposals' ids
