"""Typed queries of queries/sessions.sql: sessions, context calls, archives, webhooks and their
deliveries, rumination. One function per `-- name:` block, named like it; rows come back as
frozen dataclasses (the session row itself stays a dict: see SessionRow).

The caller owns the transaction and binds the tenant (db.tenant_tx)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from memworker.storage import _sql
from memworker.storage.db import Conn

# `SELECT *` of sessions: the row flows through the session domain logic (session.summary,
# archive.snapshot, usage_view...) and its unit tests as a plain dict, so it stays one.
SessionRow = dict[str, Any]


@dataclass(frozen=True, slots=True)
class SessionEpisode:
    id: UUID
    content: str
    messages: Any
    metadata: dict[str, Any]
    idempotency_key: str | None
    status: str
    memory_ids: list[UUID]
    occurred_at: datetime
    created_at: datetime
    stored_at: datetime | None


@dataclass(frozen=True, slots=True)
class ForgetCounts:
    calls: int
    archives: int


@dataclass(frozen=True, slots=True)
class ContextCall:
    id: UUID
    query: str
    max_tokens: int
    tokens: int
    memory_ids: list[UUID]
    dropped: dict[str, Any]
    sections: dict[str, Any]
    used: float | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class PinnedMemory:
    id: UUID
    text: str
    kind: str
    tier: str
    confidence: float
    created_at: datetime
    flags: list[str]


@dataclass(frozen=True, slots=True)
class ArchiveInfo:
    """An archive without its data: what listings show."""

    session_id: str
    version: int
    format_version: int
    bytes: int
    raw_bytes: int
    sha256: str
    counts: dict[str, Any]
    distill_episode_id: UUID | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Archive:
    """A session_archives row."""

    tenant_id: UUID
    agent_id: str
    session_id: str
    version: int
    format_version: int
    data: bytes
    bytes: int
    raw_bytes: int
    sha256: str
    counts: dict[str, Any]
    episode_ids: list[UUID]
    distill_episode_id: UUID | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ArchiveData:
    session_id: str
    version: int
    data: bytes


@dataclass(frozen=True, slots=True)
class TenantAgent:
    tenant_id: UUID
    agent_id: str


@dataclass(frozen=True, slots=True)
class Webhook:
    """A webhooks row (the secret included: never show it after creation)."""

    id: UUID
    tenant_id: UUID
    url: str
    secret: str
    events: list[str]
    agent_ids: list[str] | None
    description: str
    active: bool
    created_at: datetime


@dataclass(frozen=True, slots=True)
class WebhookDelivery:
    """A delivery as the API lists it (no payload)."""

    id: UUID
    webhook_id: UUID
    event: str
    agent_id: str
    session_id: str | None
    status: str
    attempts: int
    next_attempt_at: datetime
    last_status: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None


@dataclass(frozen=True, slots=True)
class ClaimedDelivery:
    """A webhook_deliveries row just claimed for sending, with its webhook's url and secret."""

    id: UUID
    tenant_id: UUID
    webhook_id: UUID
    event: str
    agent_id: str
    session_id: str | None
    payload: Any
    status: str
    attempts: int
    next_attempt_at: datetime
    lease_until: datetime | None
    last_status: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None
    url: str
    secret: str


@dataclass(frozen=True, slots=True)
class DueDelivery:
    tenant_id: UUID
    delivery_id: UUID


# --- sessions ------------------------------------------------------------------------------------


def session_insert(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    metadata: dict[str, Any],
    working: dict[str, Any],
    window_tokens: int | None,
    revision: int,
    subject: str | None = None,
) -> SessionRow | None:
    """None when the session exists already."""
    return _sql.one(
        conn,
        "session_insert",
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        metadata=Jsonb(metadata),
        working=Jsonb(working),
        window_tokens=window_tokens,
        revision=revision,
        subject=subject,
    )


def session_get(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str) -> SessionRow | None:
    return _sql.one(conn, "session_get", tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)


def session_lock(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str) -> SessionRow | None:
    """session_get FOR UPDATE."""
    return _sql.one(conn, "session_lock", tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)


def session_list(conn: Conn, *, tenant_id: UUID, agent_id: str, status: str | None, limit: int) -> list[SessionRow]:
    return _sql.all_(conn, "session_list", tenant_id=tenant_id, agent_id=agent_id, status=status, limit=limit)


def session_save_working(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, working: dict[str, Any], revision: int
) -> SessionRow | None:
    return _sql.one(
        conn,
        "session_save_working",
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        working=Jsonb(working),
        revision=revision,
    )


def session_set_working(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, working: dict[str, Any]) -> int:
    return _sql.run(
        conn,
        "session_set_working",
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        working=Jsonb(working),
    )


