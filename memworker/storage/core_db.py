"""Typed queries of queries/core.sql: tenants, api keys, agents and their policies, episodes,
memories, recall. One function per `-- name:` block, named like it; rows come back as
frozen dataclasses, and memories as memworker.domain.memories.Memory.

The caller owns the transaction and binds the tenant (db.tenant_tx); the cross-tenant ones
(authenticate, stale_episodes) go through SECURITY DEFINER functions. store.py keeps the
operations built on several of these (write_memory with its postings and event, ...)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np

from memworker.domain import memories
from memworker.storage import _sql

_MEMORY = _sql.via(memories.Memory.from_row)


@dataclass(frozen=True, slots=True)
class Tenant:
    id: UUID
    name: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: UUID
    prefix: str
    name: str
    scopes: list[str]
    agent_ids: list[str] | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None  # None on a key just created


@dataclass(frozen=True, slots=True)
class KeyAuth:
    """What authenticating a key needs to know about it."""

    key_id: UUID
    tenant_id: UUID
    key_hash: bytes
    scopes: list[str]
    agent_ids: list[str] | None
    expires_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class Policies:
    """The tenant's and the agent's policy overrides; agent_policy None: no such agent."""

    tenant_policy: dict[str, Any]
    agent_policy: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class EpisodeKey:
    id: UUID
    status: str
    subject: str | None
    content: str


@dataclass(frozen=True, slots=True)
class Episode:
    """An episode as GET .../episodes/{id} shows it."""

    id: UUID
    agent_id: str
    session_id: str | None
    status: str
    attempts: int
    last_error: str | None
    memory_ids: list[UUID]
    reflector: str | None
    llm_calls: int
    tokens_in: int
    tokens_out: int
    llm_ms: int
    created_at: datetime
    stored_at: datetime | None
    occurred_at: datetime
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class EpisodeListing:
    id: UUID
    agent_id: str
    session_id: str | None
    status: str
    attempts: int
    last_error: str | None
    memory_ids: list[UUID]
    created_at: datetime
    stored_at: datetime | None


@dataclass(frozen=True, slots=True)
class ClaimedEpisode:
    id: UUID
    agent_id: str
    session_id: str | None
    content: str
    messages: Any
    metadata: dict[str, Any]
    attempts: int
    reflection: Any
    occurred_at: datetime
    subject: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimToken:
    id: UUID
    agent_id: str
    attempts: int


@dataclass(frozen=True, slots=True)
class ClaimState:
    status: str
    attempts: int


@dataclass(frozen=True, slots=True)
class StaleEpisode:
    tenant_id: UUID
    episode_id: UUID


@dataclass(frozen=True, slots=True)
class Usage:
    """One agent's episodes and LLM use (sums are None when nothing was counted)."""

    agent_id: str
    episodes: int
    llm_calls: int | None
    tokens_in: int | None
    tokens_out: int | None
    llm_ms: int | None
    stored: int
    dead: int


@dataclass(frozen=True, slots=True)
class Duplicate:
    id: UUID
    text: str
    similarity: float


@dataclass(frozen=True, slots=True)
class RecallRow:
    """A recall hit with its signals; collapsed: the memories that gave it their slot."""

    id: UUID
    text: str
    kind: str
    tier: str
    created_at: datetime
    metadata: dict[str, Any]
    provenance: list[str]
    flags: list[str]
    trust: str
    subject: str | None
    salience: float
    access_count: int
    score: float
    bm25: float
    vector: float
    fused: float
    prior: float
    freshness: float
    collapsed: list[UUID] | None


# --- tenants and keys ----------------------------------------------------------------------------

create_tenant = _sql.One("create_tenant", Tenant)

tenant_by_name = _sql.Row("tenant_by_name", Tenant)

list_tenants = _sql.Rows("list_tenants", Tenant)

insert_api_key = _sql.One("insert_api_key", ApiKey)

list_api_keys = _sql.Rows("list_api_keys", ApiKey)


# The revoked key's id; None when no active key has that prefix.
revoke_api_key = _sql.Row[UUID]("revoke_api_key", _sql.first)


