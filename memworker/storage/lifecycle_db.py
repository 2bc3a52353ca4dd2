"""Typed queries of queries/lifecycle.sql: confirmation, promotion, supersede, reviews, merge,
history, policy overrides, the retention sweep and forget. One function per `-- name:`
block, named like it; rows come back as frozen dataclasses.

The caller owns the transaction and binds the tenant (db.tenant_tx). The clock is always a
parameter (now), never the SQL now(): tests move it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from memworker import memories
from memworker.storage import _sql
from memworker.storage.db import Conn
from memworker.storage.sessions_db import TenantAgent


@dataclass(frozen=True, slots=True)
class LockedMemory:
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


@dataclass(frozen=True, slots=True)
class Confirmed:
    id: UUID
    tier: str
    confidence: float
    access_count: int
    confirmations: int


@dataclass(frozen=True, slots=True)
class Review:
    """A review with both memories' text and state (memory_*: the newer, other_*: the older)."""

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


@dataclass(frozen=True, slots=True)
class LockedReview:
    id: UUID
    memory_id: UUID
    other_id: UUID
    status: str
    memory_tier: str
    other_tier: str


@dataclass(frozen=True, slots=True)
class Version:
    """A memory of a supersede chain; depth < 0 older, 0 the one asked about, > 0 newer."""

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


@dataclass(frozen=True, slots=True)
class Event:
    """An audit row (ids and reasons, never text)."""

    id: int
    memory_id: UUID | None
    event: str
    reason: str
    actor: str
    related_ids: list[UUID]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class RetentionRun:
    """A retention_runs row."""

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
    forgotten_distilled: int = 0


@dataclass(frozen=True, slots=True)
class RetentionState:
    retention_done_at: datetime | None
    live: int
    repair_clock: datetime | None = None  # an unfinished merge/contradiction pass: begun at this clock
    repair_after: UUID | None = None  # ... and checked up to this memory id
    episodic: int = 0  # the live rows the episodic cap counts
    semantic: int = 0  # the live rows the semantic cap counts


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


@dataclass(frozen=True, slots=True)
class Pair:
    """Two memories that share most of their words; cosine of their embeddings."""

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


@dataclass(frozen=True, slots=True)
class Matched:
    id: UUID
    kind: str
    provenance: list[str]


@dataclass(frozen=True, slots=True)
class ErasedCounts:
    terms: int
    connections: int
    aliases: int


# --- clock, aliases, confirmation, tiers -----------------------------------------------------------


def lifecycle_now(conn: Conn) -> datetime:
    """The database's clock for this transaction (the same instant as its now())."""
    row = _sql.one(conn, "lifecycle_now")
    assert row is not None
    now: datetime = row["now"]
    return now


