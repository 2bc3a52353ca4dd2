"""Sleep over HTTP: ask for a pass, read its reports, the agent's consolidation status and
its profile."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Depends, Query, Request

from memworker import keys
from memworker.api.deps import AgentId, principal, publisher, resources, tx
from memworker.domain import memories
from memworker.schemas import PG_INT_MAX, ConsolidationStatus, ProfileOut, RunList, RunQueued
from memworker.sleep import service

logger = logging.getLogger(__name__)
router = APIRouter(tags=["consolidation"])


@router.post("/v1/agents/{agent_id}/consolidate", status_code=202, response_model=RunQueued)
def post_consolidate(agent_id: AgentId, request: Request, p: keys.Principal = Depends(principal)) -> RunQueued:
    """Queue one pass now (it still waits for the agent's lock). 422 when the agent's policy
    has consolidation off: with a paid LLM it must be switched on first."""
    p.require("memories:write", agent_id)
    settings = resources(request).settings
    with tx(request, p) as conn:
        run_id = service.queue_pass(conn, settings, tenant_id=p.tenant_id, agent_id=agent_id, trigger="api")
    try:
        publisher(request).consolidate(p.tenant_id, agent_id, run_id)
    except Exception as exc:  # the run row and the request flag are durable; the sweep covers it
        logger.warning("enqueue of consolidation run %s failed; the sweep will take the agent: %s", run_id, exc)
    return {"run_id": str(run_id), "status": "queued"}


@router.get("/v1/agents/{agent_id}/consolidation/runs", response_model=RunList)
def list_runs(
    agent_id: AgentId, request: Request, limit: int = Query(20, ge=1, le=200), p: keys.Principal = Depends(principal)
) -> RunList:
    """The agent's pass reports, newest first."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        runs = service.run_reports(conn, tenant_id=p.tenant_id, agent_id=agent_id, limit=limit)
    return {"runs": list(runs)}


@router.get("/v1/agents/{agent_id}/consolidation", response_model=ConsolidationStatus)
def get_status(agent_id: AgentId, request: Request, p: keys.Principal = Depends(principal)) -> ConsolidationStatus:
    """Whether consolidation is on, the gates, failures (flagged after 3 in a row)."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        status = service.status(conn, resources(request).settings, tenant_id=p.tenant_id, agent_id=agent_id)
    return status.to_json()


@router.get("/v1/agents/{agent_id}/profile", response_model=ProfileOut)
def get_profile(
    agent_id: AgentId,
    request: Request,
    version: int | None = Query(None, ge=1, le=PG_INT_MAX),
    subject: str | None = Query(None, pattern=memories.SUBJECT_PATTERN),
    p: keys.Principal = Depends(principal),
) -> ProfileOut:
    """The agent's profile (latest version, or ?version=N of the last ten); version 0 and
    empty sections before the first pass. ?subject=X: that subject's profile, built from its
    live memories when asked (no versions)."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        doc = service.agent_profile(conn, tenant_id=p.tenant_id, agent_id=agent_id, version=version, subject=subject)
    return doc.to_json()
