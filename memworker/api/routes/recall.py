"""Hybrid recall over HTTP."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from memworker import keys
from memworker.api.deps import AgentId, check_metadata, client_lsn, principal, reads, resources, tx
from memworker.domain.policy import Policy
from memworker.fleet import pools
from memworker.recall import service
from memworker.schemas import AgentsRecallIn, Recalled, RecallIn
from memworker.tenancy import service as tenancy

router = APIRouter(tags=["recall"])


@router.post("/v1/agents/{agent_id}/recall", response_model=Recalled)
async def post_recall(
    agent_id: AgentId, body: RecallIn, request: Request, p: keys.Principal = Depends(principal)
) -> Recalled:
    # The work in one worker thread, the answer validated and encoded on the event loop: a
    # sync route would take a thread for itself and another for its answer's validation.
    return await run_in_threadpool(_recall, agent_id, body, request, p)


def _recall(agent_id: str, body: RecallIn, request: Request, p: keys.Principal) -> Recalled:
    p.require("memories:read", agent_id)
    check_metadata(request, body.metadata, "metadata filter")
    res = resources(request)
    return service.recall_agent(
        res.pool,
        res.query_embedder,
        tenant_id=p.tenant_id,
        agent_id=agent_id,
        body=body,
        policy=lambda: res.policies.get(p.tenant_id, agent_id, lambda: _policy(request, p, agent_id)),
        access=request.app.state.bumps,
        stats=res.recall_stats,
        reads=reads(request),  # a replica when there are some (docs/scaling.md)
        client_lsn=client_lsn(request),
    )


def _policy(request: Request, p: keys.Principal, agent_id: str) -> Policy:
    """The agent's effective policy; NotFound (404) when the agent does not exist."""
    with tx(request, p) as conn:
        return tenancy.policy_for(conn, tenant_id=p.tenant_id, agent_id=agent_id, must_exist=True)


@router.post("/v1/recall", response_model=Recalled)
def post_recall_agents(body: AgentsRecallIn, request: Request, p: keys.Principal = Depends(principal)) -> Recalled:
    """One ranked list over several agents (a supervisor's or operator's recall); each hit
    names its agent_id. A key limited to some agents may name only those (404 otherwise, as
    for one agent); every named agent must exist. Weights and thresholds are the tenant's
    policy; BM25's statistics are the union's (memworker/recall/hybrid.py: serve_agents)."""
    owners = [pools.owner(name) for name in dict.fromkeys(body.pools)]
    # a key limited to some agents reads a pool only if it names it
    for agent_id in list(dict.fromkeys(body.agents)) + owners:
        p.require("memories:read", agent_id)
    check_metadata(request, body.metadata, "metadata filter")
    res = resources(request)
    return service.recall_agents(res.pool, res.query_embedder, tenant_id=p.tenant_id, body=body)
