"""Shared pools over HTTP: a tenant's memories that agents read by policy (pools_read), written
directly or by sharing an agent's memory (pools_write). See memworker/fleet/pools.py."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response
from pydantic import Field

from memworker import keys
from memworker.api.deps import AgentId, decode_cursor, encode_cursor, principal, resources, tx
from memworker.domain import memories
from memworker.fleet import pools, service
from memworker.memories import service as memory_service
from memworker.memories.service import memory_out
from memworker.schemas import MemoryBatch, MemoryIn, MemoryList, MemoryOut, PoolList, Shared, Strict

router = APIRouter(tags=["pools"])
PoolName = Path(pattern=memories.AGENT_ID.pattern, max_length=128, description="the pool's name")


class ShareIn(Strict):
    pool: str = Field(pattern=memories.AGENT_ID.pattern, description="a pool the agent's policy lets it write")


def _write(request: Request, p: keys.Principal, pool: str, bodies: list[MemoryIn]) -> list[MemoryOut]:
    """Direct writes into the pool (created on first use), as the pool's memories."""
    owner = pools.owner(pool)
    p.require("memories:write", owner)
    res = resources(request)
    batch = memory_service.checked(bodies, settings=res.settings, embedder=res.embedder)
    with tx(request, p) as conn:
        found = memory_service.write(conn, tenant_id=p.tenant_id, owner=owner, batch=batch, embedder=res.embedder)
    return [memory_out(m, pool) for m in found]


@router.get("/v1/pools", response_model=PoolList)
def list_pools(request: Request, p: keys.Principal = Depends(principal)) -> PoolList:
    """The tenant's pools (those this key may read), with their live memory counts."""
    p.require("memories:read")
    with tx(request, p) as conn:
        return service.pool_list(conn, tenant_id=p.tenant_id, agent_ids=p.agent_ids)


@router.post("/v1/pools/{pool}/memories", status_code=201, response_model=MemoryOut)
def post_pool_memory(
    body: MemoryIn, request: Request, pool: str = PoolName, p: keys.Principal = Depends(principal)
) -> MemoryOut:
    """A direct write into the pool (created on first use); dedup-free like an agent's."""
    return _write(request, p, pool, [body])[0]


@router.post("/v1/pools/{pool}/memories/batch", status_code=201, response_model=MemoryList)
def post_pool_memories(
    body: MemoryBatch, request: Request, pool: str = PoolName, p: keys.Principal = Depends(principal)
) -> MemoryList:
    return MemoryList(memories=_write(request, p, pool, body.memories))


@router.get("/v1/pools/{pool}/memories", response_model=MemoryList)
def list_pool_memories(
    request: Request,
    pool: str = PoolName,
    subject: str | None = Query(None, pattern=memories.SUBJECT_PATTERN),
    limit: int = Query(50, ge=1, le=500),
    cursor: str | None = None,
    p: keys.Principal = Depends(principal),
) -> MemoryList:
    p.require("memories:read", pools.owner(pool))
    after = decode_cursor(cursor) if cursor else None
    with tx(request, p) as conn:
        found = service.pool_page(conn, tenant_id=p.tenant_id, pool=pool, limit=limit, after=after, subject=subject)
    return MemoryList(
        memories=[memory_out(m, pool) for m in found.items],
        next_cursor=encode_cursor(*found.after) if found.after else None,
    )


@router.delete("/v1/pools/{pool}/memories/{memory_id}", status_code=204)
def delete_pool_memory(
    memory_id: UUID, request: Request, pool: str = PoolName, p: keys.Principal = Depends(principal)
) -> Response:
    p.require("memories:write", pools.owner(pool))
    with tx(request, p) as conn:
        service.delete_pool_memory(conn, tenant_id=p.tenant_id, pool=pool, memory_id=memory_id)
    return Response(status_code=204)


@router.post("/v1/agents/{agent_id}/memories/{memory_id}/share", status_code=201, response_model=Shared)
def share_memory(
    agent_id: AgentId, memory_id: UUID, body: ShareIn, request: Request, p: keys.Principal = Depends(principal)
) -> Shared:
    """Promote the agent's memory into a pool its policy names in pools_write: a copy whose
    provenance names the source (forgetting the source deletes it), or, when the pool holds
    the same fact already, one more source for it."""
    p.require("memories:write", agent_id)
    with tx(request, p) as conn:
        return service.share(
            conn,
            tenant_id=p.tenant_id,
            agent_id=agent_id,
            memory_id=memory_id,
            pool=body.pool,
            actor="api",
            embed=lambda text: resources(request).embedder.embed([text])[0],
        )
