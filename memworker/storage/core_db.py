"""Typed queries of queries/core.sql: tenants, api keys, agents and their policies, episodes,
memories, recall. One function per `-- name:` block, named like it; rows come back as
frozen dataclasses, and memories as memworker.memories.Memory.

The caller owns the transaction and binds the tenant (db.tenant_tx); the cross-tenant ones
(authenticate, stale_episodes) go through SECURITY DEFINER functions. store.py keeps the
operations built on several of these (write_memory with its postings and event, ...)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from memworker import memories
from memworker.storage import _sql

Conn = psycopg.Connection[Any]


@dataclass(frozen=True, slots=True)
class Tenant:
    id: UUID
    name: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class NewApiKey:
    """A key as created (its hash and secret are not in it)."""

    id: UUID
    prefix: str
    name: str
    scopes: list[str]
    agent_ids: list[str] | None
    created_at: datetime
    expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: UUID
    prefix: str
    name: str
    scopes: list[str]
    agent_ids: list[str] | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


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


def create_tenant(conn: Conn, *, name: str) -> Tenant:
    row = _sql.one(conn, "create_tenant", name=name)
    assert row is not None  # an INSERT ... RETURNING without ON CONFLICT
    return Tenant(**row)


def tenant_by_name(conn: Conn, *, name: str) -> Tenant | None:
    row = _sql.one(conn, "tenant_by_name", name=name)
    return Tenant(**row) if row else None


def list_tenants(conn: Conn) -> list[Tenant]:
    return [Tenant(**r) for r in _sql.all_(conn, "list_tenants")]


def insert_api_key(
    conn: Conn,
    *,
    tenant_id: UUID,
    prefix: str,
    key_hash: bytes,
    name: str,
    scopes: list[str],
    agent_ids: list[str] | None,
    expires_at: datetime | None,
) -> NewApiKey:
    row = _sql.one(
        conn,
        "insert_api_key",
        tenant_id=tenant_id,
        prefix=prefix,
        key_hash=key_hash,
        name=name,
        scopes=scopes,
        agent_ids=agent_ids,
        expires_at=expires_at,
    )
    assert row is not None  # an INSERT ... RETURNING without ON CONFLICT
    return NewApiKey(**row)


def list_api_keys(conn: Conn, *, tenant_id: UUID) -> list[ApiKey]:
    return [ApiKey(**r) for r in _sql.all_(conn, "list_api_keys", tenant_id=tenant_id)]


def revoke_api_key(conn: Conn, *, tenant_id: UUID, prefix: str) -> UUID | None:
    """The revoked key's id; None when no active key has that prefix."""
    row = _sql.one(conn, "revoke_api_key", tenant_id=tenant_id, prefix=prefix)
    return row["id"] if row else None


def authenticate(conn: Conn, *, prefix: str) -> KeyAuth | None:
    """Across tenants (a SECURITY DEFINER function): the key with this prefix."""
    row = _sql.one(conn, "authenticate", prefix=prefix)
    return KeyAuth(**row) if row else None


# --- agents and policies -------------------------------------------------------------------------


def policies(conn: Conn, *, tenant_id: UUID, agent_id: str | None) -> Policies | None:
    row = _sql.one(conn, "policies", tenant_id=tenant_id, agent_id=agent_id)
    return Policies(**row) if row else None


def ensure_agent(conn: Conn, *, tenant_id: UUID, agent_id: str) -> int:
    """Create the agent unless it exists (no validation: store.ensure_agent checks the id)."""
    return _sql.run(conn, "ensure_agent", tenant_id=tenant_id, agent_id=agent_id)


def agent_exists(conn: Conn, *, tenant_id: UUID, agent_id: str) -> bool:
    return _sql.one(conn, "agent_exists", tenant_id=tenant_id, agent_id=agent_id) is not None


def touch_agent(conn: Conn, *, tenant_id: UUID, agent_id: str) -> int:
    return _sql.run(conn, "touch_agent", tenant_id=tenant_id, agent_id=agent_id)


# --- episodes ------------------------------------------------------------------------------------


