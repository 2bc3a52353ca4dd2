"""Administration within a tenant over HTTP: the agents (list, erase, their subjects) and API
keys (mint, list, revoke; the `keys` scope). See memworker/fleet/admin.py and
memworker/erase/agents.py. Tenants stay with the operator's CLI."""

from __future__ import annotations

from typing import cast

from fastapi import APIRouter, Depends, Path, Query, Request

from memworker import keys, runtime
from memworker.api.deps import AgentId, principal, resources, tx
from memworker.erase import service as erase
from memworker.fleet import admin
from memworker.schemas import AgentErased, AgentList, KeyCreated, KeyIn, KeyList, KeyOut, SubjectList

router = APIRouter(tags=["admin"])
KeyPrefix = Path(pattern=r"^[0-9a-f]{1,64}$", description="the key's prefix (mwk_<prefix>_...)")


@router.get("/v1/agents", response_model=AgentList)
def list_agents(
    request: Request,
    limit: int = Query(50, ge=1, le=admin.MAX_PAGE),
    cursor: str | None = Query(None, max_length=1000),
    p: keys.Principal = Depends(principal),
) -> AgentList:
    """The tenant's agents this key reaches (pools: GET /v1/pools), in id order, each with its
    live memories, turns, episodes, sessions and last activity; cursor pages."""
    p.require("memories:read")
    with tx(request, p) as conn:
        return admin.agents_page(conn, p, limit=limit, cursor=cursor)


@router.delete("/v1/agents/{agent_id}", response_model=AgentErased)
def erase_agent(agent_id: AgentId, request: Request, p: keys.Principal = Depends(principal)) -> AgentErased:
    """Erase the agent and everything of it (memories, episodes, sessions, archives, profiles,
    runs, its audit trail), its pool copies, proposals and webhook deliveries; a receipt of
    counts per place."""
    p.require("erase", agent_id)
    with tx(request, p) as conn:
        receipt = erase.erase_agent(conn, tenant_id=p.tenant_id, agent_id=agent_id)
    resources(request).policies.forget(p.tenant_id, agent_id)
    runtime.invalidate_caches(resources(request).settings.redis_url)  # its policy, in every API process
    return cast(AgentErased, receipt)


@router.get("/v1/agents/{agent_id}/subjects", response_model=SubjectList)
def agent_subjects(
    agent_id: AgentId,
    request: Request,
    limit: int = Query(50, ge=1, le=admin.MAX_PAGE),
    cursor: str | None = Query(None, max_length=1000),
    p: keys.Principal = Depends(principal),
) -> SubjectList:
    """The subjects the agent holds anything of, in order, with its live memories, turns,
    episodes and sessions of each; cursor pages."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return admin.subjects_page(conn, p, agent_id, limit=limit, cursor=cursor)


@router.post("/v1/keys", status_code=201, response_model=KeyCreated)
def create_key(body: KeyIn, request: Request, p: keys.Principal = Depends(principal)) -> KeyCreated:
    """Mint a key of this tenant within this key's own powers: scopes among its own, agents
    and pools among those it reaches, expiring no later than it (else 403). The secret is
    in the answer only (`api_key`)."""
    p.require("keys")
    with tx(request, p) as conn:
        return admin.mint_key(
            conn,
            p,
            name=body.name,
            scopes=body.scopes,
            agents=body.agents,
            pool_names=body.pools,
            expires_at=body.expires_at,
        )


@router.get("/v1/keys", response_model=KeyList)
def list_keys(request: Request, p: keys.Principal = Depends(principal)) -> KeyList:
    """The tenant's keys within this key's powers (prefixes, never secrets), with the agents
    and pools each may touch and its state."""
    p.require("keys")
    with tx(request, p) as conn:
        return admin.list_keys(conn, p)


@router.delete("/v1/keys/{prefix}", response_model=KeyOut)
def revoke_key(request: Request, prefix: str = KeyPrefix, p: keys.Principal = Depends(principal)) -> KeyOut:
    """Revoke a key within this key's powers (404 for one beyond them); it stops working at
    once, in every API process."""
    p.require("keys")
    with tx(request, p) as conn:
        out = admin.revoke_key(conn, p, prefix)
    request.app.state.key_cache.clear()
    runtime.invalidate_caches(resources(request).settings.redis_url)
    return out