def session_save_plan(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, plan: dict[str, Any], revision: int
) -> SessionRow | None:
    return _sql.one(
        conn,
        "session_save_plan",
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        plan=Jsonb(plan),
        revision=revision,
    )


def session_record_use(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    context_tokens: int | None,
    reported: float | None,
    window_tokens: int | None,
    armed: bool,
) -> int:
    return _sql.run(
        conn,
        "session_record_use",
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        context_tokens=context_tokens,
        reported=reported,
        window_tokens=window_tokens,
        armed=armed,
    )


def session_flushed(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, revision: int, episode_id: UUID | None
) -> int:
    return _sql.run(
        conn,
        "session_flushed",
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        revision=revision,
        episode_id=episode_id,
    )


def session_log_tokens(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, tokens: int) -> int:
    return _sql.run(
        conn, "session_log_tokens", tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, tokens=tokens
    )


def session_archived(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, version: int) -> int:
    return _sql.run(
        conn, "session_archived", tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, version=version
    )


def session_restore(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    metadata: dict[str, Any],
    working: dict[str, Any],
    plan: dict[str, Any] | None,
    revision: int,
    window_tokens: int | None,
    log_tokens: int,
    last_context_tokens: int,
    reported_used: float | None,
    flush_armed: bool,
    flush_count: int,
    flushed_at: Any,
    flushed_revision: int,
    last_flush_episode_id: Any,
) -> int:
    """flushed_at and last_flush_episode_id as the archive holds them (ISO / uuid strings or None)."""
    return _sql.run(
        conn,
        "session_restore",
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        metadata=Jsonb(metadata),
        working=Jsonb(working),
        plan=Jsonb(plan) if plan else None,
        revision=revision,
        window_tokens=window_tokens,
        log_tokens=log_tokens,
        last_context_tokens=last_context_tokens,
        reported_used=reported_used,
        flush_armed=flush_armed,
        flush_count=flush_count,
        flushed_at=flushed_at,
        flushed_revision=flushed_revision,
        last_flush_episode_id=last_flush_episode_id,
    )


def session_episodes(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str) -> list[SessionEpisode]:
    rows = _sql.all_(conn, "session_episodes", tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)
    return [SessionEpisode(**r) for r in rows]


def episodes_present(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[Any]) -> int:
    """How many of these episode ids still exist."""
    row = _sql.one(conn, "episodes_present", tenant_id=tenant_id, agent_id=agent_id, ids=ids)
    return int(row["n"]) if row else 0


def session_forget_counts(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str) -> ForgetCounts:
    row = _sql.one(conn, "session_forget_counts", tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)
    return ForgetCounts(int(row["calls"]), int(row["archives"])) if row else ForgetCounts(0, 0)


def session_forget_deliveries(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str) -> int:
    return _sql.run(conn, "session_forget_deliveries", tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)


def session_forget(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str) -> int:
    return _sql.run(conn, "session_forget", tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)


def sessions_of_subject(conn: Conn, *, tenant_id: UUID, agent_id: str, subject: str) -> list[str]:
    rows = _sql.all_(conn, "sessions_of_subject", tenant_id=tenant_id, agent_id=agent_id, subject=subject)
    return [r["id"] for r in rows]


def sessions_with_text(conn: Conn, *, tenant_id: UUID, agent_id: str, needles: list[str]) -> list[SessionRow]:
    """The sessions holding a needle (lower-cased) in working memory, plan or metadata, locked."""
    return _sql.all_(conn, "sessions_with_text", tenant_id=tenant_id, agent_id=agent_id, needles=needles)


def session_scrubbed(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    working: dict[str, Any],
    plan: dict[str, Any] | None,
    metadata: dict[str, Any],
) -> int:
    return _sql.run(
        conn,
        "session_scrubbed",
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        working=Jsonb(working),
        plan=Jsonb(plan) if plan is not None else None,
        metadata=Jsonb(metadata),
    )


def context_calls_scrub(conn: Conn, *, tenant_id: UUID, agent_id: str, needles: list[str]) -> int:
    """How many logged calls whose query held a needle were deleted."""
    return len(_sql.all_(conn, "context_calls_scrub", tenant_id=tenant_id, agent_id=agent_id, needles=needles))


def deliveries_with_text(conn: Conn, *, tenant_id: UUID, agent_id: str, needles: list[str]) -> list[tuple[UUID, Any]]:
    """(id, payload) of the webhook deliveries holding a needle in a string, locked."""
    rows = _sql.all_(conn, "deliveries_with_text", tenant_id=tenant_id, agent_id=agent_id, needles=needles)
    return [(r["id"], r["payload"]) for r in rows]


