"""Hybrid recall over HTTP."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool

from memworker import keys, metrics, recall
from memworker.api.deps import AgentId, check_metadata, client_lsn, principal, reads, resources, tx
from memworker.domain.policy import Policy
from memworker.fleet import pools
from memworker.schemas import AgentsRecallIn, Recalled, RecallIn
from memworker.tenancy import service as tenancy

router = APIRouter(tags=["recall"])


@router.post("/v1/agents/{agent_id}/recall", response_model=Recalled)
async def post_recall(
    agent_id: AgentId, body: RecallIn, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    # The work in one worker thread, the answer validated and encoded on the event loop: a
    # sync route would take a thread for itself and another for its answer's validation.
    return await run_in_threadpool(_recall, agent_id, body, request, p)


def _recall(agent_id: str, body: RecallIn, request: Request, p: keys.Principal) -> dict[str, Any]:
    p.require("memories:read", agent_id)
    check_metadata(request, body.metadata, "metadata filter")
    started = time.perf_counter()
    q = _query(body)
    res = resources(request)
    qvec = res.query_embedder.embed_one(q.text)  # before taking a connection: none waits on the model
    policy = res.policies.get(p.tenant_id, agent_id, lambda: _policy(request, p, agent_id))
    hits = recall.serve(
        res.pool,
        qvec,
        tenant_id=p.tenant_id,
        agent_id=agent_id,
        query=q,
        policy=policy,
        access=request.app.state.bumps,
        reads=reads(request),  # a replica when there are some (docs/scaling.md)
        client_lsn=client_lsn(request),
    )
    took = time.perf_counter() - started
    metrics.RECALL_SECONDS.observe(took)
    if not hits:
        metrics.RECALL_EMPTY.inc()
    return {"memories": hits, "took_ms": round(took * 1000, 3)}


def _query(body: RecallIn) -> recall.Query:
    """The body's recall query, checked (InvalidInput)."""
    q = recall.Query(
        body.query,
        body.k,
        tuple(body.tiers) if body.tiers else None,
        tuple(body.kinds) if body.kinds else None,
        body.since,
        body.until,
        body.metadata,
        body.explain,
        body.subject,
        include_superseded=body.include_superseded,
    )
    q.validate()
    return q


def _policy(request: Request, p: keys.Principal, agent_id: str) -> Policy:
    """The agent's effective policy; NotFound (404) when the agent does not exist."""
    with tx(request, p) as conn:
        return tenancy.policy_for(conn, tenant_id=p.tenant_id, agent_id=agent_id, must_exist=True)


@router.post("/v1/recall", response_model=Recalled)
def post_recall_agents(
    body: AgentsRecallIn, request: Request, p: keys.Principal = Depends(principal)
) -> dict[str, Any]:
    """One ranked list over several agents (a supervisor's or operator's recall); each hit
    names its agent_id. A key limited to some agents may name only those (404 otherwise, as
    for one agent); every named agent must exist. Weights and thresholds are the tenant's
    policy; BM25's statistics are the union's (recall.serve_agents)."""
    agents = list(dict.fromkeys(body.agents))
    owners = [pools.owner(name) for name in dict.fromkeys(body.pools)]
    for agent_id in agents + owners:  # a key limited to some agents reads a pool only if it names it
        p.require("memories:read", agent_id)
    check_metadata(request, body.metadata, "metadata filter")
    started = time.perf_counter()
    q = _query(body)
    res = resources(request)
    qvec = res.query_embedder.embed_one(q.text)  # before taking a connection: none waits on the model
    with tx(request, p) as conn:
        for agent_id in agents:
            tenancy.require_agent(conn, tenant_id=p.tenant_id, agent_id=agent_id)
        for name in dict.fromkeys(body.pools):
            pools.require(conn, tenant_id=p.tenant_id, name=name)
        policy = tenancy.policy_for(conn, tenant_id=p.tenant_id, agent_id=None)
    hits = recall.serve_agents(res.pool, qvec, tenant_id=p.tenant_id, agent_ids=agents + owners, query=q, policy=policy)
    took = time.perf_counter() - started
    metrics.RECALL_SECONDS.observe(took)
    return {"memories": hits, "took_ms": round(took * 1000, 3)}
