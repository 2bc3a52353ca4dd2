"""Typed queries of queries/sessions.sql: sessions, context calls, archives, webhooks and their
deliveries, rumination; rows come back as frozen dataclasses. The caller owns the transaction
and binds the tenant (db.tenant_tx); the cross-tenant ones go through SECURITY DEFINER functions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from memworker.storage import _sql


@dataclass(frozen=True, slots=True)
class Session:  # a sessions row: its working memory, plan and context use
    tenant_id: UUID
    agent_id: str
    id: str
    status: str
    metadata: dict[str, Any]
    working: dict[str, Any]
    plan: dict[str, Any] | None
    revision: int
    window_tokens: int | None
    log_tokens: int
    last_context_tokens: int
    reported_used: float | None
    flush_armed: bool
    flush_count: int
    flushed_at: datetime | None
    flushed_revision: int
    last_flush_episode_id: UUID | None
    archive_count: int
    created_at: datetime
    updated_at: datetime
    archived_at: datetime | None
    restored_at: datetime | None
    subject: str | None


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
class CascadeCounts:
    calls: int
    archives: int
    items: int


@dataclass(frozen=True, slots=True)
class SessionItem:  # a session_items row without its keys: one raw item of the session's log
    position: int
    item: Any
    created_at: datetime


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
class ArchiveInfo:  # an archive without its data: what listings show
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
class Archive(ArchiveInfo):  # a session_archives row
    tenant_id: UUID
    agent_id: str
    data: bytes
    episode_ids: list[UUID]


@dataclass(frozen=True, slots=True)
class TenantAgent:
    tenant_id: UUID
    agent_id: str


@dataclass(frozen=True, slots=True)
class Webhook:  # the secret included: never show it after creation
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
class WebhookDelivery:  # a delivery as the API lists it (no payload)
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
class ClaimedDelivery(WebhookDelivery):  # the whole row, just claimed, with its webhook's url and secret
    tenant_id: UUID
    payload: Any
    lease_until: datetime | None
    url: str
    secret: str


@dataclass(frozen=True, slots=True)
class DeliveryPayload:
    id: UUID
    payload: Any


@dataclass(frozen=True, slots=True)
class DueDelivery:
    tenant_id: UUID
    delivery_id: UUID


# --- sessions ------------------------------------------------------------------------------------

insert = _sql.Row("insert", Session, subject=None)  # None when the session exists already
get = _sql.Row("get", Session)
get_locked = _sql.Row("get_locked", Session)  # get, FOR UPDATE
# The agent's sessions (of one status unless None), the last updated first.
recent = _sql.Rows("recent", Session)
save_working = _sql.Row("save_working", Session)
set_working = _sql.Run("set_working")
save_plan = _sql.Row("save_plan", Session)
record_use = _sql.Run("record_use")
mark_flushed = _sql.Run("mark_flushed")
add_log_tokens = _sql.Run("add_log_tokens")
mark_archived = _sql.Run("mark_archived")
# flushed_at and last_flush_episode_id as the archive holds them (ISO / uuid strings or None).
restore = _sql.Run("restore")
episodes = _sql.Rows("episodes", SessionEpisode)
episodes_present = _sql.One[int]("episodes_present", _sql.first)  # how many of these ids still exist
cascade_counts = _sql.One("cascade_counts", CascadeCounts)  # what goes with the session (cascade)
delete_deliveries = _sql.Run("delete_deliveries")
delete = _sql.Run("delete")
of_subject = _sql.Rows[str]("of_subject", _sql.first)
# The sessions holding a needle (lower-cased) in working memory, plan or metadata, locked.
with_text = _sql.Rows("with_text", Session)
save_scrubbed = _sql.Run("save_scrubbed")
context_calls_scrub = _sql.Run("context_calls_scrub")  # deletes the calls whose query holds a needle
# The webhook deliveries holding a needle in a string, locked.
deliveries_with_text = _sql.Rows("deliveries_with_text", DeliveryPayload)
delivery_scrubbed = _sql.Run("delivery_scrubbed")  # payload: a JSON value (Jsonb)

# --- session items -------------------------------------------------------------------------------

items_append = _sql.Rows[int]("items_append", _sql.first)  # the new places (items: a Jsonb array)
items_list = _sql.Rows("items_list", SessionItem)  # the last `limit` (None: all), in order
items_pop = _sql.Row("items_pop", SessionItem)  # None: the session has no item
items_clear = _sql.Run("items_clear")
items_scrub = _sql.Run("items_scrub")  # deletes the agent's items holding a needle

# --- context calls -------------------------------------------------------------------------------

context_call_insert = _sql.One[UUID]("context_call_insert", _sql.first)
# id, memory_ids and created_at as an archive holds them (strings).
context_call_restore = _sql.Run("context_call_restore")
context_calls_of_session = _sql.Rows("context_calls_of_session", ContextCall)
context_calls_recent = _sql.Rows("context_calls_recent", ContextCall)
context_calls_delete = _sql.Run("context_calls_delete")
context_pinned_memories = _sql.Rows("context_pinned_memories", PinnedMemory)
context_bump_access = _sql.Run("context_bump_access")

# --- archives ------------------------------------------------------------------------------------

archive_insert = _sql.One("archive_insert", ArchiveInfo)
archive_get = _sql.Row("archive_get", Archive)
archive_list = _sql.Rows("archive_list", ArchiveInfo)
archive_keys = _sql.Rows("archive_keys", ArchiveInfo)
archives_with_episodes = _sql.Rows("archives_with_episodes", ArchiveInfo)
archive_rewrite = _sql.Run("archive_rewrite")
archives_in_window = _sql.Rows("archives_in_window", Archive)
# Across tenants: agents with archives in [start, end).
rumination_due = _sql.Rows("rumination_due", TenantAgent)

# --- webhooks ------------------------------------------------------------------------------------

webhook_insert = _sql.One("webhook_insert", Webhook)
webhook_list = _sql.Rows("webhook_list", Webhook)
webhook_get = _sql.Row("webhook_get", Webhook)
webhook_delete = _sql.Row[UUID]("webhook_delete", _sql.first)  # None: there was none
webhook_emit = _sql.Rows[UUID]("webhook_emit", _sql.first)  # the new delivery ids
webhook_deliveries = _sql.Rows("webhook_deliveries", WebhookDelivery)
delivery_claim = _sql.Row("delivery_claim", ClaimedDelivery)  # None: not due, or another sender holds it
delivery_record = _sql.Run("delivery_record")
# Across tenants: the deliveries due (or stuck past their lease) before `before`.
due_webhook_deliveries = _sql.Rows("due_webhook_deliveries", DueDelivery)
prune_webhook_deliveries = _sql.One[int]("prune_webhook_deliveries", _sql.first)  # across tenants: how many went
