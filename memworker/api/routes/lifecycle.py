"""Lifecycle governance over HTTP: promote, history, review, forget, policy, retention."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import Field

from memworker import errors, keys, runtime
from memworker.api.deps import AgentId, jsonable, principal, resources, tx
from memworker.domain import memories, redact
from memworker.erase import forget
from memworker.fleet import pools
from memworker.lifecycle import governance, retention
from memworker.schemas import (
    Forgotten,
    History,
    MemoryOut,
    PolicyOut,
    RetentionReport,
    RetentionRuns,
    ReviewList,
    ReviewResolved,
    Strict,
    Tier,
)
from memworker.storage.db import Conn
from memworker.tenancy import service as tenancy

router = APIRouter(tags=["lifecycle"])


class PromoteIn(Strict):
    tier: Literal[Tier.L1, Tier.L2, Tier.L3]
    reason: str = Field(min_length=1, max_length=500)


class ResolveIn(Strict):
    keep: str = Field(min_length=1, max_length=64, description="'both' or the id of the memory to keep")
    reason: str = Field(default="", max_length=500)


class ForgetIn(Strict):
    provenance: str | None = Field(default=None, min_length=1, max_length=500)
    memory_ids: list[UUID] | None = Field(default=None, min_length=1, max_length=forget.MAX_IDS)
    session_id: str | None = Field(default=None, min_length=1, max_length=128)
    before: datetime | None = None
    subject: str | None = Field(
        default=None, pattern=memories.SUBJECT_PATTERN, description="erase everything about or with this subject"
    )
    keep_turns: bool = Field(
        default=False, description="keep the turns (messages kept verbatim) of the episodes this erases"
    )


def _actor(p: keys.Principal) -> str:
    return f"key:{p.key_id}"


@router.post("/v1/agents/{agent_id}/memories/{memory_id}/promote", response_model=MemoryOut)
def promote(
    agent_id: AgentId, memory_id: UUID, body: PromoteIn, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    """Move a memory up a tier, audited. L3 (canonical) needs the admin scope."""
    p.require("admin" if body.tier == Tier.L3 else "memories:write", agent_id)
    with tx(request, p) as conn:
        policy = tenancy.policy_for(conn, tenant_id=p.tenant_id, agent_id=agent_id, must_exist=True)
        memory_id = governance.resolve(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=memory_id)
        return governance.promote(
            conn,
            tenant_id=p.tenant_id,
            agent_id=agent_id,
            memory_id=memory_id,
            tier=body.tier,
            reason=redact.redact(body.reason) if policy.redact_pii else body.reason,  # kept in the audit trail
            actor=_actor(p),
            policy=policy,
        ).to_json()


@router.get("/v1/agents/{agent_id}/memories/{memory_id}/history", response_model=History)
def history(
    agent_id: AgentId, memory_id: UUID, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    """The supersede chain through a memory (oldest first) and its audit events."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        h = governance.history(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=memory_id)
    return {
        "memory_id": str(h["memory_id"]),
        "asked": str(h["asked"]),
        "versions": [jsonable(v) for v in h["versions"]],
        "events": [jsonable(e) for e in h["events"]],
    }


