"""Sessions: webhook deliveries with their retries and sweep, and the daily rumination
(memworker.sessions.hooks and memworker.sessions.rumination do the work). None of it may hold
up ingest: deliveries have the webhooks queue and its senders to themselves, the rest is on
the maintenance queue."""

from __future__ import annotations

import logging
import os
import threading
from datetime import UTC, datetime, timedelta
from uuid import UUID

from memworker import runtime
from memworker.sessions import service
from memworker.settings import Settings
from tasks.celery_app import MAINTENANCE, WEBHOOKS, app, settings_of
from tasks.publish import on_worker

logger = logging.getLogger(__name__)

SWEEP_GRACE_S = 15.0  # a delivery this late has lost its message (or its sender died)
KEEP_FINISHED = timedelta(days=7)  # delivered and failed rows are kept this long for inspection
# Each sender process's delivery slots (their Redis client): a forked child builds its own.
_slots_lock = threading.Lock()
_slots_by_pid: dict[int, service.Slots] = {}


def slots_for_process(settings: Settings) -> service.Slots:
    """This sender process's delivery slots, built on first use."""
    pid = os.getpid()
    with _slots_lock:
        if pid not in _slots_by_pid:
            _slots_by_pid[pid] = service.webhook_slots(settings)
        return _slots_by_pid[pid]


@app.task(name="memworker.deliver_webhook", queue=WEBHOOKS, acks_late=True)
def deliver_webhook(tenant_id: str, delivery_id: str) -> str:
    """One attempt in one of the tenant's slots; a failure schedules the next with backoff
    (the row records each one), a tenant with every slot in flight gets its turn later."""
    settings = settings_of(app)
    attempt = service.deliver_webhook(
        runtime.pool_for_process(settings),  # a sender needs no model
        settings,
        tenant_id=UUID(tenant_id),
        delivery_id=UUID(delivery_id),
        slots=slots_for_process(settings),
    )
    if attempt.status in ("retry", "busy"):
        on_worker().deliver_webhooks(tenant_id, [delivery_id], countdown=attempt.retry_in_s)
    return attempt.status


@app.task(name="memworker.webhook_sweep", queue=MAINTENANCE)
def webhook_sweep(window: str | None = None) -> int:
    """Re-send deliveries whose message was lost or whose sender died; prune old finished
    ones. A second sweep of the same window re-sends nothing twice: the claim is a
    compare-and-set on the row."""
    res = runtime.for_process(settings_of(app))
    when = datetime.fromisoformat(window) if window else datetime.now(UTC)
    pairs = service.deliveries_due(res.pool, before=when - timedelta(seconds=SWEEP_GRACE_S))
    for tenant_id, delivery_id in pairs:
        on_worker().deliver_webhooks(tenant_id, [delivery_id])
    pruned = service.prune_deliveries(res.pool, before=when - KEEP_FINISHED)
    if pairs or pruned:
        logger.info("webhook sweep: re-sent %d deliveries, pruned %d", len(pairs), pruned)
    return len(pairs)


@app.task(name="memworker.ruminate_tick", queue=MAINTENANCE, acks_late=True)
def ruminate_tick(window: str | None = None) -> int:
    """Fan out one rumination per agent that archived sessions on the day before `window`
    (default: now) and has rumination on. Returns how many were queued."""
    res = runtime.for_process(settings_of(app))
    start, end = service.rumination_day(datetime.fromisoformat(window) if window else datetime.now(UTC))
    agents = service.ruminating_agents(res.pool, start=start, end=end)
    for tenant_id, agent_id in agents:
        on_worker().ruminate(tenant_id, agent_id, start.isoformat(), end.isoformat())
    if len(agents) >= service.MAX_RUMINATING:
        logger.warning(
            "rumination %s: agent limit %d reached; the rest are skipped today", start.date(), service.MAX_RUMINATING
        )
    return len(agents)


@app.task(name="memworker.ruminate", queue=MAINTENANCE, acks_late=True)
def ruminate(tenant_id: str, agent_id: str, start: str, end: str) -> str | None:
    """One agent's rumination episode for [start, end), then reflected on the ingest queue."""
    res = runtime.for_process(settings_of(app))
    episode_id = service.ruminate(
        res.pool,
        tenant_id=UUID(tenant_id),
        agent_id=agent_id,
        start=datetime.fromisoformat(start),
        end=datetime.fromisoformat(end),
    )
    if episode_id is not None:
        on_worker().ingest(tenant_id, [episode_id])
    return str(episode_id) if episode_id else None
