"""Episodes: accept (202, durable before the answer), status, replay, usage."""

from __future__ import annotations

import logging
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Request

from memworker import keys, metrics
from memworker.api.deps import AgentId, AgentIdQuery, principal, publisher, resources, tx
from memworker.ingest import service
from memworker.schemas import (
    Accepted,
    AcceptedBatch,
    EpisodeBatch,
    EpisodeIn,
    EpisodeList,
    EpisodeOut,
    EpisodeStatus,
    Usage,
)

logger = logging.getLogger(__name__)
router = APIRouter(tags=["episodes"])


def _accept(request: Request, p: keys.Principal, agent_id: str, bodies: list[EpisodeIn]) -> list[Accepted]:
    p.require("episodes:write", agent_id)
    settings = resources(request).settings
    eps = service.prepare(bodies, settings=settings)
    with tx(request, p) as conn:
        done = service.accept(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, episodes=eps, batch=settings.ingest_batch_max
        )
    if done.new:
        try:
            publisher(request).ingest(p.tenant_id, done.new, backlog=done.backlog)
        except Exception as exc:  # the rows are durable; the reconciler sends them later
            logger.warning("enqueue failed, the reconciler will send %d episodes: %s", len(done.new), exc)
    metrics.EPISODES.labels("accepted").inc(len(done.new))
    return done.answers


@router.post("/v1/agents/{agent_id}/episodes", status_code=202, response_model=Accepted)
def post_episode(
    agent_id: AgentId, body: EpisodeIn, request: Request, p: keys.Principal = Depends(principal)
) -> Accepted:
    (answer,) = _accept(request, p, agent_id, [body])
    return answer


@router.post("/v1/agents/{agent_id}/episodes/batch", status_code=202, response_model=AcceptedBatch)
def post_episodes(
    agent_id: AgentId, body: EpisodeBatch, request: Request, p: keys.Principal = Depends(principal)
) -> AcceptedBatch:
    return {"episodes": _accept(request, p, agent_id, body.episodes)}


@router.get("/v1/agents/{agent_id}/episodes/{episode_id}", response_model=EpisodeOut)
def get_episode(
    agent_id: AgentId, episode_id: UUID, request: Request, p: keys.Principal = Depends(principal)
) -> EpisodeOut:
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.episode(conn, tenant_id=p.tenant_id, agent_id=agent_id, episode_id=episode_id)


@router.post("/v1/agents/{agent_id}/episodes/{episode_id}/replay", status_code=202, response_model=Accepted)
def replay_episode(
    agent_id: AgentId, episode_id: UUID, request: Request, p: keys.Principal = Depends(principal)
) -> Accepted:
    p.require("episodes:write", agent_id)
    with tx(request, p) as conn:
        answer = service.replay(conn, tenant_id=p.tenant_id, agent_id=agent_id, episode_id=episode_id)
    publisher(request).ingest(p.tenant_id, [episode_id])
    return answer


@router.get("/v1/episodes", response_model=EpisodeList)
def list_episodes(
    request: Request,
    status: EpisodeStatus | None = None,
    agent_id: AgentIdQuery = None,
    limit: int = Query(100, ge=1, le=1000),
    p: keys.Principal = Depends(principal),
) -> EpisodeList:
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.episodes(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, status=status, limit=limit, agent_ids=_limited_to(p)
        )


@router.get("/v1/usage", response_model=Usage)
def usage(request: Request, agent_id: AgentIdQuery = None, p: keys.Principal = Depends(principal)) -> Usage:
    """LLM calls, tokens and latency per agent and for the tenant: ingest's (the top-level
    fields) and the sleep passes' (`sleep`: runs, llm_calls, tokens_in, tokens_out)."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.usage(conn, tenant_id=p.tenant_id, agent_id=agent_id, agent_ids=_limited_to(p))


def _limited_to(p: keys.Principal) -> list[str] | None:
    """The agents a key limited to some may see in tenant-wide listings; None: all."""
    return sorted(p.agent_ids) if p.agent_ids is not None else None
