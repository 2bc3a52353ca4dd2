"""Sleep: the minute sweep that claims due agents, and one consolidation pass per agent
(memworker.sleep.consolidation does the work)."""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from typing import Any, TypedDict
from uuid import UUID

from celery import Task

from memworker import runtime
from memworker.models import llm
from memworker.settings import Settings
from memworker.sleep import service
from memworker.sleep.consolidation import BUSY
from tasks.celery_app import CONSOLIDATE, INGEST, MAINTENANCE, app, settings_of
from tasks.publish import on_worker

logger = logging.getLogger(__name__)

BUSY_RETRY_S = 5.0  # the agent's lock is held by another pass or a retention sweep
BUSY_RETRIES = 24

_llm_by_pid: dict[int, llm.LLM | None] = {}


def llm_for_process(settings: Settings) -> llm.LLM | None:
    """The consolidation LLM of this process: the configured endpoint, or None (offline)."""
    pid = os.getpid()
    if pid not in _llm_by_pid:
        _llm_by_pid[pid] = llm.for_settings(settings)
    return _llm_by_pid[pid]


class SweepDone(TypedDict):
    """What a sweep did: its window, why it deferred (None: it did not), agents claimed, flagged."""

    window: str
    deferred: str | None
    claimed: int
    flagged_agents: int


class PassDone(TypedDict):
    status: str  # a PassStatus, or BUSY
    items: int


def window_of(when: datetime) -> datetime:
    """The minute a sweep covers: two beats firing in the same minute share it."""
    return when.astimezone(UTC).replace(second=0, microsecond=0)


@app.task(name="memworker.consolidation_sweep", queue=MAINTENANCE, acks_late=True)
def consolidation_sweep(window: str | None = None) -> SweepDone:
    """Claim the agents due for a pass in this window and enqueue one pass each. The window
    defaults to the current minute; a double fire claims nothing twice."""
    res = runtime.for_process(settings_of(app))
    when = window_of(datetime.fromisoformat(window) if window else datetime.now(UTC))
    backlog = on_worker().queue_depths()[INGEST]  # every priority's messages
    result = service.sweep(res.pool, res.settings, window=when, ingest_backlog=backlog)
    if result.deferred:
        logger.info("consolidation sweep %s deferred: %s", when.isoformat(), result.deferred)
    for tenant_id, agent_id, run_id, _ in result.claimed:
        on_worker().consolidate(tenant_id, agent_id, run_id)
    if result.claimed:
        logger.info("consolidation sweep %s: %d agents due", when.isoformat(), len(result.claimed))
    return SweepDone(
        window=when.isoformat(),
        deferred=result.deferred,
        claimed=len(result.claimed),
        flagged_agents=result.flagged_agents,
    )


@app.task(
    name="memworker.consolidate",
    queue=CONSOLIDATE,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=BUSY_RETRIES,
)
def consolidate(self: Task[Any, Any], tenant_id: str, agent_id: str, run_id: str) -> PassDone:
    """One pass for one agent. A failed pass is recorded and backs off through the sweep, not
    through Celery retries; only a held agent lock is retried here."""
    res = runtime.for_process(settings_of(app))
    report = service.run_queued(
        res.pool,
        res.embedder,
        llm_for_process(res.settings),
        res.settings,
        tenant_id=UUID(tenant_id),
        agent_id=agent_id,
        run_id=UUID(run_id),
    )
    if report.status == BUSY:
        if self.request.retries < BUSY_RETRIES:
            raise self.retry(countdown=BUSY_RETRY_S)
        service.give_up(
            res.pool,
            tenant_id=UUID(tenant_id),
            agent_id=agent_id,
            run_id=UUID(run_id),
            why=f"the agent stayed locked for {BUSY_RETRIES * BUSY_RETRY_S:.0f} s",
        )
    logger.info(
        "consolidation agent=%s run=%s %s items=%d connections=%d insights=%d conclusions=%d",
        agent_id,
        run_id,
        report.status,
        report.items_reviewed,
        report.connections_made,
        report.insights_written,
        report.conclusions_written,
    )
    return PassDone(status=report.status, items=report.items_reviewed)