def delivery_scrubbed(conn: Conn, *, tenant_id: UUID, delivery_id: UUID, payload: Any) -> None:
    _sql.run(conn, "delivery_scrubbed", tenant_id=tenant_id, delivery_id=delivery_id, payload=Jsonb(payload))


def archive_keys(conn: Conn, *, tenant_id: UUID, agent_id: str) -> list[tuple[str, int]]:
    rows = _sql.all_(conn, "archive_keys", tenant_id=tenant_id, agent_id=agent_id)
    return [(r["session_id"], r["version"]) for r in rows]


# --- context calls -------------------------------------------------------------------------------


def context_call_insert(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    query: str,
    max_tokens: int,
    tokens: int,
    memory_ids: list[Any],
    dropped: dict[str, Any],
    sections: dict[str, Any],
    used: float | None,
) -> UUID:
    """The new call's id."""
    row = _sql.one(
        conn,
        "context_call_insert",
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        query=query,
        max_tokens=max_tokens,
        tokens=tokens,
        memory_ids=memory_ids,
        dropped=Jsonb(dropped),
        sections=Jsonb(sections),
        used=used,
    )
    assert row is not None  # an INSERT ... RETURNING without ON CONFLICT
    call_id: UUID = row["id"]
    return call_id


def context_call_restore(
    conn: Conn,
    *,
    id: Any,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    query: str,
    max_tokens: int,
    tokens: int,
    memory_ids: list[Any],
    dropped: dict[str, Any],
    sections: dict[str, Any],
    used: float | None,
    created_at: Any,
) -> int:
    """id, memory_ids and created_at as an archive holds them (strings)."""
    return _sql.run(
        conn,
        "context_call_restore",
        id=id,
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        query=query,
        max_tokens=max_tokens,
        tokens=tokens,
        memory_ids=memory_ids,
        dropped=Jsonb(dropped),
        sections=Jsonb(sections),
        used=used,
        created_at=created_at,
    )


def context_calls_of_session(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str) -> list[ContextCall]:
    rows = _sql.all_(conn, "context_calls_of_session", tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)
    return [ContextCall(**r) for r in rows]


def context_calls_recent(
    conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, limit: int
) -> list[ContextCall]:
    rows = _sql.all_(
        conn, "context_calls_recent", tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, limit=limit
    )
    return [ContextCall(**r) for r in rows]


def context_calls_delete(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str) -> int:
    return _sql.run(conn, "context_calls_delete", tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)


def context_pinned_memories(
    conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[Any], hide_flagged: bool
) -> list[PinnedMemory]:
    rows = _sql.all_(
        conn, "context_pinned_memories", tenant_id=tenant_id, agent_id=agent_id, ids=ids, hide_flagged=hide_flagged
    )
    return [PinnedMemory(**r) for r in rows]


def context_bump_access(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[Any]) -> int:
    return _sql.run(conn, "context_bump_access", tenant_id=tenant_id, agent_id=agent_id, ids=ids)


# --- archives ------------------------------------------------------------------------------------


def archive_insert(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    version: int,
    format_version: int,
    data: bytes,
    bytes: int,
    raw_bytes: int,
    sha256: str,
    counts: dict[str, Any],
    episode_ids: list[UUID],
    distill_episode_id: UUID | None,
) -> ArchiveInfo:
    row = _sql.one(
        conn,
        "archive_insert",
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        version=version,
        format_version=format_version,
        data=data,
        bytes=bytes,
        raw_bytes=raw_bytes,
        sha256=sha256,
        counts=Jsonb(counts),
        episode_ids=episode_ids,
        distill_episode_id=distill_episode_id,
    )
    assert row is not None  # an INSERT ... RETURNING without ON CONFLICT
    return ArchiveInfo(**row)


def archive_get(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str, version: int) -> Archive | None:
    row = _sql.one(conn, "archive_get", tenant_id=tenant_id, agent_id=agent_id, session_id=session_id, version=version)
    return Archive(**row) if row else None


def archive_list(conn: Conn, *, tenant_id: UUID, agent_id: str, session_id: str) -> list[ArchiveInfo]:
    rows = _sql.all_(conn, "archive_list", tenant_id=tenant_id, agent_id=agent_id, session_id=session_id)
    return [ArchiveInfo(**r) for r in rows]


def archives_with_episodes(conn: Conn, *, tenant_id: UUID, agent_id: str, ids: list[UUID]) -> list[ArchiveData]:
    rows = _sql.all_(conn, "archives_with_episodes", tenant_id=tenant_id, agent_id=agent_id, ids=ids)
    return [ArchiveData(**r) for r in rows]


