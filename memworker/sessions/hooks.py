"""Tenant webhooks for session events: pre_turn (a context was
built), post_turn (an episode was stored) and archive (a session was archived).

An event writes one delivery row per matching webhook in the transaction of the event
itself (an outbox), so a delivery exists exactly when its event committed. A worker sends
it afterwards (tasks/session_tasks.py): the request that caused the event never waits for
a receiver. Each attempt is recorded on the row; failures are retried with exponential
backoff up to Settings.webhook_max_attempts, then the row is 'failed'. Delivery is at
least once: receivers dedupe on the delivery id, which is in the signed body.

Signature: X-Memworker-Signature: sha256=<hex HMAC-SHA256(secret, raw body)>.

Safety: URLs reach only public addresses, checked at registration and at each delivery
(egress.py); at most Settings.webhook_max_per_tenant webhooks and webhook_tenant_inflight
deliveries in flight per tenant (slots.py); the tenant sees coarse errors, the log the rest."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import random
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import httpx

from memworker import errors
from memworker.models import budget
from memworker.schemas import WebhookOut
from memworker.sessions import egress
from memworker.sessions.slots import TenantSlots
from memworker.sessions.statuses import DeliveryStatus
from memworker.settings import Settings
from memworker.storage import db, sessions_db
from memworker.storage.db import Conn, Pool

logger = logging.getLogger(__name__)

EVENTS = ("pre_turn", "post_turn", "archive")
LEASE_S = 60  # a sender that died mid-attempt leaves the row 'sending' this long
USER_AGENT = "memworker-webhooks/1"
BUSY_RETRY_S = 1.0  # a delivery waiting for its tenant's slot tries again after 1-2 s
# Episodes memworker writes itself from a session's state: not transcript, so not counted.
DERIVED = frozenset({"context_flush", "session_archive", "rumination"})


def create(
    conn: Conn,
    *,
    tenant_id: UUID,
    url: str,
    events: list[str],
    agent_ids: list[str] | None,
    settings: Settings,
    description: str = "",
    resolve: egress.Resolver = egress.system_resolve,
) -> tuple[sessions_db.Webhook, str]:
    """Register a webhook; returns (row, secret). The secret is shown once. The URL must
    point at a public address (or one the operator allows), and a tenant has at most
    Settings.webhook_max_per_tenant webhooks."""
    bad = [e for e in events if e not in EVENTS]
    if bad or not events:
        raise errors.InvalidInput(f"events must be a non-empty list of {list(EVENTS)}")
    egress.check(url, egress.Allow.parse(settings.webhook_allow_hosts), resolve)
    if len(sessions_db.webhook_list(conn, tenant_id=tenant_id)) >= settings.webhook_max_per_tenant:
        raise errors.InvalidInput(
            f"a tenant may have at most {settings.webhook_max_per_tenant} webhooks; delete one first"
        )
    secret = "whsec_" + secrets.token_urlsafe(32)
    row = sessions_db.webhook_insert(
        conn,
        tenant_id=tenant_id,
        url=url,
        secret=secret,
        events=sorted(set(events)),
        agent_ids=agent_ids,
        description=description,
    )
    return row, secret


def emit(
    conn: Conn, *, tenant_id: UUID, agent_id: str, event: str, data: dict[str, Any], session_id: str | None = None
) -> list[UUID]:
    """Queue the event for every active webhook of the tenant that wants it (in the caller's
    transaction); returns the delivery ids to send once it commits."""
    assert event in EVENTS
    return sessions_db.webhook_emit(
        conn, tenant_id=tenant_id, agent_id=agent_id, event=event, session_id=session_id, payload=data
    )


def sign(secret: str, body: bytes) -> str:
    """The X-Memworker-Signature header value for a body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, signature: str) -> bool:
    """For receivers (and tests): does the header match the body, in constant time?"""
    return hmac.compare_digest(sign(secret, body), signature)


def body_of(delivery: sessions_db.ClaimedDelivery) -> bytes:
    """The exact bytes sent (the same on every attempt, so a retry carries the same signature)."""
    doc = {
        "id": str(delivery.id),
        "event": delivery.event,
        "agent_id": delivery.agent_id,
        "session_id": delivery.session_id,
        "created_at": delivery.created_at.isoformat(),
        "data": delivery.payload,
    }
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def backoff_s(attempts: int, base_s: float) -> float:
    """Seconds before the next attempt after `attempts` failed ones: base, 2 base, 4 base, ... <= 1 h."""
    return float(min(base_s * 2 ** max(0, attempts - 1), 3600.0))


@dataclass(frozen=True)
class Attempt:
    # delivered | retry | failed | skipped (not due, or another sender has it) | busy (the
    # tenant has all its slots in flight: try again in retry_in_s, nothing was recorded)
    status: str
    retry_in_s: float | None = None
    http_status: int | None = None
    error: str | None = None


def deliver(
    pool: Pool,
    settings: Settings,
    *,
    tenant_id: UUID,
    delivery_id: UUID,
    slots: TenantSlots | None = None,
    resolve: egress.Resolver = egress.system_resolve,
) -> Attempt:
    """One attempt at one delivery, in one of the tenant's slots when given: claim it
    (compare-and-set, so two senders never both send), POST it outside any transaction to
    the address checked for this attempt, record the outcome."""
    token = slots.acquire(tenant_id) if slots is not None else None
    if slots is not None and token is None:
        return Attempt("busy", retry_in_s=BUSY_RETRY_S + random.uniform(0, BUSY_RETRY_S))
    try:
        return _attempt(pool, settings, tenant_id=tenant_id, delivery_id=delivery_id, resolve=resolve)
    finally:
        if slots is not None and token is not None:
            slots.release(tenant_id, token)


