"""Direct memory writes (recallable when the call returns), reads, changes, deletes."""

from __future__ import annotations

import dataclasses
import json
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from memworker import errors, keys
from memworker.api.deps import AgentId, check_metadata, decode_cursor, encode_cursor, principal, read_tx, resources, tx
from memworker.domain import memories
from memworker.memories import service
from memworker.schemas import Kind, MemoryBatch, MemoryIn, MemoryList, MemoryOut, MemoryPatch, Tier

router = APIRouter(tags=["memories"])


def _write(request: Request, p: keys.Principal, owner: str, bodies: list[MemoryIn]) -> list[memories.Memory]:
    """Direct writes to an agent, or to a pool (owner its owner id, memworker/fleet/pools.py)."""
    p.require("memories:write", owner)
    res = resources(request)
    batch = service.checked(bodies, settings=res.settings, embedder=res.embedder)
    with tx(request, p) as conn:
        return service.write(conn, tenant_id=p.tenant_id, owner=owner, batch=batch, embedder=res.embedder)


def _page_answer(page: service.Page) -> MemoryList:
    """A page as the list routes answer it, with the next page's cursor (None on the last)."""
    return MemoryList(
        memories=[service.memory_out(m) for m in page.items],
        next_cursor=encode_cursor(*page.after) if page.after else None,
    )


@router.post("/v1/agents/{agent_id}/memories", status_code=201, response_model=MemoryOut)
def post_memory(
    agent_id: AgentId, body: MemoryIn, request: Request, p: keys.Principal = Depends(principal)
) -> MemoryOut:
    return service.memory_out(_write(request, p, agent_id, [body])[0])


@router.post("/v1/agents/{agent_id}/memories/batch", status_code=201, response_model=MemoryList)
def post_memories(
    agent_id: AgentId, body: MemoryBatch, request: Request, p: keys.Principal = Depends(principal)
) -> MemoryList:
    return MemoryList(memories=[service.memory_out(m) for m in _write(request, p, agent_id, body.memories)])


@router.get("/v1/agents/{agent_id}/memories", response_model=MemoryList)
def list_memories(
    agent_id: AgentId,
    request: Request,
    tier: Tier | None = None,
    kind: Kind | None = None,
    session_id: str | None = Query(None, alias="session", max_length=128, pattern=r"^[^\x00]*$"),
    metadata: str | None = Query(
        None, description='a JSON object: only memories whose metadata contains it (jsonb @>), e.g. {"project": "x"}'
    ),
    limit: int = Query(50, ge=1, le=500),
    cursor: str | None = None,
    subject: str | None = Query(
        None, pattern=memories.SUBJECT_PATTERN, description="only this subject's memories (default: every memory)"
    ),
    p: keys.Principal = Depends(principal),
) -> MemoryList:
    p.require("memories:read", agent_id)
    after = decode_cursor(cursor) if cursor else None
    filters = _filters(request, metadata, service.Filters(subject=subject, tier=tier, kind=kind, session_id=session_id))
    with read_tx(request, p, agent_id) as conn:  # a replica's, when there are some
        found = service.agent_page(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, limit=limit, after=after, filters=filters
        )
    return _page_answer(found)


def _filters(request: Request, raw: str | None, filters: service.Filters) -> service.Filters:
    """The filters with the list route's metadata filter: a JSON object, within the same depth
    and size limits as the metadata it is matched against (InvalidInput otherwise)."""
    if raw is None:
        return filters
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise errors.InvalidInput(f"metadata filter: not JSON ({exc})") from exc
    except RecursionError as exc:  # '[[[[...' deeper than the parser goes: too deep for any limit
        raise errors.InvalidInput("metadata filter: nested too deeply") from exc
    if not isinstance(value, dict):
        raise errors.InvalidInput("metadata filter: must be a JSON object")
    check_metadata(request, value, "metadata filter")
    return dataclasses.replace(filters, metadata=value)


@router.get("/v1/agents/{agent_id}/memories/{memory_id}", response_model=MemoryOut)
def get_memory(
    agent_id: AgentId, memory_id: UUID, request: Request, p: keys.Principal = Depends(principal)
) -> MemoryOut:
    p.require("memories:read", agent_id)
    with read_tx(request, p, agent_id) as conn:  # a merged-away id resolves to its survivor
        return service.memory_out(service.get(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=memory_id))


@router.patch("/v1/agents/{agent_id}/memories/{memory_id}", response_model=MemoryOut)
def patch_memory(
    agent_id: AgentId, memory_id: UUID, body: MemoryPatch, request: Request, p: keys.Principal = Depends(principal)
) -> MemoryOut:
    p.require("memories:write", agent_id)
    res = resources(request)
    change = service.change(body, settings=res.settings, embedder=res.embedder)
    with tx(request, p) as conn:
        memory = service.update(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=memory_id, change=change, embedder=res.embedder
        )
        return service.memory_out(memory)


@router.delete("/v1/agents/{agent_id}/memories/{memory_id}", status_code=204)
def delete_memory(
    agent_id: AgentId, memory_id: UUID, request: Request, p: keys.Principal = Depends(principal)
) -> Response:
    p.require("memories:write", agent_id)
    with tx(request, p) as conn:
        service.delete(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=memory_id)
    return Response(status_code=204)