def archive_rewrite(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    session_id: str,
    version: int,
    data: bytes,
    bytes: int,
    raw_bytes: int,
    sha256: str,
    counts: dict[str, Any],
    episode_ids: list[Any],
) -> int:
    return _sql.run(
        conn,
        "archive_rewrite",
        tenant_id=tenant_id,
        agent_id=agent_id,
        session_id=session_id,
        version=version,
        data=data,
        bytes=bytes,
        raw_bytes=raw_bytes,
        sha256=sha256,
        counts=Jsonb(counts),
        episode_ids=episode_ids,
    )


def archives_in_window(
    conn: Conn, *, tenant_id: UUID, agent_id: str, start: datetime, end: datetime
) -> list[ArchiveData]:
    rows = _sql.all_(conn, "archives_in_window", tenant_id=tenant_id, agent_id=agent_id, start=start, end=end)
    return [ArchiveData(**r) for r in rows]


def rumination_due(
    conn: Conn, *, start: datetime, end: datetime, defaults: dict[str, Any], limit: int
) -> list[TenantAgent]:
    """Across tenants (a SECURITY DEFINER function): agents with archives in [start, end)."""
    rows = _sql.all_(conn, "rumination_due", start=start, end=end, defaults=Jsonb(defaults), limit=limit)
    return [TenantAgent(**r) for r in rows]


# --- webhooks ------------------------------------------------------------------------------------


def webhook_insert(
    conn: Conn,
    *,
    tenant_id: UUID,
    url: str,
    secret: str,
    events: list[str],
    agent_ids: list[str] | None,
    description: str,
) -> Webhook:
    row = _sql.one(
        conn,
        "webhook_insert",
        tenant_id=tenant_id,
        url=url,
        secret=secret,
        events=events,
        agent_ids=agent_ids,
        description=description,
    )
    assert row is not None  # an INSERT ... RETURNING without ON CONFLICT
    return Webhook(**row)


def webhook_list(conn: Conn, *, tenant_id: UUID) -> list[Webhook]:
    return [Webhook(**r) for r in _sql.all_(conn, "webhook_list", tenant_id=tenant_id)]


def webhook_get(conn: Conn, *, tenant_id: UUID, webhook_id: UUID) -> Webhook | None:
    row = _sql.one(conn, "webhook_get", tenant_id=tenant_id, webhook_id=webhook_id)
    return Webhook(**row) if row else None


def webhook_delete(conn: Conn, *, tenant_id: UUID, webhook_id: UUID) -> UUID | None:
    """The deleted webhook's id, None when there was none."""
    row = _sql.one(conn, "webhook_delete", tenant_id=tenant_id, webhook_id=webhook_id)
    return row["id"] if row else None


def webhook_emit(
    conn: Conn, *, tenant_id: UUID, agent_id: str, event: str, session_id: str | None, payload: dict[str, Any]
) -> list[UUID]:
    """The new delivery ids."""
    rows = _sql.all_(
        conn,
        "webhook_emit",
        tenant_id=tenant_id,
        agent_id=agent_id,
        event=event,
        session_id=session_id,
        payload=Jsonb(payload),
    )
    return [r["id"] for r in rows]


def webhook_deliveries(conn: Conn, *, tenant_id: UUID, webhook_id: UUID, limit: int) -> list[WebhookDelivery]:
    rows = _sql.all_(conn, "webhook_deliveries", tenant_id=tenant_id, webhook_id=webhook_id, limit=limit)
    return [WebhookDelivery(**r) for r in rows]


def delivery_claim(conn: Conn, *, tenant_id: UUID, delivery_id: UUID, lease_s: float) -> ClaimedDelivery | None:
    """None when the delivery is not due or another sender holds it."""
    row = _sql.one(conn, "delivery_claim", tenant_id=tenant_id, delivery_id=delivery_id, lease_s=lease_s)
    return ClaimedDelivery(**row) if row else None


def delivery_record(
    conn: Conn,
    *,
    tenant_id: UUID,
    delivery_id: UUID,
    attempts: int,
    status: str,
    retry_in_s: float,
    last_status: int | None,
    last_error: str | None,
) -> int:
    return _sql.run(
        conn,
        "delivery_record",
        tenant_id=tenant_id,
        delivery_id=delivery_id,
        attempts=attempts,
        status=status,
        retry_in_s=retry_in_s,
        last_status=last_status,
        last_error=last_error,
    )


def due_webhook_deliveries(conn: Conn, *, before: datetime, limit: int) -> list[DueDelivery]:
    """Across tenants (a SECURITY DEFINER function)."""
    return [DueDelivery(**r) for r in _sql.all_(conn, "due_webhook_deliveries", before=before, limit=limit)]


def prune_webhook_deliveries(conn: Conn, *, before: datetime) -> int:
    """Across tenants (a SECURITY DEFINER function); how many were deleted."""
    row = _sql.one(conn, "prune_webhook_deliveries", before=before)
    return int(row["n"]) if row else 0
