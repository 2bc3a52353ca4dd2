"""Sleep over HTTP: ask for a pass, read its reports, the agent's consolidation status and
its profile."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Depends, Query, Request

from memworker import errors, keys
from memworker.api.deps import AgentId, principal, publisher, resources, tx
from memworker.domain import memories
from memworker.schemas import PG_INT_MAX, ConsolidationStatus, ProfileOut, RunList, RunQueued
from memworker.sleep import consolidation, profile, subjects
from memworker.sleep.reports import run_json, status_json
from memworker.storage import sleep_db
from memworker.tenancy import service as tenancy

logger = logging.getLogger(__name__)
router = APIRouter(tags=["consolidation"])


@router.post("/v1/agents/{agent_id}/consolidate", status_code=202, response_model=RunQueued)
def post_consolidate(agent_id: AgentId, request: Request, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
    """Queue one pass now (it still waits for the agent's lock). 422 when the agent's policy
    has consolidation off: with a paid LLM it must be switched on first."""
    p.require("memories:write", agent_id)
    settings = resources(request).settings
    with tx(request, p) as conn:
        policy = tenancy.policy_for(conn, tenant_id=p.tenant_id, agent_id=agent_id, must_exist=True)
        if not consolidation.enabled(policy, settings):
            raise errors.InvalidInput(
                "consolidation is off for this agent; set its policy consolidation_enabled to true "
                "(memworker consolidation enable --agent ...)"
            )
        run_id = consolidation.request_run(conn, tenant_id=p.tenant_id, agent_id=agent_id, trigger="api")
        # Also the explicit gate: if the message below is lost, the next sweep takes the agent.
        sleep_db.request_pass(conn, tenant_id=p.tenant_id, agent_id=agent_id)
    try:
        publisher(request).consolidate(p.tenant_id, agent_id, run_id)
    except Exception as exc:  # the run row and the request flag are durable; the sweep covers it
        logger.warning("enqueue of consolidation run %s failed; the sweep will take the agent: %s", run_id, exc)
    return {"run_id": str(run_id), "status": "queued"}


@router.get("/v1/agents/{agent_id}/consolidation/runs", response_model=RunList)
def list_runs(
    agent_id: AgentId, request: Request, limit: int = Query(20, ge=1, le=200), p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    """The agent's pass reports, newest first."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        tenancy.require_agent(conn, tenant_id=p.tenant_id, agent_id=agent_id)
        rows = sleep_db.runs_list(conn, tenant_id=p.tenant_id, agent_id=agent_id, limit=limit)
    return {"runs": [run_json(r) for r in rows]}


@router.get("/v1/agents/{agent_id}/consolidation", response_model=ConsolidationStatus)
def get_status(agent_id: AgentId, request: Request, p: keys.Principal = Depends(principal)) -> dict[str, Any]:
    """Whether consolidation is on, the gates, failures (flagged after 3 in a row)."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        policy = tenancy.policy_for(conn, tenant_id=p.tenant_id, agent_id=agent_id, must_exist=True)
        row = sleep_db.agent_gates(conn, tenant_id=p.tenant_id, agent_id=agent_id)
    assert row is not None
    return status_json(row, consolidation.enabled(policy, resources(request).settings))


@router.get("/v1/agents/{agent_id}/profile", response_model=ProfileOut)
def get_profile(
    agent_id: AgentId,
    request: Request,
    version: int | None = Query(None, ge=1, le=PG_INT_MAX),
    subject: str | None = Query(None, pattern=memories.SUBJECT_PATTERN),
    p: keys.Principal = Depends(principal),
) -> dict[str, Any]:
    """The agent's profile (latest version, or ?version=N of the last ten); version 0 and
    empty sections before the first pass. ?subject=X: that subject's profile, built from its
    live memories when asked (no versions)."""
    p.require("memories:read", agent_id)
    if subject is not None and version is not None:
        raise errors.InvalidInput("a subject's profile has no versions: give subject or version, not both")
    with tx(request, p) as conn:
        if subject is not None:
            policy = tenancy.policy_for(conn, tenant_id=p.tenant_id, agent_id=agent_id, must_exist=True)
            doc = subjects.build(conn, tenant_id=p.tenant_id, agent_id=agent_id, subject=subject, policy=policy)
            return {"agent_id": agent_id, **doc}
        tenancy.require_agent(conn, tenant_id=p.tenant_id, agent_id=agent_id)
        doc = profile.load(conn, tenant_id=p.tenant_id, agent_id=agent_id, version=version)
    if version is not None and doc["version"] != version:
        raise errors.NotFound("profile version not found")
    return {"agent_id": agent_id, **doc}