def lifecycle_resolve_alias(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID) -> UUID | None:
    """The survivor a merged-away id now resolves to; None when it is no alias."""
    row = _sql.one(conn, "lifecycle_resolve_alias", tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    return row["memory_id"] if row else None


def lifecycle_lock_memory(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID) -> LockedMemory | None:
    row = _sql.one(conn, "lifecycle_lock_memory", tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    return LockedMemory(**row) if row else None


def lifecycle_confirm(
    conn: Conn,
    *,
    tenant_id: UUID,
    memory_id: UUID,
    confidence: float,
    source: str,
    now: datetime,
    renew_to: datetime | None,
    count: int,
) -> Confirmed | None:
    row = _sql.one(
        conn,
        "lifecycle_confirm",
        tenant_id=tenant_id,
        memory_id=memory_id,
        confidence=confidence,
        source=source,
        now=now,
        renew_to=renew_to,
        count=count,
    )
    return Confirmed(**row) if row else None


def lifecycle_set_tier(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    memory_id: UUID,
    tier: str,
    expires_at: datetime | None,
    now: datetime,
) -> memories.Memory | None:
    row = _sql.one(
        conn,
        "lifecycle_set_tier",
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        tier=tier,
        expires_at=expires_at,
        now=now,
    )
    return memories.Memory.from_row(row) if row else None


# --- supersede, reviews, merge ---------------------------------------------------------------------


def lifecycle_supersede(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    older_id: UUID,
    newer_id: UUID,
    keep_until: datetime | None,
    now: datetime,
) -> UUID | None:
    """The retired id; None when the older memory was no longer live."""
    row = _sql.one(
        conn,
        "lifecycle_supersede",
        tenant_id=tenant_id,
        agent_id=agent_id,
        older_id=older_id,
        newer_id=newer_id,
        keep_until=keep_until,
        now=now,
    )
    return row["id"] if row else None


def lifecycle_add_review(
    conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID, other_id: UUID, reason: str, now: datetime
) -> UUID | None:
    """The new review's id; None when the pair is on the list already."""
    row = _sql.one(
        conn,
        "lifecycle_add_review",
        tenant_id=tenant_id,
        agent_id=agent_id,
        memory_id=memory_id,
        other_id=other_id,
        reason=reason,
        now=now,
    )
    return row["id"] if row else None


def lifecycle_reviews(conn: Conn, *, tenant_id: UUID, agent_id: str, status: str | None, limit: int) -> list[Review]:
    rows = _sql.all_(conn, "lifecycle_reviews", tenant_id=tenant_id, agent_id=agent_id, status=status, limit=limit)
    return [Review(**r) for r in rows]


def lifecycle_lock_review(conn: Conn, *, tenant_id: UUID, agent_id: str, review_id: UUID) -> LockedReview | None:
    row = _sql.one(conn, "lifecycle_lock_review", tenant_id=tenant_id, agent_id=agent_id, review_id=review_id)
    return LockedReview(**row) if row else None


def lifecycle_resolve_review(
    conn: Conn, *, tenant_id: UUID, review_id: UUID, resolution: str, actor: str, now: datetime
) -> UUID | None:
    row = _sql.one(
        conn,
        "lifecycle_resolve_review",
        tenant_id=tenant_id,
        review_id=review_id,
        resolution=resolution,
        actor=actor,
        now=now,
    )
    return row["id"] if row else None


def lifecycle_merge_into(
    conn: Conn, *, tenant_id: UUID, agent_id: str, survivor: UUID, other: UUID, now: datetime
) -> UUID | None:
    """The survivor's id; None when either memory is no longer live."""
    row = _sql.one(
        conn, "lifecycle_merge_into", tenant_id=tenant_id, agent_id=agent_id, survivor=survivor, other=other, now=now
    )
    return row["id"] if row else None


def lifecycle_merge_finish(
    conn: Conn, *, tenant_id: UUID, agent_id: str, survivor: UUID, other: UUID, now: datetime, reason: str, actor: str
) -> int:
    """How many rows were merged away (0 or 1)."""
    row = _sql.one(
        conn,
        "lifecycle_merge_finish",
        tenant_id=tenant_id,
        agent_id=agent_id,
        survivor=survivor,
        other=other,
        now=now,
        reason=reason,
        actor=actor,
    )
    return int(row["n"]) if row else 0


# --- history and events ----------------------------------------------------------------------------


def lifecycle_history(conn: Conn, *, tenant_id: UUID, agent_id: str, memory_id: UUID) -> list[Version]:
    rows = _sql.all_(conn, "lifecycle_history", tenant_id=tenant_id, agent_id=agent_id, memory_id=memory_id)
    return [Version(**r) for r in rows]


def lifecycle_aliases_of(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[UUID]) -> list[UUID]:
    rows = _sql.all_(conn, "lifecycle_aliases_of", tenant_id=tenant_id, agent_id=agent_id, ids=ids)
    return [r["alias_id"] for r in rows]


def lifecycle_events(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[UUID], limit: int) -> list[Event]:
    rows = _sql.all_(conn, "lifecycle_events", tenant_id=tenant_id, agent_id=agent_id, ids=ids, limit=limit)
    return [Event(**r) for r in rows]


def lifecycle_insert_events(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    event: str,
    actor: str,
    now: datetime,
    ids: list[str],
    reasons: list[str],
    related: list[str | None],
) -> int:
    """One audit row per id, each with its reason (and related id or None)."""
    return _sql.run(
        conn,
        "lifecycle_insert_events",
        tenant_id=tenant_id,
        agent_id=agent_id,
        event=event,
        actor=actor,
        now=now,
        ids=ids,
        reasons=reasons,
        related=related,
    )


# --- policy overrides ------------------------------------------------------------------------------


def lifecycle_set_agent_policy(
    conn: Conn, *, tenant_id: UUID, agent_id: str, policy: dict[str, Any]
) -> dict[str, Any] | None:
    row = _sql.one(conn, "lifecycle_set_agent_policy", tenant_id=tenant_id, agent_id=agent_id, policy=Jsonb(policy))
    return row["policy"] if row else None


def lifecycle_set_tenant_policy(conn: Conn, *, tenant_id: UUID, policy: dict[str, Any]) -> dict[str, Any] | None:
    row = _sql.one(conn, "lifecycle_set_tenant_policy", tenant_id=tenant_id, policy=Jsonb(policy))
    return row["policy"] if row else None


# --- the retention sweep ---------------------------------------------------------------------------


def retention_due(conn: Conn, *, before: datetime, limit: int) -> list[TenantAgent]:
    """Across tenants (a SECURITY DEFINER function): agents not swept since `before`."""
    return [TenantAgent(**r) for r in _sql.all_(conn, "retention_due", before=before, limit=limit)]


def retention_start(
    conn: Conn, *, tenant_id: UUID, agent_id: str, run_key: str, trigger: str, now: datetime, resume: bool
) -> UUID | None:
    """The run's id; None when run_key was used (unless resume takes over a running one)."""
    row = _sql.one(
        conn,
        "retention_start",
        tenant_id=tenant_id,
        agent_id=agent_id,
        run_key=run_key,
        trigger=trigger,
        now=now,
        resume=resume,
    )
    return row["id"] if row else None


def retention_state(
    conn: Conn, *, tenant_id: UUID, agent_id: str, now: datetime, tiers: list[str], protected: list[str]
) -> RetentionState | None:
    row = _sql.one(
        conn, "retention_state", tenant_id=tenant_id, agent_id=agent_id, now=now, tiers=tiers, protected=protected
    )
    if row is None:
        return None
    return RetentionState(
        row["retention_done_at"],
        int(row["live"]),
        row["retention_repair_clock"],
        row["retention_repair_after"],
        int(row["episodic"]),
        int(row["semantic"]),
    )


def retention_finish(
    conn: Conn,
    *,
    tenant_id: UUID,
    run_id: str | UUID | None,
    status: str,
    scanned: int,
    expired: int,
    forgotten_age: int,
    forgotten_unused: int,
    forgotten_cap: int,
    forgotten_distilled: int,
    decayed: int,
    promoted: int,
    merged: int,
    superseded: int,
    reviews: int,
    batches: int,
    duration_ms: int,
    skipped_reason: str | None,
    error: str | None,
) -> int:
    return _sql.run(
        conn,
        "retention_finish",
        tenant_id=tenant_id,
        run_id=run_id,
        status=status,
        scanned=scanned,
        expired=expired,
        forgotten_age=forgotten_age,
        forgotten_unused=forgotten_unused,
        forgotten_cap=forgotten_cap,
        forgotten_distilled=forgotten_distilled,
        decayed=decayed,
        promoted=promoted,
        merged=merged,
        superseded=superseded,
        reviews=reviews,
        batches=batches,
        duration_ms=duration_ms,
        skipped_reason=skipped_reason,
        error=error,
    )


def retention_stamp(conn: Conn, *, tenant_id: UUID, agent_id: str, now: datetime, done_at: datetime | None) -> int:
    return _sql.run(conn, "retention_stamp", tenant_id=tenant_id, agent_id=agent_id, now=now, done_at=done_at)


def retention_repair_mark(
    conn: Conn, *, tenant_id: UUID, agent_id: str, clock: datetime | None, after: UUID | None
) -> int:
    return _sql.run(conn, "retention_repair_mark", tenant_id=tenant_id, agent_id=agent_id, clock=clock, after=after)


def retention_runs(conn: Conn, *, tenant_id: UUID, agent_id: str, limit: int) -> list[RetentionRun]:
    """Newest first."""
    rows = _sql.all_(conn, "retention_runs", tenant_id=tenant_id, agent_id=agent_id, limit=limit)
    return [RetentionRun(**r) for r in rows]


def retention_purge_expired(
    conn: Conn, *, tenant_id: UUID, agent_id: str, now: datetime, batch: int, actor: str
) -> int:
    """One batch; how many were deleted."""
    row = _sql.one(
        conn, "retention_purge_expired", tenant_id=tenant_id, agent_id=agent_id, now=now, batch=batch, actor=actor
    )
    return int(row["n"]) if row else 0


def retention_forget_age(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    tiers: list[str],
    protected: list[str],
    now: datetime,
    cutoff: datetime,
    batch: int,
    reason: str,
    actor: str,
) -> int:
    """One batch; how many were forgotten."""
    row = _sql.one(
        conn,
        "retention_forget_age",
        tenant_id=tenant_id,
        agent_id=agent_id,
        tiers=tiers,
        protected=protected,
        now=now,
        cutoff=cutoff,
        batch=batch,
        reason=reason,
        actor=actor,
    )
    return int(row["n"]) if row else 0


def retention_forget_unused(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    tiers: list[str],
    protected: list[str],
    now: datetime,
    cutoff: datetime,
    batch: int,
    reason: str,
    actor: str,
) -> int:
    """One batch; how many were forgotten."""
    row = _sql.one(
        conn,
        "retention_forget_unused",
        tenant_id=tenant_id,
        agent_id=agent_id,
        tiers=tiers,
        protected=protected,
        now=now,
        cutoff=cutoff,
        batch=batch,
        reason=reason,
        actor=actor,
    )
    return int(row["n"]) if row else 0


def retention_forget_cap(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    tiers: list[str],
    protected: list[str],
    now: datetime,
    cap: int,
    batch: int,
    reason: str,
    actor: str,
) -> int:
    """One batch; how many were forgotten."""
    row = _sql.one(
        conn,
        "retention_forget_cap",
        tenant_id=tenant_id,
        agent_id=agent_id,
        tiers=tiers,
        protected=protected,
        now=now,
        cap=cap,
        batch=batch,
        reason=reason,
        actor=actor,
    )
    return int(row["n"]) if row else 0


def retention_forget_distilled(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    now: datetime,
    cutoff: datetime,
    batch: int,
    reason: str,
    actor: str,
) -> int:
    """One batch of turns a live summary carries, distilled before cutoff; how many went."""
    row = _sql.one(
        conn,
        "retention_forget_distilled",
        tenant_id=tenant_id,
        agent_id=agent_id,
        now=now,
        cutoff=cutoff,
        batch=batch,
        reason=reason,
        actor=actor,
    )
    return int(row["n"]) if row else 0


def retention_forget_semantic_cap(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    protected: list[str],
    now: datetime,
    cap: int,
    batch: int,
    reason: str,
    actor: str,
) -> int:
    """One batch of the least valuable L1 items past the cap; how many went."""
    row = _sql.one(
        conn,
        "retention_forget_semantic_cap",
        tenant_id=tenant_id,
        agent_id=agent_id,
        protected=protected,
        now=now,
        cap=cap,
        batch=batch,
        reason=reason,
        actor=actor,
    )
    return int(row["n"]) if row else 0


def retention_decay(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    after: UUID,
    now: datetime,
    batch: int,
    protected: list[str],
    s_half: float | None,
    s_after: float | None,
    c_half: float | None,
    c_floor: float,
    step_days: float,
) -> DecayBatch:
    row = _sql.one(
        conn,
        "retention_decay",
        tenant_id=tenant_id,
        agent_id=agent_id,
        after=after,
        now=now,
        batch=batch,
        protected=protected,
        s_half=s_half,
        s_after=s_after,
        c_half=c_half,
        c_floor=c_floor,
        step_days=step_days,
    )
    assert row is not None  # aggregates: always one row
    return DecayBatch(row["last_id"], int(row["seen"]), int(row["n"]))


def retention_promote_candidates(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    after: UUID,
    now: datetime,
    min_recalls: int,
    min_confidence: float,
    batch: int,
) -> list[PromoteCandidate]:
    rows = _sql.all_(
        conn,
        "retention_promote_candidates",
        tenant_id=tenant_id,
        agent_id=agent_id,
        after=after,
        now=now,
        min_recalls=min_recalls,
        min_confidence=min_confidence,
        batch=batch,
    )
    return [PromoteCandidate(**r) for r in rows]


def retention_promote(
    conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[str], expires_at: datetime | None, now: datetime
) -> list[UUID]:
    """The ids promoted L1 -> L2."""
    rows = _sql.all_(
        conn, "retention_promote", tenant_id=tenant_id, agent_id=agent_id, ids=ids, expires_at=expires_at, now=now
    )
    return [r["id"] for r in rows]


def retention_fresh(
    conn: Conn, *, tenant_id: UUID, agent_id: str, after: UUID, now: datetime, since: datetime, batch: int
) -> list[UUID]:
    rows = _sql.all_(
        conn, "retention_fresh", tenant_id=tenant_id, agent_id=agent_id, after=after, now=now, since=since, batch=batch
    )
    return [r["id"] for r in rows]


def memory_pairs(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    ids: list[UUID],
    probe_terms: int,
    now: datetime,
    per_term: int,
    df_cap: int,
    max_pairs: int,
) -> list[Pair]:
    rows = _sql.all_(
        conn,
        "memory_pairs",
        tenant_id=tenant_id,
        agent_id=agent_id,
        ids=ids,
        probe_terms=probe_terms,
        now=now,
        per_term=per_term,
        df_cap=df_cap,
        max_pairs=max_pairs,
    )
    return [Pair(r["a"], r["b"], float(r["cosine"])) for r in rows]


def retention_facts(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[UUID], now: datetime) -> list[FactRow]:
    rows = _sql.all_(conn, "retention_facts", tenant_id=tenant_id, agent_id=agent_id, ids=ids, now=now)
    return [FactRow(**r) for r in rows]


# --- forget ----------------------------------------------------------------------------------------


def forget_match(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    provenance: str | None,
    memory_ids: list[UUID] | None,
    session_id: str | None,
    before: datetime | None,
    sources: list[str],
    subject: str | None = None,
) -> list[Matched]:
    rows = _sql.all_(
        conn,
        "forget_match",
        tenant_id=tenant_id,
        agent_id=agent_id,
        provenance=provenance,
        memory_ids=memory_ids,
        session_id=session_id,
        before=before,
        sources=sources,
        subject=subject,
    )
    return [Matched(**r) for r in rows]


def forget_match_episodes(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    episode_ids: list[UUID],
    session_id: str | None,
    before: datetime | None,
    subject: str | None = None,
) -> list[UUID]:
    rows = _sql.all_(
        conn,
        "forget_match_episodes",
        tenant_id=tenant_id,
        agent_id=agent_id,
        episode_ids=episode_ids,
        session_id=session_id,
        before=before,
        subject=subject,
    )
    return [r["id"] for r in rows]


def forget_derived(
    conn: Conn, *, tenant_id: UUID, agent_id: str, kinds: list[str], ids: list[UUID], id_texts: list[str]
) -> list[Matched]:
    rows = _sql.all_(
        conn, "forget_derived", tenant_id=tenant_id, agent_id=agent_id, kinds=kinds, ids=ids, id_texts=id_texts
    )
    return [Matched(**r) for r in rows]


def forget_rederive(
    conn: Conn, *, tenant_id: UUID, agent_id: str, forgotten: list[UUID], derived: list[UUID]
) -> list[UUID]:
    """The surviving evidence put back into consolidation's window."""
    rows = _sql.all_(
        conn, "forget_rederive", tenant_id=tenant_id, agent_id=agent_id, forgotten=forgotten, derived=derived
    )
    return [r["id"] for r in rows]


def forget_texts(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[UUID]) -> list[str]:
    return [r["text"] for r in _sql.all_(conn, "forget_texts", tenant_id=tenant_id, agent_id=agent_id, ids=ids)]


def forget_counts(conn: Conn, *, tenant_id: UUID, ids: list[UUID]) -> ErasedCounts:
    """The postings, connections and aliases that go with these memories."""
    row = _sql.one(conn, "forget_counts", tenant_id=tenant_id, ids=ids)
    assert row is not None  # aggregates: always one row
    return ErasedCounts(int(row["terms"]), int(row["connections"]), int(row["aliases"]))


def forget_delete_memories(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[UUID]) -> list[UUID]:
    rows = _sql.all_(conn, "forget_delete_memories", tenant_id=tenant_id, agent_id=agent_id, ids=ids)
    return [r["id"] for r in rows]


def forget_delete_episodes(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[UUID]) -> list[UUID]:
    rows = _sql.all_(conn, "forget_delete_episodes", tenant_id=tenant_id, agent_id=agent_id, ids=ids)
    return [r["id"] for r in rows]


def forget_profiles(conn: Conn, *, tenant_id: UUID, agent_id: str, needles: list[str]) -> list[int]:
    """The profile versions deleted because they cite one of the needles."""
    rows = _sql.all_(conn, "forget_profiles", tenant_id=tenant_id, agent_id=agent_id, needles=needles)
    return [r["version"] for r in rows]


def forget_turns(conn: Conn, *, tenant_id: UUID, agent_id: str, sources: list[str]) -> list[Matched]:
    """The turns of the episodes named by sources ('episode:<id>')."""
    rows = _sql.all_(conn, "forget_turns", tenant_id=tenant_id, agent_id=agent_id, sources=sources)
    return [Matched(**r) for r in rows]


def forget_episode_texts(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[UUID]) -> list[str]:
    """Every text these episodes hold: their content and each string of their messages."""
    rows = _sql.all_(conn, "forget_episode_texts", tenant_id=tenant_id, agent_id=agent_id, ids=ids)
    return [t for r in rows for t in (r["content"], *r["strings"]) if t]


def forget_memory_copies(
    conn: Conn, *, tenant_id: UUID, agent_id: str, needles: list[str], exclude: list[UUID]
) -> list[Matched]:
    rows = _sql.all_(
        conn, "forget_memory_copies", tenant_id=tenant_id, agent_id=agent_id, needles=needles, exclude=exclude
    )
    return [Matched(**r) for r in rows]


def forget_episode_copies(
    conn: Conn, *, tenant_id: UUID, agent_id: str, needles: list[str], exclude: list[UUID]
) -> list[UUID]:
    rows = _sql.all_(
        conn, "forget_episode_copies", tenant_id=tenant_id, agent_id=agent_id, needles=needles, exclude=exclude
    )
    return [r["id"] for r in rows]


def forget_scrub_events(conn: Conn, *, tenant_id: UUID, agent_id: str, needles: list[str]) -> tuple[int, int]:
    """(audit events, reviews) whose reason quoted a needle, now without it."""
    row = _sql.one(conn, "forget_scrub_events", tenant_id=tenant_id, agent_id=agent_id, needles=needles)
    assert row is not None  # aggregates: always one row
    return int(row["events"]), int(row["reviews"])
