"""Tenant webhooks over HTTP: register (the signing secret is shown once), list,
delete, and each webhook's recent deliveries. Tenant configuration: the admin scope; a key
limited to some agents sees and manages only webhooks limited to those agents."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from pydantic import Field

from memworker import errors, keys
from memworker.api.deps import principal, resources, tx
from memworker.domain import memories
from memworker.schemas import DeliveryList, Strict, WebhookList, WebhookOut
from memworker.sessions import service

router = APIRouter(tags=["webhooks"])


class WebhookIn(Strict):
    url: str = Field(min_length=8, max_length=2000, pattern=r"^https?://\S+$")
    events: list[Literal["pre_turn", "post_turn", "archive"]] = Field(min_length=1, max_length=3)
    agent_ids: list[str] | None = Field(default=None, min_length=1, max_length=1000)  # default: every agent
    description: str = Field(default="", max_length=500)


@router.post("/v1/webhooks", status_code=201, response_model=WebhookOut)
def post_webhook(body: WebhookIn, request: Request, p: keys.Principal = Depends(principal)) -> WebhookOut:
    """Register a webhook; the answer holds its signing secret, shown this once."""
    p.require("admin")
    if body.agent_ids is None and p.agent_ids is not None:
        raise errors.Forbidden("this key is limited to some agents: give agent_ids among them")
    for agent in body.agent_ids or []:
        if not memories.AGENT_ID.fullmatch(agent):
            raise errors.InvalidInput(f"agent_ids: {agent!r} is not an agent id")
        p.require("admin", agent)
    with tx(request, p) as conn:
        return service.create_webhook(
            conn,
            tenant_id=p.tenant_id,
            url=body.url,
            events=list(body.events),
            agent_ids=body.agent_ids,
            settings=resources(request).settings,
            description=body.description,
        )


@router.get("/v1/webhooks", response_model=WebhookList)
def list_webhooks(request: Request, p: keys.Principal = Depends(principal)) -> WebhookList:
    p.require("admin")
    with tx(request, p) as conn:
        return service.webhooks(conn, tenant_id=p.tenant_id, visible_to=p.agent_ids)


@router.delete("/v1/webhooks/{webhook_id}", status_code=204)
def delete_webhook(webhook_id: UUID, request: Request, p: keys.Principal = Depends(principal)) -> Response:
    """Delete a webhook and its pending and past deliveries."""
    p.require("admin")
    with tx(request, p) as conn:
        service.delete_webhook(conn, tenant_id=p.tenant_id, webhook_id=webhook_id, visible_to=p.agent_ids)
    return Response(status_code=204)


@router.get("/v1/webhooks/{webhook_id}/deliveries", response_model=DeliveryList)
def list_deliveries(
    webhook_id: UUID, request: Request, limit: int = Query(50, ge=1, le=1000), p: keys.Principal = Depends(principal)
) -> DeliveryList:
    """The webhook's deliveries, newest first: status, attempts, last HTTP status and error."""
    p.require("admin")
    with tx(request, p) as conn:
        return service.deliveries(
            conn, tenant_id=p.tenant_id, webhook_id=webhook_id, visible_to=p.agent_ids, limit=limit
        )
