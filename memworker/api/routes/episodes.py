"""Episodes: accept (202, durable before the answer), status, replay, usage."""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Request

from memworker import errors, keys, metrics
from memworker.api.deps import AgentId, AgentIdQuery, jsonable, principal, publisher, resources, tx
from memworker.ingest import intake
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
from memworker.storage import console_db, core_db

logger = logging.getLogger(__name__)
router = APIRouter(tags=["episodes"])


def _accept(request: Request, p: keys.Principal, agent_id: str, bodies: list[EpisodeIn]) -> list[tuple[UUID, bool]]:
    p.require("episodes:write", agent_id)
    settings = resources(request).settings
    if len(bodies) > settings.max_batch:
        raise errors.PayloadTooLarge(f"at most {settings.max_batch} episodes per batch")
    eps = [
        intake.normalise(
            b,
            max_content_bytes=settings.max_content_bytes,
            max_metadata_depth=settings.max_metadata_depth,
            max_metadata_bytes=settings.max_metadata_bytes,
        )
        for b in bodies
    ]
    with tx(request, p) as conn:
        # fair ingest: how much of this tenant's work is queued already sets its messages' priority
        backlog = intake.backlog(conn, tenant_id=p.tenant_id, batch=settings.ingest_batch_max)
        result = intake.accept(conn, tenant_id=p.tenant_id, agent_id=agent_id, episodes=eps, strict_keys=True)
    new = [eid for eid, is_new in result if is_new]
    if new:
        try:
            publisher(request).ingest(p.tenant_id, new, backlog=backlog)
        except Exception as exc:  # the rows are durable; the reconciler sends them later
            logger.warning("enqueue failed, the reconciler will send %d episodes: %s", len(new), exc)
    metrics.EPISODES.labels("accepted").inc(len(new))
    return result


@router.post("/v1/agents/{agent_id}/episodes", status_code=202, response_model=Accepted)
def post_episode(
    agent_id: AgentId, body: EpisodeIn, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    ((eid, is_new),) = _accept(request, p, agent_id, [body])
    return {"episode_id": str(eid), "status": "queued", "duplicate": not is_new}


@router.post("/v1/agents/{agent_id}/episodes/batch", status_code=202, response_model=AcceptedBatch)
def post_episodes(
    agent_id: AgentId, body: EpisodeBatch, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    result = _accept(request, p, agent_id, body.episodes)
    return {"episodes": [{"episode_id": str(e), "status": "queued", "duplicate": not n} for e, n in result]}


@router.get("/v1/agents/{agent_id}/episodes/{episode_id}", response_model=EpisodeOut)
def get_episode(
    agent_id: AgentId, episode_id: UUID, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        row = core_db.get_episode(conn, tenant_id=p.tenant_id, agent_id=agent_id, episode_id=episode_id)
    if row is None:
        raise errors.NotFound("episode not found")
    return _episode_json(row)


@router.post("/v1/agents/{agent_id}/episodes/{episode_id}/replay", status_code=202, response_model=Accepted)
def replay_episode(
    agent_id: AgentId, episode_id: UUID, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    p.require("episodes:write", agent_id)
    with tx(request, p) as conn:
        if core_db.replay_episode(conn, tenant_id=p.tenant_id, agent_id=agent_id, episode_id=episode_id) is None:
            raise errors.NotFound("no dead or failed episode with that id")
    publisher(request).ingest(p.tenant_id, [episode_id])
    return {"episode_id": str(episode_id), "status": "queued"}


@router.get("/v1/episodes", response_model=EpisodeList)
def list_episodes(
    request: Request,
    status: EpisodeStatus | None = None,
    agent_id: AgentIdQuery = None,
    limit: int = Query(100, ge=1, le=1000),
    p: keys.Principal = Depends(principal),
) -> dict[str, Any]:
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        rows = core_db.list_episodes(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, status=status, limit=limit, agent_ids=_limited_to(p)
        )
    return {"episodes": [_episode_json(r) for r in rows]}


@router.get("/v1/usage", response_model=Usage)
def usage(request: Request, agent_id: AgentIdQuery = None, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
    """LLM calls, tokens and latency per agent and for the tenant: ingest's (the top-level
    fields) and the sleep passes' (`sleep`: runs, llm_calls, tokens_in, tokens_out)."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        rows = core_db.usage(conn, tenant_id=p.tenant_id, agent_id=agent_id, agent_ids=_limited_to(p))
        wanted = [agent_id] if agent_id is not None else _limited_to(p)
        sleep_rows = console_db.consolidation_usage(conn, tenant_id=p.tenant_id, agent_ids=wanted)
    fields = ("episodes", "stored", "dead", "llm_calls", "tokens_in", "tokens_out", "llm_ms")
    sleep_fields = ("runs", "llm_calls", "tokens_in", "tokens_out")
    sleep = {r.agent_id: {f: int(getattr(r, f) or 0) for f in sleep_fields} for r in sleep_rows}
    counts = {r.agent_id: {f: int(getattr(r, f) or 0) for f in fields} for r in rows}
    for name in set(sleep) - set(counts):  # passes over direct writes only
        counts[name] = dict.fromkeys(fields, 0)
    idle = dict.fromkeys(sleep_fields, 0)
    agents = [{"agent_id": a, **counts[a], "sleep": sleep.get(a, idle)} for a in sorted(counts)]
    tenant: dict[str, Any] = {f: sum(c[f] for c in counts.values()) for f in fields}
    tenant["sleep"] = {f: sum(sleep.get(a, idle)[f] for a in counts) for f in sleep_fields}
    return {"tenant": tenant, "agents": agents}


def _limited_to(p: keys.Principal) -> list[str] | None:
    """The agents a key limited to some may see in tenant-wide listings; None: all."""
    return sorted(p.agent_ids) if p.agent_ids is not None else None


def _episode_json(episode: core_db.Episode | core_db.EpisodeListing) -> dict[str, Any]:
    out = jsonable(asdict(episode))
    out["episode_id"] = out.pop("id")
    out["memory_ids"] = [str(m) for m in episode.memory_ids]
    return out