def insert_episode(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str | None,
    idempotency_key: str | None,
    content: str,
    messages: Any,
    metadata: dict[str, Any],
    occurred_at: datetime | None,
    subject: str | None = None,
) -> UUID | None:
    """The new episode's id; None when the idempotency key was used before. messages: a
    JSON value (or None)."""
    row = _sql.one(
        conn,
        "insert_episode",
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        idempotency_key=idempotency_key,
        content=content,
        messages=None if messages is None else Jsonb(messages),
        metadata=Jsonb(metadata),
        occurred_at=occurred_at,
        subject=subject,
    )
    return row["id"] if row else None


def episode_by_key(conn: Conn, *, tenant_id: UUID, agent_id: str, idempotency_key: str | None) -> EpisodeKey | None:
    row = _sql.one(conn, "episode_by_key", tenant_id=tenant_id, agent_id=agent_id, idempotency_key=idempotency_key)
    return EpisodeKey(**row) if row else None


def mark_enqueued(conn: Conn, *, tenant_id: UUID, ids: list[UUID]) -> int:
    return _sql.run(conn, "mark_enqueued", tenant_id=tenant_id, ids=ids)


def queued_backlog(conn: Conn, *, tenant_id: UUID, cap: int) -> int:
    """The tenant's queued episodes, counted up to cap."""
    row = _sql.one(conn, "queued_backlog", tenant_id=tenant_id, cap=cap)
    return int(row["n"]) if row else 0


def get_episode(conn: Conn, *, tenant_id: UUID, agent_id: str, episode_id: UUID) -> Episode | None:
    row = _sql.one(conn, "get_episode", tenant_id=tenant_id, agent_id=agent_id, episode_id=episode_id)
    return Episode(**row) if row else None


def list_episodes(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str | None,
    status: str | None,
    limit: int,
    agent_ids: list[str] | None = None,
) -> list[EpisodeListing]:
    """Newest first; agent_ids (not None) keeps only those agents' episodes."""
    rows = _sql.all_(
        conn,
        "list_episodes",
        tenant_id=tenant_id,
        agent_id=agent_id,
        agent_ids=agent_ids,
        status=status,
        limit=limit,
    )
    return [EpisodeListing(**r) for r in rows]


def claim_episodes(
    conn: Conn, *, tenant_id: UUID, ids: list[UUID], lease_s: float, limit: int, opportunistic: bool
) -> list[ClaimToken]:
    """Claim the named episodes (and, opportunistically, other queued ones up to limit)."""
    rows = _sql.all_(
        conn,
        "claim_episodes",
        tenant_id=tenant_id,
        ids=ids,
        lease_s=lease_s,
        limit=limit,
        opportunistic=opportunistic,
    )
    return [ClaimToken(**r) for r in rows]


def claimed_episodes(conn: Conn, *, tenant_id: UUID, ids: list[UUID]) -> list[ClaimedEpisode]:
    """The payload of claimed episodes; a row Python cannot read raises (psycopg.DataError)."""
    return [ClaimedEpisode(**r) for r in _sql.all_(conn, "claimed_episodes", tenant_id=tenant_id, ids=ids)]


def lock_claimed_episode(conn: Conn, *, tenant_id: UUID, episode_id: UUID) -> ClaimState | None:
    row = _sql.one(conn, "lock_claimed_episode", tenant_id=tenant_id, episode_id=episode_id)
    return ClaimState(**row) if row else None


def save_reflection(
    conn: Conn,
    *,
    tenant_id: UUID,
    episode_id: UUID,
    attempts: int,
    reflection: Any,
    llm_calls: int,
    tokens_in: int,
    tokens_out: int,
    llm_ms: int,
) -> int:
    """reflection: a JSON value. 0 when the claim (attempts) is no longer current."""
    return _sql.run(
        conn,
        "save_reflection",
        tenant_id=tenant_id,
        episode_id=episode_id,
        attempts=attempts,
        reflection=Jsonb(reflection),
        llm_calls=llm_calls,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        llm_ms=llm_ms,
    )


