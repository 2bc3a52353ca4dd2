"""The one way work reaches the queues: the API, the CLI, the SDK and the tasks themselves
publish through a Publisher. Only tasks/ knows task names and queues; callers name the work."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any
from uuid import UUID

import redis
from celery import Celery
from kombu.transport.redis import Channel

from memworker.ingest import intake
from memworker.settings import Settings
from tasks.celery_app import (
    CONSOLIDATE,
    INGEST,
    MAINTENANCE,
    PRIORITY_STEPS,
    QUEUES,
    WEBHOOKS,
    make_celery,
    settings_of,
    worker_app,
)


class Publisher:
    """Sends task messages by name to their queue. Publishing needs only the broker: a
    process that publishes never runs a task."""

    def __init__(self, app: Celery, *, ingest_batch_max: int) -> None:
        self._app = app
        self._batch = ingest_batch_max
        self._redis: redis.Redis | None = None  # the broker, to read queue lengths; made on first use

    @classmethod
    def for_settings(cls, settings: Settings) -> Publisher:
        return cls(make_celery(settings), ingest_batch_max=settings.ingest_batch_max)

    def _send(
        self, name: str, args: list[Any], queue: str, countdown: float | None = None, priority: int | None = None
    ) -> None:
        self._app.send_task(name, args=args, queue=queue, countdown=countdown, priority=priority)

    def ingest(
        self,
        tenant_id: UUID | str,
        episode_ids: Iterable[UUID | str],
        *,
        countdown: float | None = None,
        backlog: int = 0,
    ) -> None:
        """Episodes to reflect and store: one message per worker-sized batch, so a big batch
        spreads over the workers. backlog: the tenant's episodes already queued ahead of these
        (intake.backlog); each message's priority follows how deep in that backlog it sits
        (intake.urgency), so a tenant with thousands queued cannot hold back another's few."""
        ids = [str(e) for e in episode_ids]
        for i in range(0, len(ids), self._batch):
            priority = PRIORITY_STEPS[intake.urgency(backlog + i, self._batch)]
            self._send("memworker.ingest", [str(tenant_id), ids[i : i + self._batch]], INGEST, countdown, priority)

    def urgent_ingest_waiting(self) -> bool:
        """Whether an ingest message of the most urgent priority (a tenant's first batch: its
        backlog was short) waits in the queue: a worker deep in one tenant's backlog then stops
        taking extra batches (processing.process others_waiting). One LLEN; False if Redis fails
        (the task goes on as before, and the message is served when it ends)."""
        try:
            return bool(self._broker().llen(_list_name(INGEST, PRIORITY_STEPS[0])))
        except redis.RedisError:
            return False

    def queue_depths(self, client: redis.Redis | None = None) -> dict[str, int]:
        """Messages waiting in each queue, over all its priority lists, in one round trip.
        client: a Redis connection of the caller's on the broker (the API's own), else the
        publisher's. Raises redis.RedisError when the broker cannot be read."""
        pipe = (client or self._broker()).pipeline()
        for queue in QUEUES:
            for step in PRIORITY_STEPS:
                pipe.llen(_list_name(queue, step))
        counts = pipe.execute()
        n = len(PRIORITY_STEPS)
        return {q: int(sum(counts[i * n : (i + 1) * n])) for i, q in enumerate(QUEUES)}

    def _broker(self) -> redis.Redis:
        if self._redis is None:
            self._redis = redis.Redis.from_url(
                str(self._app.conf.broker_url), socket_timeout=2, socket_connect_timeout=2
            )
        return self._redis

    def accept_episode(self, tenant_id: str, agent_id: str, episode: dict[str, Any]) -> None:
        """An episode that has no row yet (the SDK's in-cluster path): the worker writes it."""
        self._send("memworker.accept_episode", [tenant_id, agent_id, episode], INGEST)

    def consolidate(
        self, tenant_id: UUID | str, agent_id: str, run_id: UUID | str, *, countdown: float | None = None
    ) -> None:
        self._send("memworker.consolidate", [str(tenant_id), agent_id, str(run_id)], CONSOLIDATE, countdown)

    def deliver_webhooks(
        self, tenant_id: UUID | str, delivery_ids: Iterable[UUID | str], *, countdown: float | None = None
    ) -> None:
        for d in delivery_ids:  # their own queue and senders: never in the way of ingest
            self._send("memworker.deliver_webhook", [str(tenant_id), str(d)], WEBHOOKS, countdown)

    def retention_sweep(self, tenant_id: UUID | str, agent_id: str, window: str) -> None:
        self._send("memworker.retention_sweep", [str(tenant_id), agent_id, window], MAINTENANCE)

    def ruminate(self, tenant_id: UUID | str, agent_id: str, start: str, end: str) -> None:
        self._send("memworker.ruminate", [str(tenant_id), agent_id, start, end], MAINTENANCE)

    def sweep(self, name: str, window: str | None = None) -> None:
        """A beat task by hand (tests, operators): consolidation_sweep, retention_tick, ..."""
        self._send(f"memworker.{name}", [window] if window else [], MAINTENANCE)

    def close(self) -> None:
        if self._redis is not None:
            self._redis.close()
        self._app.close()


def _list_name(queue: str, step: int) -> str:
    """The Redis list kombu's transport keeps for a queue's priority step: the queue's own
    name for the first step, then the name, kombu's separator and the step."""
    return f"{queue}{Channel.sep}{step}" if step else queue


@functools.cache
def on_worker() -> Publisher:
    """The tasks' own publisher, on the worker's app (tasks that fan out or retry through a
    message), made on first use."""
    app = worker_app()
    return Publisher(app, ingest_batch_max=settings_of(app).ingest_batch_max)