# Across tenants (a SECURITY DEFINER function): the key with this prefix.
authenticate = _sql.Row("authenticate", KeyAuth)


# --- agents and policies -------------------------------------------------------------------------

policies = _sql.Row("policies", Policies)


# Create the agent unless it exists (no validation: tenancy.ensure_agent checks the id).
ensure_agent = _sql.Run("ensure_agent")


agent_exists = _sql.One[bool]("agent_exists", _sql.first)

touch_agent = _sql.Run("touch_agent")


# --- episodes ------------------------------------------------------------------------------------


# The new episode's id; None when the idempotency key was used before. messages: a
# JSON value (or None).
insert_episode = _sql.Row[UUID]("insert_episode", _sql.first, subject=None)

episode_by_key = _sql.Row("episode_by_key", EpisodeKey)

mark_enqueued = _sql.Run("mark_enqueued")


# The tenant's queued episodes, counted up to cap.
queued_backlog = _sql.One[int]("queued_backlog", _sql.first)

# The tenant's LLM tokens this UTC day (tenancy.service.llm_budget).
llm_spent_today = _sql.One[int]("llm_spent_today", _sql.first)

get_episode = _sql.Row("get_episode", Episode)


# Newest first; agent_ids (not None) keeps only those agents' episodes.
list_episodes = _sql.Rows("list_episodes", EpisodeListing, agent_ids=None)


# Claim the named episodes (and, opportunistically, other queued ones up to limit).
claim_episodes = _sql.Rows("claim_episodes", ClaimToken)


# The payload of claimed episodes; a row Python cannot read raises (psycopg.DataError).
claimed_episodes = _sql.Rows("claimed_episodes", ClaimedEpisode)

lock_claimed_episode = _sql.Row("lock_claimed_episode", ClaimState)


# reflection: a JSON value. 0 when the claim (attempts) is no longer current.
save_reflection = _sql.Run("save_reflection")

finish_episode = _sql.Run("finish_episode")


# The episode's new status ('failed' or 'dead'); None when the claim is no longer current.
fail_episode = _sql.Row[str]("fail_episode", _sql.first)


# None unless the episode is dead or failed.
replay_episode = _sql.Row[UUID]("replay_episode", _sql.first)


# Across tenants (a SECURITY DEFINER function): episodes whose message may be lost.
stale_episodes = _sql.Rows("stale_episodes", StaleEpisode)


# Per agent; agent_ids (not None) keeps only those agents.
usage = _sql.Rows("usage", Usage, agent_ids=None)


# --- memories ------------------------------------------------------------------------------------


# The row only (store.write_memory also writes its postings and event); None when
# source_key was stored before.
insert_memory = _sql.Row[UUID]("insert_memory", _sql.first, subject=None)

memory_by_source_key = _sql.Row[UUID]("memory_by_source_key", _sql.first)

insert_terms = _sql.Run("insert_terms")

delete_terms = _sql.Run("delete_terms")

insert_event = _sql.Run("insert_event")


# The closest live memory of the same subject (None: the general ones): the same normalised
# text (similarity 1), else the nearest vector among those sharing one of the text's
# probe_terms rarest terms (BM25 terms).
find_duplicate = _sql.Row("find_duplicate", Duplicate, subject=None)


@dataclass(frozen=True, slots=True)
class NearMemory:
    id: UUID
    text: str
    kind: str


# An episode's nearest live memories of one subject and of some kinds, nearest first.
nearest_live = _sql.Rows("nearest_live", NearMemory, subject=None)

get_memory = _sql.Row("get_memory", _MEMORY)


# Newest first, after the keyset (after_created, after_id) when given; metadata: only
# memories whose metadata contains it (jsonb @>); subject: only that subject's.
list_memories = _sql.Rows("list_memories", _MEMORY, subject=None)


# None leaves a column as it is (expires_at: only when set_expires).
update_memory = _sql.Row("update_memory", _MEMORY)

delete_memory = _sql.Row[UUID]("delete_memory", _sql.first)


# --- recall --------------------------------------------------------------------------------------


