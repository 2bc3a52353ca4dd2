"""Ingest: reflect, embed and store episodes (memworker.ingest does the work)."""

from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

import pydantic

from memworker import errors, metrics, runtime, schemas
from memworker.ingest import service
from memworker.sessions import service as sessions
from memworker.storage import db
from tasks.celery_app import INGEST, app, settings_of
from tasks.publish import on_worker

logger = logging.getLogger(__name__)

# Both ingest tasks: redelivered if a worker dies mid-task; retried with backoff while
# Postgres or Redis is away (TransientError); anything else fails the task.
DURABLE: dict[str, Any] = dict(
    queue=INGEST,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(errors.TransientError,),
    retry_backoff=2,
    retry_backoff_max=120,
    max_retries=8,
)


@app.task(name="memworker.ingest", **DURABLE)
def ingest_episodes(tenant_id: str, episode_ids: list[str]) -> dict[str, int]:
    """Process a batch of one tenant's episodes; failed ones are re-sent with backoff."""
    res = runtime.for_process(settings_of(app))
    out = service.process(
        res.pool,
        res.embedder,
        res.reflector,
        res.settings,
        tenant_id=UUID(tenant_id),
        episode_ids=[UUID(e) for e in episode_ids],
        post_turn=sessions.episode_stored,
        others_waiting=on_worker().urgent_ingest_waiting,  # fair ingest: no extra batches then
    )
    for episode_id, attempts in out.failed:
        on_worker().ingest(tenant_id, [episode_id], countdown=service.retry_in_s(attempts))
    on_worker().deliver_webhooks(tenant_id, out.deliveries)  # post_turn webhooks
    metrics.EPISODES.labels("stored").inc(len(out.stored))
    metrics.EPISODES.labels("failed").inc(len(out.failed))
    metrics.EPISODES.labels("dead").inc(len(out.dead))
    metrics.MEMORIES_WRITTEN.labels("new").inc(out.memories_written)
    metrics.MEMORIES_WRITTEN.labels("duplicate").inc(out.duplicates)
    if out.llm_calls:
        metrics.LLM_CALLS.labels(tenant_id, "reflect").inc(out.llm_calls)
        metrics.LLM_TOKENS.labels(tenant_id, "in").inc(out.tokens_in)
        metrics.LLM_TOKENS.labels(tenant_id, "out").inc(out.tokens_out)
    logger.info(
        "ingest tenant=%s stored=%d failed=%d dead=%d skipped=%d memories=%d",
        tenant_id,
        len(out.stored),
        len(out.failed),
        len(out.dead),
        len(out.skipped),
        out.memories_written,
    )
    return {
        "stored": len(out.stored),
        "failed": len(out.failed),
        "dead": len(out.dead),
        "skipped": len(out.skipped),
        "memories": out.memories_written,
    }


@app.task(name="memworker.accept_episode", **DURABLE)
def accept_episode(tenant_id: str, agent_id: str, episode: dict[str, Any]) -> str:
    """An episode sent straight to Redis by an in-cluster agent: write the durable row
    (idempotent on its key), then process it like any other."""
    res = runtime.for_process(settings_of(app))
    try:
        body = schemas.EpisodeIn.model_validate(episode)  # the same rules as the HTTP API
    except pydantic.ValidationError as exc:
        raise errors.InvalidInput(f"rejected in-cluster episode: {exc}") from exc
    try:
        (ep,) = service.prepare([body], settings=res.settings)
    except (errors.PayloadTooLarge, errors.InvalidInput) as exc:
        raise errors.InvalidInput(f"rejected in-cluster episode: {exc}") from exc
    with db.tenant_tx(res.pool, UUID(tenant_id)) as conn:
        episode_id = service.accept_in_cluster(conn, tenant_id=UUID(tenant_id), agent_id=agent_id, episode=ep)
    ingest_episodes(tenant_id, [str(episode_id)])
    return str(episode_id)