def finish_episode(
    conn: Conn,
    *,
    tenant_id: UUID,
    episode_id: UUID,
    memory_ids: list[UUID],
    reflector: str | None,
    llm_calls: int,
    tokens_in: int,
    tokens_out: int,
    llm_ms: int,
) -> int:
    return _sql.run(
        conn,
        "finish_episode",
        tenant_id=tenant_id,
        episode_id=episode_id,
        memory_ids=memory_ids,
        reflector=reflector,
        llm_calls=llm_calls,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        llm_ms=llm_ms,
    )


def fail_episode(
    conn: Conn, *, tenant_id: UUID, episode_id: UUID, attempts: int, max_attempts: int, error: str
) -> str | None:
    """The episode's new status ('failed' or 'dead'); None when the claim is no longer current."""
    row = _sql.one(
        conn,
        "fail_episode",
        tenant_id=tenant_id,
        episode_id=episode_id,
        attempts=attempts,
        max_attempts=max_attempts,
        error=error,
    )
    return row["status"] if row else None


def replay_episode(conn: Conn, *, tenant_id: UUID, agent_id: str, episode_id: UUID) -> UUID | None:
    """None unless the episode is dead or failed."""
    row = _sql.one(conn, "replay_episode", tenant_id=tenant_id, agent_id=agent_id, episode_id=episode_id)
    return row["id"] if row else None


def stale_episodes(conn: Conn, *, older_than_s: float, limit: int) -> list[StaleEpisode]:
    """Across tenants (a SECURITY DEFINER function): episodes whose message may be lost."""
    return [StaleEpisode(**r) for r in _sql.all_(conn, "stale_episodes", older_than_s=older_than_s, limit=limit)]


def usage(conn: Conn, *, tenant_id: UUID, agent_id: str | None, agent_ids: list[str] | None = None) -> list[Usage]:
    """Per agent; agent_ids (not None) keeps only those agents."""
    rows = _sql.all_(conn, "usage", tenant_id=tenant_id, agent_id=agent_id, agent_ids=agent_ids)
    return [Usage(**r) for r in rows]


# --- memories ------------------------------------------------------------------------------------


def insert_memory(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    text: str,
    kind: str,
    tier: str,
    salience: float,
    confidence: float,
    expires_at: datetime | None,
    session_id: str | None,
    entities: list[str],
    topics: list[str],
    provenance: list[str],
    metadata: dict[str, Any],
    source_key: str,
    content_hash: str,
    trust: str,
    flags: list[str],
    doc_len: int,
    embedding: np.ndarray,
    subject: str | None = None,
) -> UUID | None:
    """The row only (store.write_memory also writes its postings and event); None when
    source_key was stored before."""
    row = _sql.one(
        conn,
        "insert_memory",
        tenant_id=tenant_id,
        agent_id=agent_id,
        text=text,
        kind=kind,
        tier=tier,
        salience=salience,
        confidence=confidence,
        expires_at=expires_at,
        session_id=session_id,
        entities=entities,
        topics=topics,
        provenance=provenance,
        metadata=Jsonb(metadata),
        source_key=source_key,
        content_hash=content_hash,
        trust=trust,
        flags=flags,
        doc_len=doc_len,
        embedding=embedding,
        subject=subject,
    )
    return row["id"] if row else None


def memory_by_source_key(conn: Conn, *, tenant_id: UUID, source_key: str) -> UUID | None:
    row = _sql.one(conn, "memory_by_source_key", tenant_id=tenant_id, source_key=source_key)
    return row["id"] if row else None


def insert_terms(
    conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID, terms: list[str], tfs: list[int], doc_len: int
) -> int:
    return _sql.run(
        conn,
        "insert_terms",
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        terms=terms,
        tfs=tfs,
        doc_len=doc_len,
    )


def delete_terms(conn: Conn, *, memory_id: UUID) -> int:
    return _sql.run(conn, "delete_terms", memory_id=memory_id)


def insert_event(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    memory_id: UUID | None,
    event: str,
    reason: str,
    actor: str,
    related_ids: list[UUID],
) -> int:
    return _sql.run(
        conn,
        "insert_event",
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        event=event,
        reason=reason,
        actor=actor,
        related_ids=related_ids,
    )


