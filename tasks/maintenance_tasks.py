"""Maintenance: the reconciler that re-enqueues episodes whose queue message was lost."""

from __future__ import annotations

import logging

from memworker import maintenance, runtime
from tasks.celery_app import MAINTENANCE, app, settings_of
from tasks.publish import on_worker

logger = logging.getLogger(__name__)


@app.task(name="memworker.reconcile", queue=MAINTENANCE)
def reconcile() -> int:
    """Re-enqueue episodes stuck in queued/failed/processing beyond their lease."""
    res = runtime.for_process(settings_of(app))
    n = maintenance.requeue_stale(res.pool, on_worker().ingest, older_than_s=float(res.settings.episode_lease_s))
    if n:
        logger.info("reconciler re-enqueued %d episodes", n)
    return n
