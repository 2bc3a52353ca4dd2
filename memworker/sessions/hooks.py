"""Tenant webhooks for session events (seed 004's hook contract): pre_turn (a context was
built), post_turn (an episode was stored) and archive (a session was archived).

An event writes one delivery row per matching webhook in the transaction of the event
itself (an outbox), so a delivery exists exactly when its event committed. A worker sends
it afterwards (tasks/session_tasks.py): the request that caused the event never waits for
a receiver. Each attempt is recorded on the row; failures are retried with exponential
backoff up to Settings.webhook_max_attempts, then the row is 'failed'. Delivery is at
least once: receivers dedupe on the delivery id, which is in the signed body.

Signature: X-Memworker-Signature: sha256=<hex HMAC-SHA256(secret, raw body)>."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import httpx
import psycopg_pool

from memworker import errors
from memworker.models import budget
from memworker.settings import Settings
from memworker.storage import db, sessions_db

logger = logging.getLogger(__name__)

EVENTS = ("pre_turn", "post_turn", "archive")
LEASE_S = 60  # a sender that died mid-attempt leaves the row 'sending' this long
USER_AGENT = "memworker-webhooks/1"
# Episodes memworker writes itself from a session's state: not transcript, so not counted.
DERIVED = frozenset({"context_flush", "session_archive", "rumination"})


def create(
    conn: Any, *, tenant_id: UUID, url: str, events: list[str], agent_ids: list[str] | None, description: str = ""
) -> tuple[sessions_db.Webhook, str]:
    """Register a webhook; returns (row, secret). The secret is shown once."""
    if not url.startswith(("http://", "https://")):
        raise errors.InvalidInput("webhook url must start with http:// or https://")
    bad = [e for e in events if e not in EVENTS]
    if bad or not events:
        raise errors.InvalidInput(f"events must be a non-empty list of {list(EVENTS)}")
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
    conn: Any, *, tenant_id: UUID, agent_id: str, event: str, data: dict[str, Any], session_id: str | None = None
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


@dataclass
class Attempt:
    status: str  # delivered | retry | failed | skipped (not due, or another sender has it)
    retry_in_s: float | None = None
    http_status: int | None = None
    error: str | None = None


def deliver(
    pool: psycopg_pool.ConnectionPool,
    settings: Settings,
    *,
    tenant_id: UUID,
    delivery_id: UUID,
    client: httpx.Client | None = None,
) -> Attempt:
    """One attempt at one delivery: claim it (compare-and-set, so two senders never both
    send), POST it outside any transaction, record the outcome."""
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
    error: str | None = None
    try:
        if client is not None:
            resp = client.post(row.url, content=body, headers=headers)
        else:
            with httpx.Client(timeout=settings.webhook_timeout_s, follow_redirects=False) as c:
                resp = c.post(row.url, content=body, headers=headers)
        code = resp.status_code
        if not 200 <= code < 300:
            error = f"HTTP {code}"
    except httpx.HTTPError as exc:  # refused, timed out, reset: the receiver's problem, retried
        error = f"{type(exc).__name__}: {exc}"[:500]
    if error is None:
        outcome = Attempt("delivered", http_status=code)
    elif row.attempts >= settings.webhook_max_attempts:
        outcome = Attempt("failed", http_status=code, error=error)
        logger.error("webhook delivery %s failed for good after %d attempts: %s", delivery_id, row.attempts, error)
    else:
        outcome = Attempt("retry", backoff_s(row.attempts, settings.webhook_backoff_s), code, error)
        logger.info(
            "webhook delivery %s attempt %d failed (%s); retry in %.1fs",
            delivery_id,
            row.attempts,
            error,
            outcome.retry_in_s,
        )
    with db.tenant_tx(pool, tenant_id) as conn:
        sessions_db.delivery_record(
            conn,
            tenant_id=tenant_id,
            delivery_id=delivery_id,
            attempts=row.attempts,
            status="pending" if outcome.status == "retry" else outcome.status,
            retry_in_s=outcome.retry_in_s or 0.0,
            last_status=code,
            last_error=error,
        )
    return outcome


def due(pool: psycopg_pool.ConnectionPool, *, before: datetime, limit: int = 1000) -> list[tuple[UUID, UUID]]:
    """(tenant, delivery) pairs due before `before` or stuck past their lease, across tenants."""
    with db.system_tx(pool) as conn:
        rows = sessions_db.due_webhook_deliveries(conn, before=before, limit=limit)
    return [(r.tenant_id, r.delivery_id) for r in rows]


def prune(pool: psycopg_pool.ConnectionPool, *, before: datetime) -> int:
    """Delete finished deliveries created before `before`; returns how many."""
    with db.system_tx(pool) as conn:
        return sessions_db.prune_webhook_deliveries(conn, before=before)


def episode_stored(
    conn: Any,
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
        sessions_db.session_log_tokens(
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


def public(row: sessions_db.Webhook) -> dict[str, Any]:
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
