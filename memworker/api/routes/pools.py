"""Shared pools over HTTP: a tenant's memories that agents read by policy (pools_read), written
directly or by sharing an agent's memory (pools_write). See memworker/fleet/pools.py."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response
from pydantic import Field

from memworker import keys
from memworker.api.deps import AgentId, decode_cursor, principal, resources, tx
from memworker.api.routes.memories import _write, memory_page
from memworker.domain import memories
from memworker.fleet import pools
from memworker.schemas import MemoryBatch, MemoryIn, MemoryList, MemoryOut, PoolList, Shared, Strict
from memworker.storage import store
from memworker.tenancy import service as tenancy

router = APIRouter(tags=["pools"])
PoolName = Path(pattern=memories.AGENT_ID.pattern, max_length=128, description="the pool's name")


class ShareIn(Strict):
    pool: str = Field(pattern=memories.AGENT_ID.pattern, description="a pool the agent's policy lets it write")


@router.get("/v1/pools", response_model=PoolList)
def list_pools(request: Request, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
    """The tenant's pools (those this key may read), with their live memory counts."""
    p.require("memories:read")
    with tx(request, p) as conn:
        found = pools.listing(conn, tenant_id=p.tenant_id)
    return {"pools": [x for x in found if p.agent_ids is None or pools.owner(x["pool"]) in p.agent_ids]}


@router.post("/v1/pools/{pool}/memories", status_code=201, response_model=MemoryOut)
def post_pool_memory(
    body: MemoryIn, request: Request, pool: str = PoolName, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    """A direct write into the pool (created on first use); dedup-free like an agent's."""
    return _write(request, p, pools.owner(pool), [body])[0].to_json() | {"pool": pool}


@router.post("/v1/pools/{pool}/memories/batch", status_code=201, response_model=MemoryList)
def post_pool_memories(
    body: MemoryBatch, request: Request, pool: str = PoolName, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    return {"memories": [m.to_json() | {"pool": pool} for m in _write(request, p, pools.owner(pool), body.memories)]}


@router.get("/v1/pools/{pool}/memories", response_model=MemoryList)
def list_pool_memories(
    request: Request,
    pool: str = PoolName,
    subject: str | None = Query(None, pattern=memories.SUBJECT_PATTERN),
    limit: int = Query(50, ge=1, le=500),
    cursor: str | None = None,
    p: keys.Principal = Depends(principal),
) -> dict[str, Any]:
    owner = pools.owner(pool)
    p.require("memories:read", owner)
    after = decode_cursor(cursor) if cursor else None
    with tx(request, p) as conn:
        pools.require(conn, tenant_id=p.tenant_id, name=pool)
        items, nxt = memory_page(conn, p.tenant_id, owner, limit=limit, after=after, subject=subject)
    return {"memories": [m.to_json() | {"pool": pool} for m in items], "next_cursor": nxt}


@router.delete("/v1/pools/{pool}/memories/{memory_id}", status_code=204)
def delete_pool_memory(
    memory_id: UUID, request: Request, pool: str = PoolName, p: keys.Principal = Depends(principal)
) -> Response:
    owner = pools.owner(pool)
    p.require("memories:write", owner)
    with tx(request, p) as conn:
        store.delete_memory(conn, tenant_id=p.tenant_id, agent_id=owner, memory_id=memory_id)
    return Response(status_code=204)


@router.post("/v1/agents/{agent_id}/memories/{memory_id}/share", status_code=201, response_model=Shared)
def share_memory(
    agent_id: AgentId, memory_id: UUID, body: ShareIn, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    """Promote the agent's memory into a pool its policy names in pools_write: a copy whose
    provenance names the source (forgetting the source deletes it), or, when the pool holds
    the same fact already, one more source for it."""
    p.require("memories:write", agent_id)
    with tx(request, p) as conn:
        policy = tenancy.policy_for(conn, tenant_id=p.tenant_id, agent_id=agent_id, must_exist=True)
        mid, how = pools.share(
            conn,
            tenant_id=p.tenant_id,
            agent_id=agent_id,
            memory_id=memory_id,
            pool=body.pool,
            policy=policy,
            actor="api",
            embed=lambda text: resources(request).embedder.embed([text])[0],
        )
        copy = store.get_memory(conn, tenant_id=p.tenant_id, agent_id=pools.owner(body.pool), memory_id=mid)
    return {"pool": body.pool, "outcome": how, "memory": copy.to_json() | {"pool": body.pool}}
