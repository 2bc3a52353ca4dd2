"""Sweeps that keep the system honest: the reconciler's view of stuck episodes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from uuid import UUID

from memworker.storage import core_db, db
from memworker.storage.db import Pool


def stale_episodes(pool: Pool, *, older_than_s: float, limit: int = 10_000) -> dict[UUID, list[UUID]]:
    """Episodes whose message may be lost, grouped by tenant: queued or failed and not sent
    for older_than_s, or processing with an expired lease (a crashed worker's claim)."""
    with db.system_tx(pool) as conn:
        rows = core_db.stale_episodes(conn, older_than_s=older_than_s, limit=limit)
    by_tenant: dict[UUID, list[UUID]] = defaultdict(list)
    for r in rows:
        by_tenant[r.tenant_id].append(r.episode_id)
    return dict(by_tenant)


def requeue_stale(pool: Pool, publish: Callable[[UUID, list[UUID]], None], *, older_than_s: float) -> int:
    """Stamp every stale episode as sent, then publish it again; returns how many. (Stamping
    first: an UPDATE after publishing could hold the row while a worker claims it.)"""
    total = 0
    for tenant_id, ids in stale_episodes(pool, older_than_s=older_than_s).items():
        with db.tenant_tx(pool, tenant_id) as conn:
            core_db.mark_enqueued(conn, tenant_id=tenant_id, ids=ids)
        publish(tenant_id, ids)
        total += len(ids)
    return total
