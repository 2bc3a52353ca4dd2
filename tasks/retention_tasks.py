"""Retention: the hourly tick that fans out one sweep per due agent on the maintenance
queue (memworker.lifecycle.retention does the work)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, TypedDict
from uuid import UUID

from celery import Task

from memworker import runtime
from memworker.lifecycle import service
from tasks.celery_app import MAINTENANCE, RETENTION_EVERY_S, app, settings_of
from tasks.publish import on_worker

logger = logging.getLogger(__name__)

MAX_AGENTS_PER_TICK = 10_000  # the rest are due again at the next tick, least recent first


class SweepDone(TypedDict):
    status: str  # done | partial | skipped | failed | duplicate
    changed: int  # memories expired, forgotten, decayed, promoted, merged or superseded
    run_id: str | None


@app.task(name="memworker.retention_tick", queue=MAINTENANCE, acks_late=True)
def retention_tick(window: str | None = None) -> int:
    """Enqueue a sweep for every agent not swept in this window. The window defaults to the
    current hour's start; every sweep of it has the run key 'beat:<window>', so a double
    fire (or a redelivered tick) sweeps nobody twice. Returns how many were enqueued."""
    res = runtime.for_process(settings_of(app))
    when = service.window(datetime.fromisoformat(window) if window else datetime.now(UTC), RETENTION_EVERY_S)
    agents = service.due(res.pool, before=when, limit=MAX_AGENTS_PER_TICK)
    for tenant_id, agent_id in agents:
        on_worker().retention_sweep(tenant_id, agent_id, when.isoformat())
    if agents:
        logger.info("retention tick %s: %d agents", when.isoformat(), len(agents))
    return len(agents)


@app.task(name="memworker.retention_sweep", queue=MAINTENANCE, acks_late=True, bind=True)
def retention_sweep(self: Task[Any, Any], tenant_id: str, agent_id: str, window: str) -> SweepDone:
    """One agent's sweep, judged at the window's clock. A redelivered message (its worker
    died mid-sweep) resumes the window's run instead of finding it taken."""
    res = runtime.for_process(settings_of(app))
    when = datetime.fromisoformat(window)
    redelivered = bool((self.request.delivery_info or {}).get("redelivered"))
    report = service.sweep(
        res.pool,
        tenant_id=UUID(tenant_id),
        agent_id=agent_id,
        now=when,
        run_key=f"beat:{when.isoformat()}",
        trigger="beat",
        resume=redelivered,
    )
    return SweepDone(status=report.status, changed=report.changed, run_id=report.run_id)
