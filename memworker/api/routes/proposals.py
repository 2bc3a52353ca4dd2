"""Pool proposals over HTTP: what sleep found several agents learnt independently, waiting
for a person to approve it into a shared pool or reject it (an agent's policy pools_propose =
'review'). See memworker/fleet/proposals.py."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import Field

from memworker import keys
from memworker.api.deps import principal, resources, tx
from memworker.domain import memories
from memworker.fleet import pools, service
from memworker.schemas import ProposalDecided, ProposalList, Strict

router = APIRouter(tags=["pools"])
PoolName = Path(pattern=memories.AGENT_ID.pattern, max_length=128, description="the pool's name")


class DecideIn(Strict):
    reason: str = Field(default="", max_length=500)


def _agents(p: keys.Principal) -> list[str] | None:
    return None if p.agent_ids is None else list(p.agent_ids)


@router.get("/v1/pools/{pool}/proposals", response_model=ProposalList)
def list_proposals(
    request: Request,
    pool: str = PoolName,
    status: Literal["open", "approved", "rejected", "all"] = "open",
    limit: int = Query(100, ge=1, le=1000),
    p: keys.Principal = Depends(principal),
) -> ProposalList:
    """The pool's proposals (open by default; status=all for every one), oldest first, each
    with its sources."""
    p.require("memories:read", pools.owner(pool))
    with tx(request, p) as conn:
        return service.proposal_list(
            conn,
            tenant_id=p.tenant_id,
            pool=pool,
            status=None if status == "all" else status,
            agent_ids=_agents(p),
            limit=limit,
        )


@router.post("/v1/pools/{pool}/proposals/{proposal_id}/approve", response_model=ProposalDecided)
def approve_proposal(
    proposal_id: UUID,
    request: Request,
    body: DecideIn | None = None,
    pool: str = PoolName,
    p: keys.Principal = Depends(principal),
) -> ProposalDecided:
    """Share the proposed memory into the pool with every live source in its provenance;
    approving again answers the same pool memory. 409 for a rejected proposal."""
    p.require("memories:write", pools.owner(pool))
    with tx(request, p) as conn:
        return service.approve(
            conn,
            tenant_id=p.tenant_id,
            pool=pool,
            proposal_id=proposal_id,
            agent_ids=_agents(p),
            reason=body.reason if body else "",
            actor=f"key:{p.key_id}",
            embed=lambda text: resources(request).embedder.embed([text])[0],
        )


@router.post("/v1/pools/{pool}/proposals/{proposal_id}/reject", response_model=ProposalDecided)
def reject_proposal(
    proposal_id: UUID,
    request: Request,
    body: DecideIn | None = None,
    pool: str = PoolName,
    p: keys.Principal = Depends(principal),
) -> ProposalDecided:
    """Reject the proposal: the fact is not proposed to this pool again, nor shared into it
    automatically. 409 for an approved proposal."""
    p.require("memories:write", pools.owner(pool))
    with tx(request, p) as conn:
        return service.reject(
            conn,
            tenant_id=p.tenant_id,
            pool=pool,
            proposal_id=proposal_id,
            agent_ids=_agents(p),
            reason=body.reason if body else "",
            actor=f"key:{p.key_id}",
        )
