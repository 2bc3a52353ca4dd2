"""The lifecycle's statements (queries.sql here), typed: confirmation, promotion, supersede, reviews, merge,
history, policy overrides, the retention sweep and forget. One runner per `-- name:` block,
named like it; rows come back as frozen dataclasses.

The caller owns the transaction and binds the tenant (db.tenant_tx). The clock is always a
parameter (now), never the SQL now(): tests move it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from memworker.domain import memories
from memworker.storage import _sql
from memworker.storage.sessions_db import TenantAgent


# What confirmation and promotion judge a memory by.
@dataclass(frozen=True, slots=True)
class MemoryState:
    id: UUID
    tier: str
    kind: str
    confidence: float
    salience: float
    access_count: int
    confirmations: int
    expires_at: datetime | None
    valid_to: datetime | None
    provenance: list[str]


# A review with both memories' text and state (memory_*: the newer, other_*: the older).
@dataclass(frozen=True, slots=True)
class Review:
    id: UUID
    memory_id: UUID
    other_id: UUID
    reason: str
    status: str
    resolution: str | None
    resolved_by: str | None
    resolved_at: datetime | None
    created_at: datetime
    memory_text: str
    memory_tier: str
    memory_confidence: float
    memory_created_at: datetime
    memory_valid_to: datetime | None
    other_text: str
    other_tier: str
    other_confidence: float
    other_created_at: datetime
    other_valid_to: datetime | None


# A memory of a supersede chain; depth < 0 older, 0 the one asked about, > 0 newer.
@dataclass(frozen=True, slots=True)
class Version:
    id: UUID
    text: str
    kind: str
    tier: str
    confidence: float
    salience: float
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None
    superseded_by: UUID | None
    expires_at: datetime | None
    provenance: list[str]
    depth: int


# An audit row (ids and reasons, never text).
@dataclass(frozen=True, slots=True)
class Event:
    id: int
    memory_id: UUID | None
    event: str
    reason: str
    actor: str
    related_ids: list[UUID]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class RetentionRun:
    id: UUID
    tenant_id: UUID
    agent_id: str
    run_key: str
    trigger: str
    status: str
    clock: datetime
    started_at: datetime
    finished_at: datetime | None
    scanned: int
    expired: int
    forgotten_age: int
    forgotten_unused: int
    forgotten_cap: int
    decayed: int
    promoted: int
    merged: int
    superseded: int
    reviews: int
    batches: int
    duration_ms: int | None
    skipped_reason: str | None
    error: str | None
    forgotten_distilled: int  # added after the others: reports keep their key order


@dataclass(frozen=True, slots=True)
class RetentionState:
    retention_done_at: datetime | None
    live: int
    repair_clock: datetime | None  # an unfinished merge/contradiction pass: begun at this clock
    repair_after: UUID | None  # ... and checked up to this memory id
    episodic: int  # the live rows the episodic cap counts
    semantic: int  # the live rows the semantic cap counts


@dataclass(frozen=True, slots=True)
class DecayBatch:
    last_id: UUID | None  # None when the batch was empty
    seen: int
    n: int


@dataclass(frozen=True, slots=True)
class PromoteCandidate:
    id: UUID
    tier: str
    access_count: int
    confirmations: int
    confidence: float
    connected: bool


# Two memories that share most of their words; cosine of their embeddings.
@dataclass(frozen=True, slots=True)
class Pair:
    a: UUID
    b: UUID
    cosine: float


@dataclass(frozen=True, slots=True)
class FactRow:
    id: UUID
    text: str
    kind: str
    tier: str
    confidence: float
    access_count: int
    created_at: datetime
    speaker: str | None  # who said it, from the turn it was reflected from (None: not known)


@dataclass(frozen=True, slots=True)
class Matched:
    id: UUID
    kind: str
    provenance: list[str]


# The postings, connections and aliases that go with some memories.
@dataclass(frozen=True, slots=True)
class ErasedCounts:
    terms: int
    connections: int
    aliases: int


# The audit events and reviews whose reason quoted a needle, now without it.
@dataclass(frozen=True, slots=True)
class Scrubbed:
    events: int
    reviews: int


# --- clock, aliases, confirmation, tiers -----------------------------------------------------------

# The database's clock for this transaction (the same instant as its now()).
now = _sql.One[datetime]("now", _sql.first)

# The survivor a merged-away id now resolves to; None when it is no alias.
resolve_alias = _sql.Row[UUID]("resolve_alias", _sql.first)
lock_memory = _sql.Row("lock_memory", MemoryState)
confirm = _sql.Row("confirm", MemoryState)
set_tier = _sql.Row("set_tier", _sql.via(memories.Memory.from_row))

# --- supersede, reviews, merge ---------------------------------------------------------------------

# The retired id; None when the older memory was no longer live.
supersede = _sql.Row[UUID]("supersede", _sql.first)
supersede_turns = _sql.Rows[UUID]("supersede_turns", _sql.first)
# The new review's id; None when the pair is on the list already.
add_review = _sql.Row[UUID]("add_review", _sql.first)
reviews = _sql.Rows("reviews", Review)
lock_review = _sql.Row("lock_review", Review)
resolve_review = _sql.Row[UUID]("resolve_review", _sql.first)
# The survivor's id; None when either memory is no longer live.
merge_into = _sql.Row[UUID]("merge_into", _sql.first)
# How many rows were merged away (0 or 1).
merge_finish = _sql.One[int]("merge_finish", _sql.first)

# --- history, events, policy overrides -------------------------------------------------------------

history = _sql.Rows("history", Version)
aliases_of = _sql.Rows[UUID]("aliases_of", _sql.first)
events = _sql.Rows("events", Event)
# One audit row per id, each with its reason (and related id or None).
insert_events = _sql.Run("insert_events")
set_agent_policy = _sql.Row[dict[str, Any]]("set_agent_policy", _sql.first)
set_tenant_policy = _sql.Row[dict[str, Any]]("set_tenant_policy", _sql.first)

# --- the retention sweep ---------------------------------------------------------------------------

# Across tenants (a SECURITY DEFINER function): agents not swept since `before`.
retention_due = _sql.Rows("retention_due", TenantAgent)
# The run's id; None when run_key was used (unless resume takes over a running one).
retention_start = _sql.Row[UUID]("retention_start", _sql.first)
retention_state = _sql.Row("retention_state", RetentionState)
retention_finish = _sql.Run("retention_finish")
retention_stamp = _sql.Run("retention_stamp")
retention_repair_mark = _sql.Run("retention_repair_mark")
# Newest first.
retention_runs = _sql.Rows("retention_runs", RetentionRun)
# The batched deletes: one batch each; how many went.
retention_purge_expired = _sql.One[int]("retention_purge_expired", _sql.first)
retention_forget_age = _sql.One[int]("retention_forget_age", _sql.first)
retention_forget_unused = _sql.One[int]("retention_forget_unused", _sql.first)
retention_forget_cap = _sql.One[int]("retention_forget_cap", _sql.first)
retention_forget_distilled = _sql.One[int]("retention_forget_distilled", _sql.first)
retention_forget_semantic_cap = _sql.One[int]("retention_forget_semantic_cap", _sql.first)
retention_decay = _sql.One("retention_decay", DecayBatch)
retention_promote_candidates = _sql.Rows("retention_promote_candidates", PromoteCandidate)
# The ids promoted L1 -> L2.
retention_promote = _sql.Rows[UUID]("retention_promote", _sql.first)
retention_fresh = _sql.Rows[UUID]("retention_fresh", _sql.first)
memory_pairs = _sql.Rows("memory_pairs", Pair)
update_candidates = _sql.Rows("update_candidates", Pair)
retention_facts = _sql.Rows("retention_facts", FactRow)

# --- forget ----------------------------------------------------------------------------------------

forget_match = _sql.Rows("forget_match", Matched, subject=None)
forget_match_episodes = _sql.Rows[UUID]("forget_match_episodes", _sql.first, subject=None)
forget_lock_episodes = _sql.Rows[UUID]("forget_lock_episodes", _sql.first)
forget_derived = _sql.Rows("forget_derived", Matched)
# The surviving evidence put back into consolidation's window.
forget_rederive = _sql.Rows[UUID]("forget_rederive", _sql.first)
forget_texts = _sql.Rows[str]("forget_texts", _sql.first)
forget_counts = _sql.One("forget_counts", ErasedCounts)
# The deleted rows as they were deleted (after any writer holding one committed).
forget_delete_memories = _sql.Rows("forget_delete_memories", Matched)
forget_delete_episodes = _sql.Rows[UUID]("forget_delete_episodes", _sql.first)
# The profile versions deleted because they cite one of the needles.
forget_profiles = _sql.Rows[int]("forget_profiles", _sql.first)
# The turns of the episodes named by sources ('episode:<id>').
forget_turns = _sql.Rows("forget_turns", Matched)
# Every text these episodes hold: their content and each string of their messages.
forget_episode_texts = _sql.Rows[str]("forget_episode_texts", _sql.first)
forget_memory_copies = _sql.Rows("forget_memory_copies", Matched)
forget_episode_copies = _sql.Rows[UUID]("forget_episode_copies", _sql.first)
forget_scrub_events = _sql.One("forget_scrub_events", Scrubbed)
