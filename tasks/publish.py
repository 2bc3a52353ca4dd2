"""The one way work reaches the queues: the API, the CLI, the SDK and the tasks themselves
publish through a Publisher. Only tasks/ knows task names and queues; callers name the work."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from celery import Celery

from memworker.settings import Settings
from tasks.celery_app import CONSOLIDATE, INGEST, MAINTENANCE, WEBHOOKS, make_celery


class Publisher:
    """Sends task messages by name to their queue. Publishing needs only the broker: a
    process that publishes never runs a task."""

    def __init__(self, app: Celery, *, ingest_batch_max: int) -> None:
        self._app = app
        self._batch = ingest_batch_max

    @classmethod
    def for_settings(cls, settings: Settings) -> Publisher:
        return cls(make_celery(settings), ingest_batch_max=settings.ingest_batch_max)

    def _send(self, name: str, args: list[Any], queue: str, countdown: float | None = None) -> None:
        self._app.send_task(name, args=args, queue=queue, countdown=countdown)

    def ingest(
        self, tenant_id: UUID | str, episode_ids: Iterable[UUID | str], *, countdown: float | None = None
    ) -> None:
        """Episodes to reflect and store: one message per worker-sized batch, so a big batch
        spreads over the workers."""
        ids = [str(e) for e in episode_ids]
        for i in range(0, len(ids), self._batch):
            self._send("memworker.ingest", [str(tenant_id), ids[i : i + self._batch]], INGEST, countdown)

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
        self._app.close()


def _worker_publisher() -> Publisher:
    from tasks.celery_app import app, settings_of

    return Publisher(app, ingest_batch_max=settings_of(app).ingest_batch_max)


# The tasks' own publisher, on the worker's app (tasks that fan out or retry through a message).
on_worker = _worker_publisher()