# The hybrid recall statement (see queries/core.sql), best first. It only reads: a replica can
# run it, and recall.hybrid.serve queues the hits' access bumps (storage/bumps.py).
# retired: the superseded memories still kept for history too (an audit).
recall = _sql.Rows("recall", RecallRow, subject=None, retired=False)

# A large agent's recall over a bounded candidate set (queries/core.sql: recall_bounded), in
# one statement.
recall_bounded = _sql.Rows("recall_bounded", RecallRow, subject=None)


# The terms' document frequencies over the agent, with the settings recall_bounded needs.
recall_bounded_setup = _sql.One[list[float]]("recall_bounded_setup", _sql.first)


@dataclass(frozen=True, slots=True)
class RecallStats:
    rows: int  # live memories: what the exact statement scans
    n: int  # BM25's documents: the rows with postings
    avgdl: float
    ann_ready: bool


recall_stats = _sql.One("recall_stats", RecallStats)


# Whether the agent's older memories are in the index already; None: no such agent.
ann_enable = _sql.Row[bool]("ann_enable", _sql.first)

ann_fill = _sql.Run("ann_fill")

ann_flush = _sql.Run("ann_flush")

ann_ready = _sql.Run("ann_ready")


# --- read replicas: access bumps -----------------------------------------------------------------


# Add one batch of queued access bumps (counts[i] recalls of ids[i]); rows this batch
# already counted (last_access_at = at) are left alone. Returns the rows updated.
access_apply = _sql.Run("access_apply")


@dataclass(frozen=True, slots=True)
class AgentsRecallRow(RecallRow):
    """A hit of a recall over several agents: whose memory it is, and every agent (or pool
    owner) holding the same text with its memory id, best-ranked first (the hit's own first)."""

    agent_id: str
    holder_agents: list[str]
    holder_ids: list[UUID]


# One ranked list over the agents' memories (see queries/core.sql); best first.
recall_agents = _sql.Rows("recall_agents", AgentsRecallRow, retired=False)


@dataclass(frozen=True, slots=True)
class RelatedRow:
    """A recall hit's standing with another memory (queries/core.sql: recall_related)."""

    memory_id: UUID  # the hit
    # 'conflict': an open review between two live memories; 'superseded': the hit replaced the
    # other; 'retired' (audit): the hit is superseded, by the other if it names one
    relation: str
    other_id: UUID | None
    other_text: str
    other_kind: str
    newer: bool  # the hit is the newer statement of the two
    valid_from: datetime
    other_valid_from: datetime  # 'retired': the hit's valid_to


# The hits' open conflicts, and with replaced_since the memories they superseded since then.
recall_related = _sql.Rows("recall_related", RelatedRow, replaced_since=None, audit=False)


@dataclass(frozen=True, slots=True)
class PoolSource:
    """An agent's memory as it is copied into a pool."""

    id: UUID
    text: str
    kind: str
    tier: str
    salience: float
    confidence: float
    entities: list[str]
    topics: list[str]
    provenance: list[str]
    metadata: dict[str, Any]
    flags: list[str]
    subject: str | None
    embedding: np.ndarray
    parts: int  # the part count of the message it is (or was distilled from): recall weighs the copy alike


@dataclass(frozen=True, slots=True)
class PoolRow:
    owner: str  # the pool's row in agents: 'pool~<name>'
    created_at: datetime
    memories: int


pool_source = _sql.Row("pool_source", PoolSource)

pool_list = _sql.Rows("pool_list", PoolRow)


# The ids of the pool memories deleted because their provenance names one of sources.
pool_forget_copies = _sql.Rows[UUID]("pool_forget_copies", _sql.first)


@dataclass(frozen=True, slots=True)
class PoolMemory:
    """An agent's memory a sleep pass may propose to a pool."""

    id: UUID
    text: str
    kind: str
    content_hash: str  # its normalised words
    embedding: np.ndarray


@dataclass(frozen=True, slots=True)
class PoolCandidate:
    """Another agent's memory that may say the same (not yet confirmed by its words)."""

    other_agent: str
    other_id: UUID
    text: str
    similarity: float  # cosine with the agent's memory


pool_examined = _sql.Rows("pool_examined", PoolMemory)

pool_candidates = _sql.Rows("pool_candidates", PoolCandidate)