@router.get("/v1/agents/{agent_id}/review", response_model=ReviewList)
def review_list(
    agent_id: AgentId,
    request: Request,
    status: Literal["open", "resolved"] | None = "open",
    limit: int = Query(100, ge=1, le=1000),
    p: keys.Principal = Depends(principal),
) -> dict[str, Any]:
    """Contradictions the validate/repair rules could not settle on their own."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        tenancy.require_agent(conn, tenant_id=p.tenant_id, agent_id=agent_id)
        items = governance.reviews(conn, tenant_id=p.tenant_id, agent_id=agent_id, status=status, limit=limit)
    return {"reviews": [{**jsonable(i), "newer": jsonable(i["newer"]), "older": jsonable(i["older"])} for i in items]}


@router.post("/v1/agents/{agent_id}/review/{review_id}/resolve", response_model=ReviewResolved)
def review_resolve(
    agent_id: AgentId, review_id: UUID, body: ResolveIn, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    """keep 'both', or keep one memory: the other is superseded by it."""
    p.require("memories:write", agent_id)
    with tx(request, p) as conn:
        policy = tenancy.policy_for(conn, tenant_id=p.tenant_id, agent_id=agent_id, must_exist=True)
        return governance.resolve_review(
            conn,
            tenant_id=p.tenant_id,
            agent_id=agent_id,
            review_id=review_id,
            keep=body.keep,
            reason=redact.redact(body.reason) if policy.redact_pii else body.reason,  # kept in the audit trail
            actor=_actor(p),
            may_change_l3="admin" in p.scopes,
            policy=policy,
        )


@router.post("/v1/agents/{agent_id}/forget", response_model=Forgotten)
def forget_route(
    agent_id: AgentId, body: ForgetIn, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    """Right to be forgotten: erase memories, their episodes, their turns, copies of their
    text and what was derived from them, and take the text out of sessions, context calls,
    webhook payloads and archives; returns a receipt with ids and counts per place."""
    p.require("erase", agent_id)
    req = forget.Request(
        body.provenance,
        tuple(body.memory_ids) if body.memory_ids else None,
        body.session_id,
        body.before,
        body.subject,
        body.keep_turns,
    )
    req.validate()
    with tx(request, p) as conn:
        return forget.forget(conn, tenant_id=p.tenant_id, agent_id=agent_id, request=req, actor=_actor(p))


@router.get("/v1/agents/{agent_id}/policy", response_model=PolicyOut)
def agent_policy(agent_id: AgentId, request: Request, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return governance.get_policy(conn, tenant_id=p.tenant_id, agent_id=agent_id)


@router.put("/v1/agents/{agent_id}/policy", response_model=PolicyOut)
def put_agent_policy(
    agent_id: AgentId, request: Request, body: dict[str, Any] = Body(...), p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    """Replace the agent's overrides (the agent is created on first use). A bad value is a
    422 naming the field, and nothing changes."""
    p.require("admin", agent_id)
    with tx(request, p) as conn:
        if p.agent_ids is not None:
            _check_pool_grants(conn, p, agent_id, body)
        out = governance.put_policy(conn, tenant_id=p.tenant_id, agent_id=agent_id, overrides=body)
    resources(request).policies.forget(p.tenant_id, agent_id)
    runtime.invalidate_caches(resources(request).settings.redis_url)  # and every other API process
    return out


def _check_pool_grants(conn: Conn, p: keys.Principal, agent_id: str, body: dict[str, Any]) -> None:
    """A key limited to some agents may grant its agent (pools_read, pools_write) only the
    pools it reaches itself (its list names 'pool~<name>') or those the agent already has:
    else it could read and write any pool of the tenant through the agent. Forbidden otherwise."""
    assert p.agent_ids is not None
    current = tenancy.policy_for(conn, tenant_id=p.tenant_id, agent_id=agent_id)
    for name in ("pools_read", "pools_write"):
        asked = body.get(name)
        had = set(getattr(current, name))
        for pool in asked if isinstance(asked, list) else []:  # a malformed value is put_policy's 422
            if isinstance(pool, str) and pool not in had and pools.PREFIX + pool not in p.agent_ids:
                raise errors.Forbidden(f"{name}: this key does not reach pool {pool!r}, so it cannot grant it")


@router.get("/v1/policy", response_model=PolicyOut)
def tenant_policy(request: Request, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
    p.require("memories:read")
    with tx(request, p) as conn:
        return governance.get_policy(conn, tenant_id=p.tenant_id, agent_id=None)


@router.put("/v1/policy", response_model=PolicyOut)
def put_tenant_policy(
    request: Request, body: dict[str, Any] = Body(...), p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    """Replace the tenant's defaults (every agent without its own override follows them)."""
    p.require("admin")
    if p.agent_ids is not None:
        raise errors.Forbidden("a key limited to some agents cannot change the tenant's defaults")
    with tx(request, p) as conn:
        out = governance.put_policy(conn, tenant_id=p.tenant_id, agent_id=None, overrides=body)
    resources(request).policies.forget(p.tenant_id)
    runtime.invalidate_caches(resources(request).settings.redis_url)  # and every other API process
    return out


@router.post("/v1/agents/{agent_id}/retention/run", response_model=RetentionReport)
def retention_run(agent_id: AgentId, request: Request, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
    """Sweep the agent now (the same rules as the beat sweep); returns the report."""
    p.require("admin", agent_id)
    report = retention.sweep_agent(resources(request).pool, tenant_id=p.tenant_id, agent_id=agent_id, trigger="api")
    return report.to_json()


@router.get("/v1/agents/{agent_id}/retention", response_model=RetentionRuns)
def retention_reports(
    agent_id: AgentId, request: Request, limit: int = Query(20, ge=1, le=500), p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    """The agent's latest retention reports, newest first."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        rows = retention.runs(conn, tenant_id=p.tenant_id, agent_id=agent_id, limit=limit)
    return {"runs": [jsonable(r) for r in rows]}
