"""Export and import (data portability, docs/export.md): an agent's data, or one subject's
across the tenant's agents, streamed as NDJSON; and an import of such a file (a restore), of a
plain JSONL of texts, of LangGraph store items, or a Mem0 export (its get_all answers)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from memworker import errors, keys
from memworker.api.deps import AgentId, principal, resources, tx
from memworker.domain import memories
from memworker.portability import service
from memworker.schemas import ImportReport
from memworker.tenancy import service as tenancy

router = APIRouter(tags=["portability"])

NDJSON = "application/x-ndjson"
_STREAMED: dict[int | str, dict[str, Any]] = {
    200: {"content": {NDJSON: {"schema": {"type": "string", "format": "binary"}}}}
}
# An import body is spooled to a temporary file as it arrives (never held in memory), up to
# this size: a 100,000-memory export with vectors is about 250 MB.
MAX_IMPORT_BYTES = 4 * 1024**3


def _stream(lines: Iterator[bytes], filename: str) -> StreamingResponse:
    return StreamingResponse(
        lines,
        media_type=NDJSON,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@router.get("/v1/agents/{agent_id}/export", response_class=StreamingResponse, responses=_STREAMED)
def export_agent(
    agent_id: AgentId,
    request: Request,
    vectors: bool = Query(False, alias="embeddings", description="include each memory's vector"),
    p: keys.Principal = Depends(principal),
) -> StreamingResponse:
    """Everything the agent holds, as NDJSON (docs/export.md), streamed page by page."""
    p.require("memories:read", agent_id)
    with tx(request, p) as conn:
        tenancy.require_agent(conn, tenant_id=p.tenant_id, agent_id=agent_id)
    res = resources(request)
    lines = service.agent_export(res.pool, res.settings, tenant_id=p.tenant_id, agent_id=agent_id, vectors=vectors)
    return _stream(lines, f"{agent_id}.memworker.ndjson")


@router.get("/v1/export", response_class=StreamingResponse, responses=_STREAMED)
def export_subject(
    request: Request,
    subject: str = Query(pattern=memories.SUBJECT_PATTERN, description="the subject whose data to export"),
    vectors: bool = Query(False, alias="embeddings", description="include each memory's vector"),
    p: keys.Principal = Depends(principal),
) -> StreamingResponse:
    """One subject's memories, episodes and sessions across the tenant's agents (a person's
    data-access request), as NDJSON; a key limited to some agents exports from those alone."""
    p.require("memories:read")
    res = resources(request)
    lines = service.subject_export(
        res.pool, res.settings, tenant_id=p.tenant_id, subject=subject, vectors=vectors, agents=p.agent_ids
    )
    return _stream(lines, f"{subject}.memworker.ndjson")


@router.post(
    "/v1/agents/{agent_id}/import",
    response_model=ImportReport,
    openapi_extra={
        "requestBody": {"required": True, "content": {NDJSON: {"schema": {"type": "string", "format": "binary"}}}}
    },
)
async def import_file(
    agent_id: AgentId,
    request: Request,
    format: Literal["auto", "memworker", "jsonl", "langgraph", "mem0"] = Query(
        "auto", description="auto: told by the file's start"
    ),
    p: keys.Principal = Depends(principal),
) -> ImportReport:
    """Import an NDJSON body: a memworker export (a restore, in one transaction), a JSONL of
    {"text": ...} lines, LangGraph items or Mem0 get_all answers (the ordinary batch write). Every
    line (a Mem0 file's every memory) is checked first: a bad one is a 422 naming it, and
    nothing is written."""
    p.require("memories:write", agent_id)
    with tempfile.TemporaryDirectory(prefix="memworker-import-") as folder:
        path = Path(folder) / "body.ndjson"
        size = 0
        with path.open("wb") as f:
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_IMPORT_BYTES:
                    raise errors.PayloadTooLarge(f"an import body is at most {MAX_IMPORT_BYTES} bytes")
                f.write(chunk)
        return await run_in_threadpool(_import, request, p, agent_id, path, format)


def _import(request: Request, p: keys.Principal, agent_id: str, path: Path, forced: str) -> ImportReport:
    res = resources(request)
    return service.import_file(
        path,
        forced,
        tenant_id=p.tenant_id,
        agent_id=agent_id,
        settings=res.settings,
        embedder=res.embedder,
        transaction=lambda: tx(request, p),
    )
