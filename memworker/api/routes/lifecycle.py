"""Lifecycle governance over HTTP: promote, history, review, forget, policy, retention."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, cast
from uuid import UUID

from fastapi import APIRouter, Body, Depends, Query, Request
from pydantic import Field

from memworker import keys, runtime
from memworker.api.deps import AgentId, principal, resources, tx
from memworker.domain import memories
from memworker.erase import service as erase
from memworker.lifecycle import service
from memworker.memories.service import memory_out
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

router = APIRouter(tags=["lifecycle"])


class PromoteIn(Strict):
    tier: Literal[Tier.L1, Tier.L2, Tier.L3]
    reason: str = Field(min_length=1, max_length=500)


class ResolveIn(Strict):
    keep: str = Field(min_length=1, max_length=64, description="'both' or the id of the memory to keep")
    reason: str = Field(default="", max_length=500)


class ForgetIn(Strict):
    provenance: str | None = Field(default=None, min_length=1, max_length=500)
    memory_ids: list[UUID] | None = Field(default=None, min_length=1, max_length=erase.MAX_IDS)
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
) -> MemoryOut:
    """Move a memory up a tier, audited. L3 (canonical) needs the admin scope."""
    p.require("admin" if body.tier == Tier.L3 else "memories:write", agent_id)
    with tx(request, p) as conn:
        promoted = service.promote(
            conn,
            tenant_id=p.tenant_id,
            agent_id=agent_id,
            memory_id=memory_id,
            tier=body.tier,
            reason=body.reason,
            actor=_actor(p),
        )
    return memory_out(promoted)


@router.get("/v1/agents/{agent_id}/memories/{memory_id}/history", response_model=History)
def history(agent_id: AgentId, memory_id: UUID, request: Request, p: keys.Principal = Depends(principal)) -> History:
    """The supersede chain through a memory (oldest first) and its audit events."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.history(conn, tenant_id=p.tenant_id, agent_id=agent_id, memory_id=memory_id)


@router.get("/v1/agents/{agent_id}/review", response_model=ReviewList)
def review_list(
    agent_id: AgentId,
    request: Request,
    status: Literal["open", "resolved"] | None = "open",
    limit: int = Query(100, ge=1, le=1000),
    p: keys.Principal = Depends(principal),
) -> ReviewList:
    """Contradictions the validate/repair rules could not settle on their own."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.reviews(conn, tenant_id=p.tenant_id, agent_id=agent_id, status=status, limit=limit)


@router.post("/v1/agents/{agent_id}/review/{review_id}/resolve", response_model=ReviewResolved)
def review_resolve(
    agent_id: AgentId, review_id: UUID, body: ResolveIn, request: Request, p: keys.Principal = Depends(principal)
) -> ReviewResolved:
    """keep 'both', or keep one memory: the other is superseded by it."""
    p.require("memories:write", agent_id)
    with tx(request, p) as conn:
        return service.resolve_review(
            conn,
            tenant_id=p.tenant_id,
            agent_id=agent_id,
            review_id=review_id,
            keep=body.keep,
            reason=body.reason,
            actor=_actor(p),
            may_change_l3="admin" in p.scopes,
        )


@router.post("/v1/agents/{agent_id}/forget", response_model=Forgotten)
def forget_route(
    agent_id: AgentId, body: ForgetIn, request: Request, p: keys.Principal = Depends(principal)
) -> Forgotten:
    """Right to be forgotten: erase memories, their episodes, their turns, copies of their
    text and what was derived from them, and take the text out of sessions, context calls,
    webhook payloads and archives; returns a receipt with ids and counts per place."""
    p.require("erase", agent_id)
    req = erase.Request(
        body.provenance,
        tuple(body.memory_ids) if body.memory_ids else None,
        body.session_id,
        body.before,
        body.subject,
        body.keep_turns,
    )
    req.validate()
    with tx(request, p) as conn:
        receipt = erase.forget_in_agent(conn, tenant_id=p.tenant_id, agent_id=agent_id, request=req, actor=_actor(p))
    return cast(Forgotten, receipt)


@router.get("/v1/agents/{agent_id}/policy", response_model=PolicyOut)
def agent_policy(agent_id: AgentId, request: Request, p: keys.Principal = Depends(principal)) -> PolicyOut:
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.policy(conn, tenant_id=p.tenant_id, agent_id=agent_id)


@router.put("/v1/agents/{agent_id}/policy", response_model=PolicyOut)
def put_agent_policy(
    agent_id: AgentId, request: Request, body: dict[str, Any] = Body(...), p: keys.Principal = Depends(principal)
) -> PolicyOut:
    """Replace the agent's overrides (the agent is created on first use). A bad value is a
    422 naming the field, and nothing changes."""
    p.require("admin", agent_id)
    with tx(request, p) as conn:
        out = service.set_policy(conn, tenant_id=p.tenant_id, agent_id=agent_id, overrides=body, reach=p.agent_ids)
    resources(request).policies.forget(p.tenant_id, agent_id)
    runtime.invalidate_caches(resources(request).settings.redis_url)  # and every other API process
    return out


@router.get("/v1/policy", response_model=PolicyOut)
def tenant_policy(request: Request, p: keys.Principal = Depends(principal)) -> PolicyOut:
    p.require("memories:read")
    with tx(request, p) as conn:
        return service.policy(conn, tenant_id=p.tenant_id, agent_id=None)


@router.put("/v1/policy", response_model=PolicyOut)
def put_tenant_policy(
    request: Request, body: dict[str, Any] = Body(...), p: keys.Principal = Depends(principal)
) -> PolicyOut:
    """Replace the tenant's defaults (every agent without its own override follows them)."""
    p.require("admin")
    with tx(request, p) as conn:
        out = service.set_policy(conn, tenant_id=p.tenant_id, agent_id=None, overrides=body, reach=p.agent_ids)
    resources(request).policies.forget(p.tenant_id)
    runtime.invalidate_caches(resources(request).settings.redis_url)  # and every other API process
    return out


@router.post("/v1/agents/{agent_id}/retention/run", response_model=RetentionReport)
def retention_run(agent_id: AgentId, request: Request, p: keys.Principal = Depends(principal)) -> RetentionReport:
    """Sweep the agent now (the same rules as the beat sweep); returns the report."""
    p.require("admin", agent_id)
    return service.sweep_report(resources(request).pool, tenant_id=p.tenant_id, agent_id=agent_id, trigger="api")


@router.get("/v1/agents/{agent_id}/retention", response_model=RetentionRuns)
def retention_reports(
    agent_id: AgentId, request: Request, limit: int = Query(20, ge=1, le=500), p: keys.Principal = Depends(principal)
) -> RetentionRuns:
    """The agent's latest retention reports, newest first."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.retention_reports(conn, tenant_id=p.tenant_id, agent_id=agent_id, limit=limit)