def _attempt(
    pool: Pool,
    settings: Settings,
    *,
    tenant_id: UUID,
    delivery_id: UUID,
    resolve: egress.Resolver,
) -> Attempt:
    with db.tenant_tx(pool, tenant_id) as conn:
        row = sessions_db.delivery_claim(conn, tenant_id=tenant_id, delivery_id=delivery_id, lease_s=LEASE_S)
    if row is None:
        return Attempt("skipped")
    body = body_of(row)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Memworker-Event": row.event,
        "X-Memworker-Delivery": str(row.id),
        "X-Memworker-Attempt": str(row.attempts),
        "X-Memworker-Signature": sign(row.secret, body),
    }
    code: int | None = None
    # `error` is what the tenant sees on the delivery; `detail` goes to the log only. The
    # tenant learns "it did not connect", never refused vs reset vs timed out: with those a
    # webhook would be a port scanner of whatever it can reach.
    error: str | None = None
    detail = ""
    refused = False
    try:
        target = egress.check(row.url, egress.Allow.parse(settings.webhook_allow_hosts), resolve)
        code = egress.post(target, body, headers, settings.webhook_timeout_s)
        if not 200 <= code < 300:
            error = detail = f"HTTP {code}"
    except egress.Refused as exc:  # DNS now names an internal address, or the allow-list shrank
        error, detail, refused = "delivery refused (address not allowed)", str(exc), True
    except egress.Unresolved as exc:
        error, detail = "delivery failed (host did not resolve)", str(exc)
    except httpx.HTTPError as exc:  # refused, timed out, reset: the receiver's problem, retried
        error, detail = "delivery failed (connection error)", f"{type(exc).__name__}: {exc}"[:500]
    if error is None:
        outcome = Attempt("delivered", http_status=code)
    elif refused or row.attempts >= settings.webhook_max_attempts:
        outcome = Attempt("failed", http_status=code, error=error)
        logger.error("webhook delivery %s failed for good after %d attempts: %s", delivery_id, row.attempts, detail)
    else:
        outcome = Attempt("retry", backoff_s(row.attempts, settings.webhook_backoff_s), code, error)
        logger.info(
            "webhook delivery %s attempt %d failed (%s); retry in %.1fs",
            delivery_id,
            row.attempts,
            detail,
            outcome.retry_in_s,
        )
    with db.tenant_tx(pool, tenant_id) as conn:
        sessions_db.delivery_record(
            conn,
            tenant_id=tenant_id,
            delivery_id=delivery_id,
            attempts=row.attempts,
            status=DeliveryStatus.PENDING if outcome.status == "retry" else DeliveryStatus(outcome.status),
            retry_in_s=outcome.retry_in_s or 0.0,
            last_status=code,
            last_error=error,
        )
    return outcome


def due(pool: Pool, *, before: datetime, limit: int = 1000) -> list[tuple[UUID, UUID]]:
    """(tenant, delivery) pairs due before `before` or stuck past their lease, across tenants."""
    with db.system_tx(pool) as conn:
        rows = sessions_db.due_webhook_deliveries(conn, before=before, limit=limit)
    return [(r.tenant_id, r.delivery_id) for r in rows]


def prune(pool: Pool, *, before: datetime) -> int:
    """Delete finished deliveries created before `before`; returns how many."""
    with db.system_tx(pool) as conn:
        return sessions_db.prune_webhook_deliveries(conn, before=before)


def episode_stored(
    conn: Conn,
    *,
    tenant_id: UUID,
    agent_id: str,
    episode_id: UUID,
    session_id: str | None,
    content: str,
    metadata: dict[str, Any],
    memory_ids: list[UUID],
    settings: Settings,
) -> list[UUID]:
    """The post-turn hook, called by ingest in the transaction that stores an episode: the
    session's transcript estimate grows by the episode's tokens (for the context flush), and
    post_turn webhooks are queued. Returns the delivery ids to send after the commit."""
    source = (metadata or {}).get("source")
    derived = source if source in DERIVED else None
    if session_id is not None and derived is None:
        sessions_db.add_log_tokens(
            conn,
            tenant_id=tenant_id,
            agent_id=agent_id,
            session_id=session_id,
            tokens=budget.count(content, settings.embedding_model),
        )
    return emit(
        conn,
        tenant_id=tenant_id,
        agent_id=agent_id,
        event="post_turn",
        session_id=session_id,
        data={"episode_id": str(episode_id), "memory_ids": [str(m) for m in memory_ids], "derived": derived},
    )


def visible_to(row: sessions_db.Webhook, agent_ids: frozenset[str] | None) -> bool:
    """May a key limited to `agent_ids` (None: unlimited) see and manage this webhook? Only
    when every agent it fires for is one of the key's: a tenant-wide webhook is the
    unlimited keys' business."""
    return agent_ids is None or (row.agent_ids is not None and set(row.agent_ids) <= agent_ids)


def public(row: sessions_db.Webhook) -> WebhookOut:
    """A webhook as the API shows it (never the secret)."""
    return {
        "webhook_id": str(row.id),
        "url": row.url,
        "events": row.events,
        "agent_ids": row.agent_ids,
        "description": row.description,
        "active": row.active,
        "created_at": row.created_at.isoformat(),
    }