def find_duplicate(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    content_hash: str,
    embedding: np.ndarray,
    terms: list[str],
    probe_terms: int,
    per_term: int,
    df_cap: int,
    subject: str | None = None,
) -> Duplicate | None:
    """The closest live memory of the same subject (None: the general ones): the same
    normalised text (similarity 1), else the nearest vector among those sharing one of the
    text's probe_terms rarest terms (BM25 terms)."""
    row = _sql.one(
        conn,
        "find_duplicate",
        tenant_id=tenant_id,
        agent_id=agent_id,
        content_hash=content_hash,
        embedding=embedding,
        terms=terms,
        probe_terms=probe_terms,
        per_term=per_term,
        df_cap=df_cap,
        subject=subject,
    )
    return Duplicate(row["id"], row["text"], float(row["similarity"])) if row else None


def get_memory(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID) -> memories.Memory | None:
    row = _sql.one(conn, "get_memory", tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    return memories.Memory.from_row(row) if row else None


def list_memories(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    tier: str | None,
    kind: str | None,
    session_id: str | None,
    metadata: dict[str, Any] | None,
    include_inactive: bool,
    after_created: datetime | None,
    after_id: UUID | None,
    limit: int,
    subject: str | None = None,
) -> list[memories.Memory]:
    """Newest first, after the keyset (after_created, after_id) when given; metadata: only
    memories whose metadata contains it (jsonb @>); subject: only that subject's."""
    rows = _sql.all_(
        conn,
        "list_memories",
        tenant_id=tenant_id,
        agent_id=agent_id,
        tier=tier,
        kind=kind,
        session_id=session_id,
        metadata=None if metadata is None else Jsonb(metadata),
        include_inactive=include_inactive,
        after_created=after_created,
        after_id=after_id,
        limit=limit,
        subject=subject,
    )
    return [memories.Memory.from_row(r) for r in rows]


def update_memory(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    memory_id: UUID,
    text: str | None,
    kind: str | None,
    tier: str | None,
    salience: float | None,
    confidence: float | None,
    metadata: dict[str, Any] | None,
    set_expires: bool,
    expires_at: datetime | None,
    content_hash: str | None,
    doc_len: int | None,
    embedding: np.ndarray | None,
    flags: list[str] | None,
) -> memories.Memory | None:
    """None leaves a column as it is (expires_at: only when set_expires)."""
    row = _sql.one(
        conn,
        "update_memory",
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        text=text,
        kind=kind,
        tier=tier,
        salience=salience,
        confidence=confidence,
        metadata=None if metadata is None else Jsonb(metadata),
        set_expires=set_expires,
        expires_at=expires_at,
        content_hash=content_hash,
        doc_len=doc_len,
        embedding=embedding,
        flags=flags,
    )
    return memories.Memory.from_row(row) if row else None


def delete_memory(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID) -> UUID | None:
    row = _sql.one(conn, "delete_memory", tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    return row["id"] if row else None


# The recall statement without its access-bump CTEs, run where no write may happen (a replica).
_RECALL_READ = "recall:read_only"
_sql.Q[_RECALL_READ] = _sql.without_ctes(_sql.Q["recall"], ("bumped", "bump"))
# The statement over a large agent's bounded candidates (ids given) under a text of its own:
# the server caches plans per statement text, and a generic plan made for candidate ids
# (index probes per id) read every posting of an exact recall's agent one probe at a time.
_BOUNDED = " /* bounded candidates */"
for _name in ("recall", _RECALL_READ):
    _sql.Q[_name + ":bounded"] = _sql.Q[_name] + _BOUNDED
# The exact statement (ids NULL) without the candidate-id conditions. With them, the generic
# plan the server caches after five runs estimated an agent's live rows at 2 (the conditions'
# selectivity for unknown ids) and joined the postings to them in a nested loop: twice the
# CPU of the exact statement's own generic plan (bench/recall_latency.py --natural).
_CANDIDATE_IDS = (
    "\n    AND (%(ids)s::uuid[] IS NULL OR m.id = ANY(%(ids)s::uuid[]))",
    "\n    AND (%(ids)s::uuid[] IS NULL OR t.memory_id = ANY(%(ids)s::uuid[]))  -- the candidates' postings only",
)
for _name in ("recall", _RECALL_READ):
    for _condition in _CANDIDATE_IDS:
        if _condition not in _sql.Q[_name]:
            raise RuntimeError(f"{_name}: no candidate-id condition {_condition.strip()!r} to drop")
        _sql.Q[_name] = _sql.Q[_name].replace(_condition, "")


# --- recall --------------------------------------------------------------------------------------


def recall(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    terms: list[str],
    qvec: np.ndarray,
    tiers: list[str],
    kinds: list[str] | None,
    since: datetime | None,
    until: datetime | None,
    metadata: dict[str, Any] | None,
    hide_flagged: bool,
    candidates: int,
    vector_floor: float,
    w_bm25: float,
    w_vector: float,
    w_prior: float,
    k: int,
    pool: int,
    collapse: bool,
    bump: bool,
    subject: str | None = None,
    read_only: bool = False,
    ids: list[UUID] | None = None,
    n: float | None = None,
    avgdl: float | None = None,
    dfs: list[float] | None = None,
) -> list[RecallRow]:
    """The hybrid recall statement (see queries/core.sql); best first. read_only: its form
    without the access bump, which a hot standby can run (the caller queues the bump)."""
    rows = _sql.all_(
        conn,
        (_RECALL_READ if read_only else "recall") + (":bounded" if ids is not None else ""),
        tenant_id=tenant_id,
        agent_id=agent_id,
        terms=terms,
        qvec=qvec,
        tiers=tiers,
        kinds=kinds,
        since=since,
        until=until,
        metadata=None if metadata is None else Jsonb(metadata),
        hide_flagged=hide_flagged,
        candidates=candidates,
        vector_floor=vector_floor,
        w_bm25=w_bm25,
        w_vector=w_vector,
        w_prior=w_prior,
        k=k,
        pool=pool,
        collapse=collapse,
        bump=bump,
        subject=subject,
        ids=ids,
        n=n,
        avgdl=avgdl,
        dfs=dfs,
    )
    return [RecallRow(**r) for r in rows]


def recall_candidates(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    terms: list[str],
    dfs: list[float],
    n: float,
    qvec: np.ndarray,
    budget: int,
    per_term: int,
    lexical: int,
    candidates: int,
) -> list[UUID]:
    """A large agent's bounded recall candidates (see queries/core.sql)."""
    row = _sql.one(
        conn,
        "recall_candidates",
        tenant_id=tenant_id,
        agent_id=agent_id,
        terms=terms,
        dfs=dfs,
        n=n,
        qvec=qvec,
        budget=budget,
        per_term=per_term,
        lexical=lexical,
        candidates=candidates,
    )
    assert row is not None  # one row: an array, empty when nothing matched
    return list(row["ids"])


def recall_dfs(conn: Conn, *, tenant_id: UUID, agent_id: str, terms: list[str]) -> list[float]:
    row = _sql.one(conn, "recall_dfs", tenant_id=tenant_id, agent_id=agent_id, terms=terms)
    assert row is not None  # one row of one array
    return list(row["dfs"])


def recall_ann_settings(conn: Conn, *, ef_search: int) -> None:
    _sql.one(conn, "recall_ann_settings", ef_search=ef_search)


@dataclass(frozen=True, slots=True)
class RecallStats:
    n: int
    avgdl: float
    ann_ready: bool


def recall_stats(conn: Conn, *, tenant_id: UUID, agent_id: str, subject: str | None) -> RecallStats:
    row = _sql.one(conn, "recall_stats", tenant_id=tenant_id, agent_id=agent_id, subject=subject)
    assert row is not None  # an aggregate: always one row
    return RecallStats(**row)


def ann_enable(conn: Conn, *, tenant_id: UUID, agent_id: str) -> bool | None:
    """Whether the agent's older memories are in the index already; None: no such agent."""
    row = _sql.one(conn, "ann_enable", tenant_id=tenant_id, agent_id=agent_id)
    return None if row is None else bool(row["ann_ready"])


def ann_fill(conn: Conn, *, tenant_id: UUID, agent_id: str, batch: int) -> int:
    return _sql.run(conn, "ann_fill", tenant_id=tenant_id, agent_id=agent_id, batch=batch)


def ann_ready(conn: Conn, *, tenant_id: UUID, agent_id: str) -> None:
    _sql.run(conn, "ann_ready", tenant_id=tenant_id, agent_id=agent_id)


# --- read replicas: access bumps -----------------------------------------------------------------


def access_apply(conn: Conn, *, tenant_id: UUID, ids: list[UUID], counts: list[int], at: datetime) -> int:
    """Add one batch of queued access bumps (counts[i] recalls of ids[i]); rows this batch
    already counted (last_access_at = at) are left alone. Returns the rows updated."""
    return _sql.run(conn, "access_apply", tenant_id=tenant_id, ids=ids, counts=counts, at=at)


@dataclass(frozen=True, slots=True)
class AgentsRecallRow(RecallRow):
    """A hit of a recall over several agents: whose memory it is."""

    agent_id: str


def recall_agents(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_ids: list[str],
    terms: list[str],
    qvec: np.ndarray,
    tiers: list[str],
    kinds: list[str] | None,
    since: datetime | None,
    until: datetime | None,
    metadata: dict[str, Any] | None,
    hide_flagged: bool,
    candidates: int,
    vector_floor: float,
    w_bm25: float,
    w_vector: float,
    w_prior: float,
    k: int,
    subject: str | None,
) -> list[AgentsRecallRow]:
    """One ranked list over the agents' memories (see queries/core.sql); best first."""
    rows = _sql.all_(
        conn,
        "recall_agents",
        tenant_id=tenant_id,
        agent_ids=agent_ids,
        terms=terms,
        qvec=qvec,
        tiers=tiers,
        kinds=kinds,
        since=since,
        until=until,
        metadata=None if metadata is None else Jsonb(metadata),
        hide_flagged=hide_flagged,
        candidates=candidates,
        vector_floor=vector_floor,
        w_bm25=w_bm25,
        w_vector=w_vector,
        w_prior=w_prior,
        k=k,
        subject=subject,
    )
    return [AgentsRecallRow(**r) for r in rows]


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


@dataclass(frozen=True, slots=True)
class PoolRow:
    owner: str  # the pool's row in agents: 'pool~<name>'
    created_at: datetime
    memories: int


def pool_source(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID) -> PoolSource | None:
    row = _sql.one(conn, "pool_source", tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    return PoolSource(**row) if row else None


def pool_list(conn: Conn, *, tenant_id: UUID) -> list[PoolRow]:
    return [PoolRow(**r) for r in _sql.all_(conn, "pool_list", tenant_id=tenant_id)]


def pool_forget_copies(conn: Conn, *, tenant_id: UUID, owners: list[str], sources: list[str]) -> list[UUID]:
    """The ids of the pool memories deleted because their provenance names one of sources."""
    rows = _sql.all_(conn, "pool_forget_copies", tenant_id=tenant_id, owners=owners, sources=sources)
    return [r["id"] for r in rows]


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


def pool_examined(
    conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[UUID], kinds: list[str], limit: int
) -> list[PoolMemory]:
    rows = _sql.all_(conn, "pool_examined", tenant_id=tenant_id, agent_id=agent_id, ids=ids, kinds=kinds, limit=limit)
    return [PoolMemory(**r) for r in rows]


def pool_candidates(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    embedding: np.ndarray,
    terms: list[str],
    kinds: list[str],
    min_similarity: float,
    max_peers: int,
    per_peer: int,
    probe_terms: int,
    per_term: int,
    df_cap: int,
) -> list[PoolCandidate]:
    rows = _sql.all_(
        conn,
        "pool_candidates",
        tenant_id=tenant_id,
        agent_id=agent_id,
        embedding=embedding,
        terms=terms,
        kinds=kinds,
        min_similarity=min_similarity,
        max_peers=max_peers,
        per_peer=per_peer,
        probe_terms=probe_terms,
        per_term=per_term,
        df_cap=df_cap,
    )
    return [PoolCandidate(**r) for r in rows]
