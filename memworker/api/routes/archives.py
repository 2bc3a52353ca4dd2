"""Session archives over HTTP: archive (snapshot, close, distil), restore, list,
download."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import Field

from memworker import keys
from memworker.api.deps import AgentId, principal, tx
from memworker.api.routes.sessions import ActingSubject, SessionId, after_commit
from memworker.schemas import PG_INT_MAX, ArchiveList, ArchiveOut, Restored, Strict
from memworker.sessions import service

router = APIRouter(tags=["sessions"])


class RestoreIn(Strict):
    version: int | None = Field(default=None, ge=1, le=PG_INT_MAX)  # default: the latest archive


@router.post("/v1/agents/{agent_id}/sessions/{session_id}/archive", response_model=ArchiveOut)
def post_archive(
    agent_id: AgentId,
    session_id: SessionId,
    request: Request,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> ArchiveOut:
    """Snapshot (gzip JSONL), close, and distil the session into long-term memory."""
    p.require("memories:write", agent_id)
    with tx(request, p) as conn:
        done = service.archive_session(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, session_id=session_id, subject=subject
        )
    after_commit(request, p.tenant_id, done.episode_id, done.deliveries)
    return done.answer


@router.post("/v1/agents/{agent_id}/sessions/{session_id}/restore", response_model=Restored)
def post_restore(
    agent_id: AgentId,
    session_id: SessionId,
    request: Request,
    body: RestoreIn | None = None,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> Restored:
    p.require("memories:write", agent_id)
    with tx(request, p) as conn:
        return service.restore_session(
            conn,
            tenant_id=p.tenant_id,
            agent_id=agent_id,
            session_id=session_id,
            version=body.version if body else None,
            subject=subject,
        )


@router.get("/v1/agents/{agent_id}/sessions/{session_id}/archives", response_model=ArchiveList)
def list_archives(
    agent_id: AgentId,
    session_id: SessionId,
    request: Request,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> ArchiveList:
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        return service.archives(conn, tenant_id=p.tenant_id, agent_id=agent_id, session_id=session_id, subject=subject)


@router.get(
    "/v1/agents/{agent_id}/sessions/{session_id}/archives/{version}",
    response_class=Response,
    responses={200: {"content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}}}},
)
def download_archive(
    agent_id: AgentId,
    session_id: SessionId,
    version: Annotated[int, Path(ge=1, le=PG_INT_MAX)],
    request: Request,
    subject: ActingSubject = None,
    p: keys.Principal = Depends(principal),
) -> Response:
    """The archive as stored: gzip-compressed JSONL."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        data = service.archive_bytes(
            conn, tenant_id=p.tenant_id, agent_id=agent_id, session_id=session_id, version=version, subject=subject
        )
    name = f"{agent_id}-{session_id}-v{version}.jsonl.gz"
    return Response(
        data, media_type="application/gzip", headers={"Content-Disposition": f'attachment; filename="{name}"'}
    )
