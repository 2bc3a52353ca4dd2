"""Export and import (data portability, docs/export.md): an agent's data, or one subject's
across the tenant's agents, streamed as NDJSON; and an import of such a file (a restore), of a
plain JSONL of texts, of LangGraph store items, or a Mem0 export (its get_all answers)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from memworker import errors, keys
from memworker.api.deps import AgentId, check_metadata, principal, resources, tx
from memworker.domain import memories
from memworker.memories import service as memory_service
from memworker.models import embeddings
from memworker.portability import export, foreign, mem0, restore
from memworker.portability import format as fmt
from memworker.schemas import ImportReport, MemoryIn
from memworker.tenancy import service as tenancy

router = APIRouter(tags=["portability"])

NDJSON = "application/x-ndjson"
_STREAMED: dict[int | str, dict[str, Any]] = {
    200: {"content": {NDJSON: {"schema": {"type": "string", "format": "binary"}}}}
}
# An import body is spooled to a temporary file as it arrives (never held in memory), up to
# this size: a 100,000-memory export with vectors is about 250 MB.
MAX_IMPORT_BYTES = 4 * 1024**3


def _model(request: Request) -> tuple[str, int]:
    """This server's embedding model: its name and dimension."""
    res = resources(request)
    return fmt.model_name(res.settings.embedding_model), embeddings.SCHEMA_DIM


def _stream(request: Request, spec: export.Spec, filename: str) -> StreamingResponse:
    return StreamingResponse(
        export.lines(resources(request).pool, spec),
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
    model, dim = _model(request)
    spec = export.Spec(p.tenant_id, agent_id, None, vectors, model, dim)
    return _stream(request, spec, f"{agent_id}.memworker.ndjson")


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
    model, dim = _model(request)
    spec = export.Spec(p.tenant_id, None, subject, vectors, model, dim, agents=p.agent_ids)
    return _stream(request, spec, f"{subject}.memworker.ndjson")


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
) -> dict[str, Any]:
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


def _import(request: Request, p: keys.Principal, agent_id: str, path: Path, forced: str) -> dict[str, Any]:
    kind = restore.sniff(path) if forced == "auto" else forced
    if kind == restore.MEMWORKER:
        header = restore.check(path)
        model, dim = _model(request)
        target = restore.Target(p.tenant_id, agent_id, resources(request).embedder, model, dim)
        with tx(request, p) as conn:
            counts = restore.restore(conn, target, path, header)
        return _report(kind, path, counts)
    return _write_foreign(request, p, agent_id, path, kind)


def _report(kind: str, path: Path, counts: dict[str, int]) -> dict[str, Any]:
    # a Mem0 file's "lines" are its memories (its answers may be pretty-printed)
    lines = sum(1 for _ in mem0.items(path)) if kind == restore.MEM0 else restore.count_lines(path)
    base = {"format": kind, "lines": lines, "memories_written": 0, "memories_existing": 0}
    return base | {"reembedded": 0} | counts


def _bodies(request: Request, path: Path, kind: str) -> Any:
    """Each line (a Mem0 file's each memory) of a foreign file as a write; InvalidInput names
    the first one that is not."""
    if kind == restore.MEM0:
        for where, obj in mem0.items(path):
            yield _body(request, mem0.memory, obj, where)
        return
    make = foreign.langgraph if kind == restore.LANGGRAPH else foreign.plain
    for n, obj in restore.numbered(path):
        try:
            yield _body(request, make, obj, "")
        except errors.InvalidInput as exc:
            raise restore.LineError(n, str(exc)) from None


def _body(request: Request, make: Callable[[Any], MemoryIn], obj: Any, where: str) -> MemoryIn:
    try:
        body = make(obj)
        check_metadata(request, body.metadata)
    except (ValueError, errors.InvalidInput) as exc:
        raise errors.InvalidInput(f"{where}: {exc}" if where else str(exc)) from None
    return body


def _write_foreign(request: Request, p: keys.Principal, agent_id: str, path: Path, kind: str) -> dict[str, Any]:
    """Every line checked (nothing written when one is wrong), then written in batches through
    the memories batch write: redaction, dedup and governance as for any write. Each line's
    idempotency key makes a second import of the file write nothing."""
    for _ in _bodies(request, path, kind):
        pass
    started = datetime.now(UTC)
    batch: list[MemoryIn] = []
    written = existing = 0
    size = resources(request).settings.max_batch
    for body in _bodies(request, path, kind):
        batch.append(body)
        if len(batch) == size:
            new = _write_batch(request, p, agent_id, batch, started)
            written, existing, batch = written + new, existing + len(batch) - new, []
    if batch:
        new = _write_batch(request, p, agent_id, batch, started)
        written, existing = written + new, existing + len(batch) - new
    return _report(kind, path, {"memories_written": written, "memories_existing": existing})


def _write_batch(request: Request, p: keys.Principal, agent_id: str, batch: list[MemoryIn], started: datetime) -> int:
    """Writes a batch; answers how many memories it made (the others were there already)."""
    res = resources(request)
    checked = memory_service.checked(batch, settings=res.settings, embedder=res.embedder)
    with tx(request, p) as conn:
        out = memory_service.write(conn, tenant_id=p.tenant_id, owner=agent_id, batch=checked, embedder=res.embedder)
    return len({m.id for m in out if m.created_at >= started})
